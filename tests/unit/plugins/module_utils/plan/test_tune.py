"""What a tune run rolls out (module_utils/plan/tune): the recommendation when its rounds tell it apart, the
inventory's settings on a tie with what it runs or with one round, and the gate from the interval just measured."""

from __future__ import annotations

import json

from ansible_collections.llmops.vllm.plugins.module_utils.plan import tune
from ansible_collections.llmops.vllm.plugins.module_utils.report import compare

from ansible_collections.llmops.vllm.tests.helpers.compare_rounds import KEY, SETTINGS, run

DEPLOYED = {"speculative_method": "dflash", "speculative_model": "/opt/vllm/drafter", "num_speculative_tokens": 4,
            "speculative_extra": {}, "args": {"max-model-len": 256}}
CONFIGURATIONS = [{"name": "none", "speculative": {}},
                  {"name": "k2", "speculative": {"method": "dflash", "num_speculative_tokens": 2}},
                  {"name": "k4", "speculative": {"method": "dflash", "num_speculative_tokens": 4}},
                  {"name": "k4-seqs", "speculative": {"method": "dflash", "num_speculative_tokens": 4},
                   "args": {"max-num-seqs": 6}}]


def kept(per_round):
    results = run(per_round)
    return json.loads(json.dumps(compare.record(compare.compare(results), KEY, results, SETTINGS, "r1")))


def test_a_k_told_apart_from_the_deployed_one_is_rolled_out_with_a_gate_from_its_interval():
    record = kept([("none", "", 0, [[300, 305], [280, 282], [310, 300]]),
                   ("k4", "dflash", 4, [[500, 505], [470, 480], [510, 500]]),
                   ("k2", "dflash", 2, [[800, 810], [760, 770], [830, 820]])])
    choice = tune.choose(record, CONFIGURATIONS, DEPLOYED)
    assert choice["name"] == "k2" and not choice["keep"], choice
    low = record["speedup_intervals"]["k2"]["none"]["low"]
    assert choice["gate"] == {"baseline": "none", "min_speedup": int(low * 100) / 100.0}
    assert choice["settings"] == {
        "vllm_server_speculative_method": "dflash", "vllm_server_speculative_model": "/opt/vllm/drafter",
        "vllm_server_num_speculative_tokens": 2, "vllm_server_speculative_extra": {}, "vllm_server_args_tune": {},
        "vllm_server_gate_baseline_config": "none", "vllm_server_gate_min_speedup": int(low * 100) / 100.0,
        "vllm_server_gate_inconclusive": "pass"}


def test_a_tie_with_what_the_inventory_runs_keeps_it():
    record = kept([("none", "", 0, [[300, 305], [280, 282], [310, 300]]),
                   ("k4", "dflash", 4, [[800, 810], [700, 770], [840, 820]]),
                   ("k2", "dflash", 2, [[790, 820], [760, 770], [800, 790]])])
    assert record["recommendation"]["told_apart"] is False
    choice = tune.choose(record, CONFIGURATIONS, DEPLOYED)
    assert choice["name"] == "k4" and choice["keep"], choice
    # The inventory's K stands; nothing of the speculative settings is written.
    assert "vllm_server_num_speculative_tokens" not in choice["settings"]


def test_the_deployed_k_measured_fastest_is_kept_and_given_its_gate():
    record = kept([("none", "", 0, [[300, 305], [280, 282], [310, 300]]),
                   ("k4", "dflash", 4, [[800, 810], [760, 770], [830, 820]])])
    choice = tune.choose(record, CONFIGURATIONS, DEPLOYED)
    assert choice["keep"] and choice["name"] == "k4" and choice["gate"]["baseline"] == "none"
    assert set(choice["settings"]) == {"vllm_server_gate_baseline_config", "vllm_server_gate_min_speedup",
                                       "vllm_server_gate_inconclusive"}


def test_one_round_changes_nothing_and_says_why():
    record = kept([("none", "", 0, [[300, 305]]), ("k2", "dflash", 2, [[800, 810]])])
    choice = tune.choose(record, CONFIGURATIONS, DEPLOYED)
    assert choice["keep"] and choice["settings"] == {} and "one round gives no interval" in choice["why"]


def test_dflash_not_shown_faster_rolls_out_no_speculation_without_a_gate():
    # The deployed K=4 was not measured; K=2 leads on tok/s by chance but its rounds do not show it faster.
    record = kept([("none", "", 0, [[300, 300], [300, 300]]), ("k2", "dflash", 2, [[900, 900], [100, 100]])])
    choice = tune.choose(record, CONFIGURATIONS, DEPLOYED)
    assert choice["name"] == "none" and not choice["keep"]
    assert choice["settings"]["vllm_server_speculative_method"] == "" and choice["gate"] is None
    assert choice["settings"]["vllm_server_gate_baseline_config"] == ""
    assert choice["settings"]["vllm_server_gate_min_speedup"] is None


def test_a_configuration_s_arguments_become_the_tune_layer():
    record = kept([("none", "", 0, [[300, 305], [280, 282], [310, 300]]),
                   ("k4-seqs", "dflash", 4, [[800, 810], [760, 770], [830, 820]])])
    record["results"] = [dict(r, args={"max-num-seqs": 6}) if r["name"] == "k4-seqs" else r for r in record["results"]]
    choice = tune.choose(record, CONFIGURATIONS, DEPLOYED)
    assert not choice["keep"] and choice["settings"]["vllm_server_args_tune"] == {"max-num-seqs": 6}


def test_nothing_measured_is_nothing_to_choose():
    choice = tune.choose({"recommendation": {"name": None, "msg": "no configuration was measured at concurrency 1"}},
                         CONFIGURATIONS, DEPLOYED)
    assert choice["name"] is None and "no configuration was measured" in choice["why"]


def test_a_shorter_k_predicted_faster_is_named_to_confirm_not_rolled_out():
    record = kept([("none", "", 0, [[300, 305], [280, 282], [310, 300]]),
                   ("k4", "dflash", 4, [[800, 810], [760, 770], [830, 820]])])
    # Per-position acceptance that falls fast after the first: K=1 carries most of the gain at a fraction of the cost.
    record["draft_length"] = [{"configurations": ["k4"], "rows": [
        {"k": 1, "predicted_tokens_per_second": 950.0, "measured_tokens_per_second": None},
        {"k": 2, "predicted_tokens_per_second": 900.0, "measured_tokens_per_second": None},
        {"k": 4, "predicted_tokens_per_second": 790.0, "measured_tokens_per_second": 805.0}]}]
    choice = tune.choose(record, CONFIGURATIONS, DEPLOYED)
    assert choice["name"] == "k4" and choice["keep"]
    assert choice["confirm"]["k"] == 1 and choice["confirm"]["gain"] == round(950.0 / 805.0 - 1.0, 4)
    assert choice["confirm"]["configuration"] == {"name": "dflash-k1",
                                                  "speculative": {"method": "dflash", "num_speculative_tokens": 1}}
    assert "K=1 is predicted 18% faster" in choice["why"], choice["why"]
    record["draft_length"][0]["rows"][0]["predicted_tokens_per_second"] = 700.0
    record["draft_length"][0]["rows"][1]["predicted_tokens_per_second"] = 700.0
    assert tune.choose(record, CONFIGURATIONS, DEPLOYED)["confirm"] is None
