"""Prompt sets by category, and the figures per category and overall (module_utils/probe/workload)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.probe import workload
from ansible_collections.llmops.vllm.plugins.module_utils.probe.speed import bench_argv, evaluate

BUILTIN = Path(__file__).resolve().parents[5] / "roles" / "vllm_server" / "files" / "workloads" / "llmops-builtin.json"


def entry(category=None, prompt="Write a haiku about rain", answer="Soft rain on the roof", **extra):
    e = {"conversations": [{"from": "human", "value": prompt}, {"from": "gpt", "value": answer}], **extra}
    if category is not None:
        e["category"] = category
    return e


def run(category, concurrency, decode, repeat=0, drafts=10, accepted=20, per_position=(0.8, 0.6, 0.4, 0.2),
        other=0, completed=4):
    return {"category": category, "concurrency": concurrency, "repeat": repeat, "other_requests": other,
            # 17 tokens a request, each request 20 ms to its first token and 16 more at ``decode`` tok/s.
            "client": {"decode_tokens_per_second": decode, "output_tokens_per_second": decode * concurrency * 0.9,
                       "median_ttft_ms": 20.0, "median_itl_ms": 1000.0 / decode, "completed": completed, "failed": 0,
                       "output_tokens": 17 * completed, "duration_s": completed * (20.0 + 16000.0 / decode) / 1000.0},
            "speculative": None if drafts is None else {
                "drafts": drafts, "draft_tokens": drafts * 4, "accepted_tokens": accepted,
                "acceptance_length": 1 + accepted / drafts, "per_position_acceptance": list(per_position)}}


def test_the_builtin_set_has_every_category_the_collection_names_with_several_prompts_each():
    entries = json.loads(BUILTIN.read_text())
    categories = workload.split(entries)
    assert sorted(categories) == ["chat", "code", "json", "math", "summary", "tools"]
    assert all(len(items) >= 4 for items in categories.values())
    ids = [e["id"] for e in entries]
    assert len(ids) == len(set(ids))
    # Realistic requests, not one-liners: every prompt and answer has some length (a tool call is short by nature).
    for e in entries:
        prompt, answer = (turn["value"] for turn in e["conversations"][:2])
        assert len(prompt) >= 40 and len(answer) >= 60, e["id"]
    # The summaries summarise a passage given in the prompt: longer than their answer.
    for e in categories["summary"]:
        assert len(e["conversations"][0]["value"]) > 1.5 * len(e["conversations"][1]["value"]), e["id"]


def test_split_keeps_the_order_and_puts_entries_without_a_category_in_one():
    out = workload.split([entry("code"), entry(), entry("math"), entry("code")])
    assert list(out) == ["code", "all", "math"] and len(out["code"]) == 2
    assert workload.weights(out) == {"code": 0.5, "all": 0.25, "math": 0.25}


@pytest.mark.parametrize("entries, words", [
    ([], "non-empty JSON list"),
    ({"conversations": []}, "non-empty JSON list"),
    (["text"], "entry 0 is not a mapping"),
    ([{"id": "x", "conversations": [{"from": "human", "value": "hi there"}]}], "entry 0 (x): conversations needs at least two"),
    ([entry(answer="  ")], "non-empty text"),
    ([entry(category="../etc")], "category must be"),
    ([entry(category=3)], "category must be"),
])
def test_split_refuses_what_vllm_would_skip_or_a_category_that_cannot_name_a_file(entries, words):
    with pytest.raises(workload.WorkloadError, match=words.replace("(", r"\(").replace(")", r"\)")):
        workload.split(entries)


def test_a_dataset_run_sends_the_prompt_set_to_the_chat_endpoint_and_lets_the_model_end_its_answers():
    argv = bench_argv("vllm", "http://127.0.0.1:8000", "m", "/srv/m", 2, 8, 32, 64, 0.0, "/r", "x.json",
                      dataset=workload.dataset_argv("/r/workload-code.json", 48), endpoint=workload.ENDPOINTS["chat"])
    flags = dict(zip(argv[3::1], argv[4::1]))
    assert flags["--backend"] == "openai-chat" and flags["--endpoint"] == "/v1/chat/completions"
    assert flags["--dataset-name"] == "sharegpt" and flags["--dataset-path"] == "/r/workload-code.json"
    assert flags["--sharegpt-output-len"] == "48"
    assert "--ignore-eos" not in argv and "--random-input-len" not in argv
    # Each answer's own length unless one is set; past the end-of-sequence token only when asked.
    assert "--sharegpt-output-len" not in workload.dataset_argv("/r/w.json")
    assert workload.dataset_argv("/r/w.json", ignore_eos=True)[-1] == "--ignore-eos"


def test_each_category_gets_its_own_figures_with_the_spread_of_its_repeats():
    runs = [run("code", 1, 100.0, 0), run("code", 1, 110.0, 1), run("code", 1, 90.0, 2),
            run("chat", 1, 50.0, 0, accepted=5), run("chat", 1, 60.0, 1, accepted=5)]
    out = workload.summarise(runs, {"code": 0.75, "chat": 0.25})
    code = out["categories"]["code"]["1"]
    assert code["decode_tokens_per_second"] == {"median": 100.0, "min": 90.0, "max": 110.0, "spread": 0.2, "n": 3}
    assert code["acceptance_length"] == 3.0 and code["completed"] == 12
    chat = out["categories"]["chat"]["1"]
    assert chat["decode_tokens_per_second"]["median"] == 55.0 and chat["acceptance_length"] == 1.5
    # Overall: the mix-weighted mean of the category medians; acceptance from all counters together.
    overall = out["overall"]["1"]
    assert overall["decode_tokens_per_second"] == 0.75 * 100.0 + 0.25 * 55.0
    assert overall["acceptance_length"] == round(1 + (3 * 20 + 2 * 5) / 50, 4)
    assert overall["per_position_acceptance"] == [0.8, 0.6, 0.4, 0.2]


def test_each_repeat_is_a_block_weighted_by_the_mix_and_an_incomplete_one_is_left_out():
    runs = [run("code", 1, 100.0, 0), run("code", 1, 110.0, 1), run("code", 1, 90.0, 2),
            run("chat", 1, 50.0, 0), run("chat", 1, 60.0, 1), run("chat", 4, 10.0, 0)]
    assert workload.blocks(runs, {"code": 0.75, "chat": 0.25}) == [0.75 * 100 + 0.25 * 50, 0.75 * 110 + 0.25 * 60]


def test_a_client_starved_of_cpu_does_not_spoil_the_decode_figure():
    # Measured on 2 cores: the client read a burst of buffered tokens at once; its first-token time swallowed the
    # decode (45.7 ms against about 13) and TPOT read 0.005 ms (200,000 tok/s). Its wall clock did not lie.
    good = [run("chat", 1, 430.0, r) for r in range(3)]
    starved = run("chat", 1, 430.0, 3)
    starved["client"].update(median_ttft_ms=45.7, decode_tokens_per_second=200000.0)
    ttft = workload.reference_ttft(good + [starved])
    assert ttft == {"chat": 20.0}
    assert workload.decode_after_first(starved["client"], ttft["chat"]) == pytest.approx(430.0, rel=1e-3)
    assert workload.blocks(good + [starved], {"chat": 1.0}) == pytest.approx([430.0] * 4, rel=1e-3)


def test_the_engine_s_own_decode_figure_is_read_before_the_client_s_wall_clock():
    # A round whose requests waited longer for their first token than the reference (host load shifting between
    # rounds) would read a decode the engine never had from the client's clock; the engine's own does not move.
    runs = [run("chat", 1, 430.0, r) for r in range(2)]
    runs[1]["client"].update(median_ttft_ms=35.0, duration_s=runs[1]["client"]["duration_s"] + 4 * 0.015)
    assert workload.blocks(runs, {"chat": 1.0}) != pytest.approx([430.0, 430.0], rel=0.05)
    for r in runs:
        r["server_decode_tokens_per_second"] = 430.0
    assert workload.blocks(runs, {"chat": 1.0}) == [430.0, 430.0]


def test_acceptance_per_position_weighs_each_run_by_its_drafts():
    runs = [run("a", 1, 10.0, drafts=30, per_position=(1.0, 0.5)), run("a", 1, 10.0, 1, drafts=10, per_position=(0.0,))]
    assert workload.summarise(runs, {"a": 1.0})["categories"]["a"]["1"]["per_position_acceptance"] == [0.75, 0.375]


def test_the_gates_read_the_overall_figures_at_concurrency_1_and_every_concurrency_s_other_traffic():
    runs = [run("code", 1, 100.0), run("code", 4, 300.0, other=2), run("chat", 1, 40.0, accepted=1)]
    summary = workload.summarise(runs, {"code": 0.5, "chat": 0.5})
    verdict = evaluate(workload.gate_runs(summary), {"min_decode_tokens_per_second": 80.0, "min_acceptance_length": 1.5,
                                                     "baseline_tokens_per_second": None, "min_speedup": None})
    assert not verdict["passed"] and verdict["reason"] == "too_slow"
    assert "70.00 tok/s is below min_decode_tokens_per_second 80.0" in verdict["msg"]
    assert any("at concurrency 4" in note for note in verdict["notes"])


def test_without_speculative_counters_the_gates_say_the_acceptance_gate_cannot_apply():
    summary = workload.summarise([run("a", 1, 10.0, drafts=None)], {"a": 1.0})
    assert summary["categories"]["a"]["1"]["acceptance_length"] is None
    verdict = evaluate(workload.gate_runs(summary), {"min_acceptance_length": 2.0})
    assert verdict["passed"] and "cannot apply" in verdict["notes"][0]
