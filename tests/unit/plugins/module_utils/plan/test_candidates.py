"""The configurations a compare run measures (module_utils/plan/candidates)."""

from __future__ import annotations

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.plan import candidates

DEPLOYED = {"speculative_method": "dflash", "speculative_model": "/opt/vllm/drafter", "num_speculative_tokens": 15,
            "speculative_extra": {}, "args": {"max-model-len": 32768, "reasoning-parser": "qwen3"}}


def test_a_good_list_has_no_problem():
    assert candidates.problems([
        {"name": "no-speculation", "speculative": {}},
        {"name": "ngram-4", "speculative": {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}},
        {"name": "dflash-k8", "speculative": {"method": "dflash", "num_speculative_tokens": 8}},
        {"name": "as-deployed"},
    ]) == []


@pytest.mark.parametrize("configurations, words", [
    ([], "non-empty list"),
    ({"name": "x"}, "non-empty list"),
    (["dflash"], "[0] must be a mapping"),
    ([{"name": "a b"}], "[0].name must be letters"),
    ([{"name": "../up"}], "[0].name must be letters"),
    ([{"name": "a"}, {"name": "a"}], "[1].name 'a' is used twice"),
    ([{"name": "a", "spec": {}}], "(a) has unknown keys spec"),
    ([{"name": "a", "speculative": "dflash"}], "(a).speculative must be a mapping"),
    ([{"name": "a", "speculative": {"method": "dflash", "num_speculative_tokens": 0}}], "positive integer, got 0"),
    ([{"name": "a", "speculative": {"method": "dflash", "num_speculative_tokens": True}}], "positive integer, got True"),
    ([{"name": "a", "speculative": {"method": "ngram"}}], "num_speculative_tokens must be set for method ngram"),
    ([{"name": "a", "args": ["--x"]}], "(a).args must be a mapping"),
    ([{"name": "a", "baseline": "yes"}], "(a).baseline must be true or false"),
])
def test_each_problem_names_the_variable_and_the_entry(configurations, words):
    found = candidates.problems(configurations)
    assert found and all(p.startswith("vllm_compare_configurations") for p in found)
    assert any(words in p for p in found), found


def test_no_speculation_clears_the_method_and_keeps_the_args_and_an_integer_k():
    assert candidates.overrides({"name": "none", "speculative": {}}, DEPLOYED) == {
        "args": DEPLOYED["args"], "speculative_method": "", "speculative_model": "", "speculative_extra": {}}
    assert candidates.settings({"name": "none", "speculative": {}}, DEPLOYED)["num_speculative_tokens"] == 15
    assert candidates.describe({"name": "none", "speculative": {}}, DEPLOYED)["k"] == 0


def test_a_dflash_k_keeps_the_inventory_s_drafter_and_puts_other_keys_in_extra():
    got = candidates.overrides({"name": "k8", "speculative": {"method": "dflash", "num_speculative_tokens": 8,
                                                              "attention_backend": "FLASH_ATTN"},
                                "args": {"max-num-seqs": 4}}, DEPLOYED)
    assert got == {"args": {"max-model-len": 32768, "reasoning-parser": "qwen3", "max-num-seqs": 4},
                   "speculative_method": "dflash", "speculative_model": "/opt/vllm/drafter",
                   "num_speculative_tokens": 8, "speculative_extra": {"attention_backend": "FLASH_ATTN"}}


def test_a_dflash_without_k_keeps_the_inventory_s_k_and_ngram_names_no_model():
    assert candidates.overrides({"name": "d", "speculative": {"method": "dflash"}}, DEPLOYED)["num_speculative_tokens"] == 15
    ngram = candidates.overrides({"name": "n", "speculative": {"method": "ngram", "num_speculative_tokens": 3}}, DEPLOYED)
    assert ngram["speculative_model"] == "" and ngram["num_speculative_tokens"] == 3


def test_without_speculative_the_inventory_s_settings_stay():
    assert candidates.overrides({"name": "as-deployed"}, DEPLOYED) == {"args": DEPLOYED["args"]}


def test_baselines_are_what_is_not_dflash_unless_said():
    assert candidates.describe({"name": "none", "speculative": {}}, DEPLOYED) == {
        "name": "none", "method": "", "k": 0, "extra": {}, "baseline": True, "args": {}}
    assert candidates.describe({"name": "as-deployed"}, DEPLOYED)["baseline"] is False
    assert candidates.describe({"name": "as-deployed"}, DEPLOYED)["k"] == 15
    assert candidates.describe({"name": "ng", "speculative": {"method": "ngram", "num_speculative_tokens": 2}},
                               DEPLOYED)["baseline"] is True
    assert candidates.describe({"name": "mine", "speculative": {"method": "ngram", "num_speculative_tokens": 2},
                                "baseline": False}, DEPLOYED)["baseline"] is False


def test_the_inventory_s_own_settings_run_last():
    configurations = [{"name": "as-deployed"}, {"name": "none", "speculative": {}}, {"name": "k2", "args": {"a": 1}}]
    assert [c["name"] for c in candidates.order(configurations)] == ["none", "k2", "as-deployed"]


def test_the_schedule_runs_every_configuration_each_round_in_counterbalanced_order():
    configs = [{"name": "none"}, {"name": "k2"}, {"name": "as-deployed"}]
    blocks = candidates.schedule(configs, 2)
    # Ends on the as-deployed configuration; round 2 begins on the configuration round 1 ended on, marked fresh (k2,
    # between them, never runs on): its server carries the block's number, so it starts afresh as every block does.
    assert [(b["round"], b["configuration"]["name"], b["first"], b["configuration"].get("fresh")) for b in blocks] == [
        (0, "as-deployed", True, None), (0, "k2", False, None), (0, "none", False, None),
        (1, "none", True, 3), (1, "k2", False, None), (1, "as-deployed", False, None)]
    assert candidates.settings(blocks[3]["configuration"], RUNS_ON)["env"] == {"LLMOPS_COMPARE_BLOCK": "3"}
    assert [b["configuration"]["name"] for b in candidates.schedule(configs, 0)] == ["none", "k2", "as-deployed"]


def test_the_a_a_twin_is_the_first_configuration_again_second_in_line():
    twin = candidates.with_twin([{"name": "none", "speculative": {}}, {"name": "as-deployed"}])
    assert twin == [{"name": "none", "speculative": {}}, {"name": "none-again", "speculative": {}, "twin": True},
                    {"name": "as-deployed"}]


def test_the_twin_s_server_differs_by_an_environment_variable_alone():
    first, twin, _deployed = candidates.with_twin([{"name": "none", "speculative": {}}, {"name": "as-deployed"}])
    mine, its = candidates.settings(first, RUNS_ON), candidates.settings(twin, RUNS_ON)
    assert (mine.pop("env"), its.pop("env")) == ({}, {"LLMOPS_COMPARE_TWIN": "1"})
    assert mine == its and candidates.describe(first, RUNS_ON) == dict(candidates.describe(twin, RUNS_ON), name="none")


@pytest.mark.parametrize("run, words", [
    ({"vllm_compare_rounds": 0}, "vllm_compare_rounds must be a whole number"),
    ({"vllm_compare_rounds": True}, "vllm_compare_rounds must be a whole number"),
    ({"vllm_compare_aa": "maybe"}, "vllm_compare_aa must be true or false"),
    ({"vllm_compare_target": 5}, "vllm_compare_target must be a relative half width"),
    ({"vllm_compare_budget_s": -1}, "vllm_compare_budget_s must be seconds"),
])
def test_the_run_s_own_settings_are_checked_naming_each(run, words):
    found = candidates.run_problems(run)
    assert len(found) == 1 and words in found[0], found


def test_command_line_strings_are_read_as_the_playbook_reads_them_and_the_twin_name_must_be_free():
    assert candidates.run_problems({"vllm_compare_rounds": "2", "vllm_compare_aa": "false", "vllm_compare_target": "0.1"}) == []
    clash = candidates.run_problems({}, [{"name": "none"}, {"name": "none-again"}])
    assert len(clash) == 1 and "named none-again" in clash[0]


RUNS_ON = {"speculative_method": "dflash", "speculative_model": "/srv/drafter", "num_speculative_tokens": 4,
           "speculative_extra": {}, "args": {"max-model-len": 256}}


def kept_run(blocks):
    """A kept record of (name, restarted, seconds, runs) blocks, as the compare report writes it."""
    return {"run": "20261206T085915Z", "results": [
        {"name": name, "status": "ready", "restarted": restarted, "seconds": seconds, "bench": {"runs": [{}] * runs}}
        for name, restarted, seconds, runs in blocks]}


def test_the_expected_time_counts_the_starts_the_schedule_needs_and_times_them_from_the_last_run():
    configs = candidates.order([{"name": "none", "speculative": {}}, {"name": "as-deployed"}])
    blocks = candidates.schedule(configs, 2)
    # The last run: a block without a start measured 2 runs in 20 s (10 s a run); with a start, 2 runs in 70 s.
    kept = kept_run([("as-deployed", False, 20.0, 2), ("none", True, 70.0, 2), ("none", False, 20.0, 2),
                     ("as-deployed", True, 70.0, 2)])
    out = candidates.expected(blocks, RUNS_ON, 4, kept)
    # as-deployed (runs already), none (a start), none (runs on: with two configurations each does so once in two
    # rounds), as-deployed (a start), and it ends on the inventory's.
    assert (out["starts"], out["blocks"], out["run_s"], out["start_s"]) == (2, 4, 10.0, 50.0)
    assert out["seconds"] == 2 * 50.0 + 4 * 4 * 10.0 and out["from_run"] == "20261206T085915Z"
    # Three rounds of three (none, its A/A twin, as-deployed; then in reverse; then again in order): a start in every
    # block, and the last one ends on the inventory's.
    three = candidates.schedule(candidates.with_twin(configs), 3)
    assert candidates.expected(three, RUNS_ON, 1, kept)["starts"] == 9


def test_the_expected_time_reads_each_block_s_measurement_time_where_it_was_kept():
    blocks = candidates.schedule(candidates.with_twin([{"name": "none", "speculative": {}}, {"name": "as-deployed"}]), 3)
    # Every block of the last run had a start: 2 runs measured in 20 s, the block 70 s (a start of 50 s).
    kept = kept_run([("none", True, 70.0, 2)] * 3)
    for result in kept["results"]:
        result["measure_seconds"] = 20.0
    out = candidates.expected(blocks, RUNS_ON, 2, kept)
    assert (out["starts"], out["run_s"], out["start_s"], out["seconds"]) == (9, 10.0, 50.0, 9 * 50.0 + 9 * 2 * 10.0)
    # Without the measurement's time, blocks that all started cannot tell the start from the measurement.
    assert candidates.expected(blocks, RUNS_ON, 2, kept_run([("none", True, 70.0, 2)]))["seconds"] is None


def test_without_a_timed_run_there_is_no_estimate_and_it_says_why():
    blocks = candidates.schedule([{"name": "none", "speculative": {}}], 1)
    for kept in (None, {}, kept_run([("none", True, 70.0, 1)]), kept_run([("none", False, 20.0, 1)])):
        out = candidates.expected(blocks, RUNS_ON, 1, kept)
        assert out["seconds"] is None and "no earlier run" in out["why"], (kept, out)


def test_a_k_given_as_text_by_the_inventory_is_the_same_k():
    blocks = candidates.schedule([{"name": "k4", "speculative": {"method": "dflash", "num_speculative_tokens": 4}}], 1)
    kept = kept_run([("k4", False, 20.0, 1), ("none", True, 70.0, 1)])
    assert candidates.expected(blocks, dict(RUNS_ON, num_speculative_tokens="4"), 1, kept)["starts"] == 0
