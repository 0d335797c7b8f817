"""The benchmark's command line, the counters it is measured by, and the speed gates."""

from __future__ import annotations

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.probe.speed import (
    MISCONFIGURED_BELOW,
    bench_argv,
    client_figures,
    counters,
    evaluate,
    figures,
    measure,
    other_traffic,
    server_decode,
    speculative_figures,
)


def metrics_text(drafts=None, draft_tokens=0, accepted=0, per_position=(), requests=0.0, one_token=None, decode=None):
    """A /metrics text shaped as vLLM's (labels model_name and engine; one counter per finished reason; the
    generation-token histogram's 1-2-5 buckets, cumulative, when ``one_token`` is given; the decode-time histogram's
    sum and count and the generation tokens when ``decode`` (seconds, requests, tokens) is)."""
    lines = [
        "# HELP vllm:request_success_total Count of successfully processed requests.",
        "# TYPE vllm:request_success_total counter",
        'vllm:request_success_total{engine="0",finished_reason="length",model_name="tiny-qwen3"} %s' % requests,
        'vllm:request_success_total{engine="0",finished_reason="stop",model_name="tiny-qwen3"} 0.0',
        'vllm:num_requests_running{engine="0",model_name="tiny-qwen3"} 0.0',
    ]
    if one_token is not None:
        lines.append("# TYPE vllm:request_generation_tokens histogram")
        lines += ['vllm:request_generation_tokens_bucket{engine="0",le="%s",model_name="tiny-qwen3"} %s'
                  % (bound, float(one_token if bound == "1.0" else requests)) for bound in ("1.0", "2.0", "5.0", "+Inf")]
    if decode is not None:
        seconds, finished, tokens = decode
        lines += ["# TYPE vllm:request_decode_time_seconds histogram",
                  'vllm:request_decode_time_seconds_sum{engine="0",model_name="tiny-qwen3"} %s' % float(seconds),
                  'vllm:request_decode_time_seconds_count{engine="0",model_name="tiny-qwen3"} %s' % float(finished),
                  "# TYPE vllm:generation_tokens_total counter",
                  'vllm:generation_tokens_total{engine="0",model_name="tiny-qwen3"} %s' % float(tokens)]
    if drafts is not None:
        lines += [
            "# TYPE vllm:spec_decode_num_drafts_total counter",
            'vllm:spec_decode_num_drafts_total{engine="0",model_name="tiny-qwen3"} %s' % float(drafts),
            'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="tiny-qwen3"} %s' % float(draft_tokens),
            'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="tiny-qwen3"} %s' % float(accepted),
        ]
        lines += ['vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny-qwen3",position="%d"} %s'
                  % (position, float(count)) for position, count in enumerate(per_position)]
    return "\n".join(lines) + "\n"


def saved_result(completed=8, median_tpot_ms=10.0, output_throughput=90.0, failed=0):
    """The keys of a `vllm bench serve --save-result` file the figures are read from."""
    return {"completed": completed, "failed": failed, "duration": 3.5, "total_output_tokens": completed * 64,
            "output_throughput": output_throughput, "median_ttft_ms": 40.0, "p99_ttft_ms": 55.5,
            "median_itl_ms": 9.0, "p99_itl_ms": 20.0, "median_tpot_ms": median_tpot_ms, "p99_tpot_ms": 12.0}


def run(concurrency=1, decode_ms=10.0, spec=None, other=0, completed=8):
    client = client_figures(saved_result(completed=completed, median_tpot_ms=decode_ms))
    return {"concurrency": concurrency, "client": client, "speculative": spec, "other_requests": other}


def spec(length):
    return {"drafts": 10, "draft_tokens": 40, "accepted_tokens": int(round((length - 1) * 10)),
            "acceptance_length": length, "acceptance_rate": (length - 1) / 4, "per_position_acceptance": []}


def test_the_command_line_is_vllm_bench_serve_with_a_fixed_workload():
    argv = bench_argv("/opt/vllm/venvs/vllm-0.20.2/bin/vllm", "http://127.0.0.1:8000", "qwen3.6-27b",
                      "/srv/models/Qwen3.6-27B", 4, 8, 32, 64, 0.0, "/var/lib/vllm/bench", "bench-c4.json")
    assert argv[:3] == ["/opt/vllm/venvs/vllm-0.20.2/bin/vllm", "bench", "serve"]
    flags = dict(zip(argv[3::1], argv[4::1]))
    assert flags["--max-concurrency"] == "4" and flags["--num-prompts"] == "8"
    assert flags["--random-input-len"] == "32" and flags["--random-output-len"] == "64"
    assert flags["--tokenizer"] == "/srv/models/Qwen3.6-27B" and flags["--dataset-name"] == "random"
    # Warm-up is sent apart, so the counters read around the run hold its requests alone.
    assert flags["--num-warmups"] == "0"
    assert "--ignore-eos" in argv and "--save-result" in argv
    assert not any("key" in word.lower() for word in argv)


def test_client_figures_read_the_saved_result():
    figures = client_figures(saved_result(median_tpot_ms=12.5, output_throughput=77.123))
    assert figures["decode_tokens_per_second"] == 80.0
    assert figures["output_tokens_per_second"] == 77.12
    assert (figures["median_ttft_ms"], figures["p99_ttft_ms"], figures["median_itl_ms"], figures["p99_itl_ms"]) == (40.0, 55.5, 9.0, 20.0)
    assert client_figures({"completed": 0})["decode_tokens_per_second"] is None


def test_speculative_figures_are_the_counter_deltas():
    before = counters(metrics_text(drafts=100, draft_tokens=400, accepted=150, per_position=(80, 40, 20, 10), requests=5))
    after = counters(metrics_text(drafts=160, draft_tokens=640, accepted=270, per_position=(134, 76, 40, 20), requests=13))
    figures = speculative_figures(before, after)
    assert figures["drafts"] == 60 and figures["draft_tokens"] == 240 and figures["accepted_tokens"] == 120
    assert figures["acceptance_length"] == 3.0           # 1 + 120 / 60: the bonus token counts
    assert figures["acceptance_rate"] == 0.5
    assert figures["per_position_acceptance"] == [0.9, 0.6, 0.3333, 0.1667]
    assert other_traffic(before, after, sent=8) == 0
    assert other_traffic(before, after, sent=6) == 2


def test_one_token_requests_are_liveness_probes_not_other_traffic():
    # The watchdog's and the front door's probes ask for one token; the run's requests for many.
    before = counters(metrics_text(drafts=10, requests=5, one_token=3))
    after = counters(metrics_text(drafts=20, requests=16, one_token=6))
    assert after["one_token_requests"] == 6.0
    assert other_traffic(before, after, sent=8) == 0
    assert other_traffic(before, after, sent=7) == 1
    # Without the histogram (other buckets configured) every request counts.
    assert other_traffic(counters(metrics_text(requests=5)), counters(metrics_text(requests=16)), sent=8) == 3


def test_without_speculative_counters_there_are_no_speculative_figures():
    before, after = counters(metrics_text(requests=1)), counters(metrics_text(requests=9))
    assert before["speculative"] is None
    assert speculative_figures(before, after) is None


def test_a_run_without_drafts_has_no_acceptance_length():
    before = counters(metrics_text(drafts=5, draft_tokens=20, accepted=0))
    assert speculative_figures(before, before)["acceptance_length"] is None


def test_measure_reads_the_counters_around_each_run():
    calls = []
    texts = iter([metrics_text(drafts=0, requests=0), metrics_text(drafts=40, draft_tokens=160, accepted=80, requests=8),
                  metrics_text(drafts=40, draft_tokens=160, accepted=80, requests=8),
                  metrics_text(drafts=100, draft_tokens=400, accepted=140, requests=20)])

    def read_metrics():
        calls.append("metrics")
        return next(texts)

    def run_bench(concurrency):
        calls.append("bench %d" % concurrency)
        return saved_result(completed=8, median_tpot_ms=10.0 * concurrency)

    runs = measure([1, 4], run_bench, read_metrics)
    assert calls == ["metrics", "bench 1", "metrics", "metrics", "bench 4", "metrics"]
    assert [r["speculative"]["acceptance_length"] for r in runs] == [3.0, 2.0]
    # 12 requests finished at concurrency 4, 8 of them the run's own.
    assert [r["other_requests"] for r in runs] == [0, 4]
    # Without the decode-time histogram, no figure on the engine's clock.
    assert [r["server_decode_tokens_per_second"] for r in runs] == [None, None]


def test_decode_on_the_engine_s_clock_is_the_tokens_after_the_first_over_first_to_last_token_time():
    before = counters(metrics_text(decode=(10.0, 5, 400)))
    # 4 requests of 17 tokens, 0.08 s each from first token to last, and 3 health checks of one token (no decode time).
    after = counters(metrics_text(decode=(10.0 + 4 * 0.08, 5 + 4 + 3, 400 + 4 * 17 + 3)))
    assert server_decode(before, after) == pytest.approx(4 * 16 / (4 * 0.08))
    assert server_decode(before, before) is None
    assert server_decode(counters(metrics_text()), after) is None


def test_every_gate_passes():
    verdict = evaluate([run(decode_ms=10.0, spec=spec(3.0))], {
        "min_decode_tokens_per_second": 90, "min_acceptance_length": 2.5, "baseline_tokens_per_second": 73.5, "min_speedup": 1.3})
    assert verdict == {"passed": True, "reason": None, "speedup": 1.361, "speedup_interval": None, "notes": [], "hint": "",
                       "msg": "every gate passed"}


# The gate on an interval (module_utils/report/intervals): the server's repeats against the compare run's baseline
# blocks. A point estimate of 1.36x above min_speedup 1.3 is not a pass when the blocks scatter across 1.3.
BASELINE_BLOCKS = [73.0, 74.0, 73.5]


@pytest.mark.parametrize("blocks, wanted, inconclusive, passed, words", [
    ([99.0, 101.0, 100.0], 1.3, None, True, []),
    ([99.0, 101.0, 100.0], 1.5, None, False, ["95% interval 1.36x [", "wholly below min_speedup 1.5"]),
    ([80.0, 120.0, 100.0], 1.3, None, False, ["inconclusive, failed", "min_speedup 1.3 lies inside the interval",
                                              "blocks on each side would"]),
    ([80.0, 120.0, 100.0], 1.3, "pass", True, ["inconclusive, passed"]),
])
def test_the_speedup_gate_decides_on_its_interval(blocks, wanted, inconclusive, passed, words):
    verdict = evaluate([run(decode_ms=10.0, spec=spec(3.0))], {
        "baseline_tokens_per_second": 73.5, "min_speedup": wanted, "blocks": blocks, "baseline_blocks": BASELINE_BLOCKS,
        "inconclusive": inconclusive})
    assert verdict["passed"] is passed and verdict["speedup_interval"]["n"] == 3
    said = verdict["msg"] + " ".join(verdict["notes"])
    assert all(word in said for word in words), said
    assert verdict["reason"] == (None if passed else "too_slow")


def test_one_block_on_either_side_keeps_the_point_verdict():
    verdict = evaluate([run(decode_ms=10.0, spec=spec(3.0))], {
        "baseline_tokens_per_second": 73.5, "min_speedup": 1.3, "blocks": [100.0], "baseline_blocks": BASELINE_BLOCKS})
    assert verdict["passed"] and verdict["speedup_interval"] is None


@pytest.mark.parametrize("gates, words", [
    ({"min_decode_tokens_per_second": 120}, ["100.00 tok/s", "min_decode_tokens_per_second 120"]),
    ({"baseline_tokens_per_second": 73.5, "min_speedup": 1.5}, ["1.36x the baseline 73.5", "min_speedup 1.5"]),
])
def test_a_slow_server_is_too_slow_with_its_figures(gates, words):
    verdict = evaluate([run(decode_ms=10.0, spec=spec(3.0))], gates)
    assert not verdict["passed"] and verdict["reason"] == "too_slow"
    assert all(word in verdict["msg"] for word in words), verdict["msg"]
    assert "num_speculative_tokens" in verdict["hint"]


def test_low_acceptance_is_its_own_reason():
    verdict = evaluate([run(spec=spec(1.6))], {"min_acceptance_length": 2.0, "min_decode_tokens_per_second": 1})
    assert verdict["reason"] == "low_acceptance"
    assert "mean acceptance length 1.60 is below min_acceptance_length 2.0" in verdict["msg"]


def test_an_almost_never_accepted_drafter_is_called_misconfigured_not_slow():
    length = MISCONFIGURED_BELOW - 0.05
    verdict = evaluate([run(spec=spec(length))], {"min_acceptance_length": 1.5})
    assert verdict["reason"] == "low_acceptance"
    assert verdict["msg"].startswith("mean acceptance length 1.05 is below min_acceptance_length 1.5: the drafter is almost")
    assert "does not match its target" in verdict["msg"] and "target_layer_ids" in verdict["msg"]
    # No acceptance gate: said, not failed.
    ungated = evaluate([run(spec=spec(length))], {})
    assert ungated["passed"] and ungated["notes"][0].startswith("mean acceptance length 1.05: the drafter is almost")
    # Above the misconfigured mark but below the gate: only the gate speaks.
    assert "does not match" not in evaluate([run(spec=spec(1.6))], {"min_acceptance_length": 2.0})["msg"]


def test_a_dflash_drafter_for_another_target_fails_the_default_floor():
    # Measured: a drafter built for another target with the same shapes deployed at acceptance length 1.07.
    verdict = evaluate([run(spec=spec(1.07))], {"speculative_method": "dflash"})
    assert verdict["reason"] == "low_acceptance" and not verdict["passed"]
    assert verdict["msg"].startswith("mean acceptance length 1.07 is below the default floor %s for a dflash drafter"
                                     % MISCONFIGURED_BELOW)
    assert "a drafter trained for another target" in verdict["msg"]
    # A good drafter passes it; 0 turns it off; n-gram, whose acceptance is the traffic's, has no floor.
    assert evaluate([run(spec=spec(3.2))], {"speculative_method": "dflash"})["passed"]
    assert evaluate([run(spec=spec(1.07))], {"speculative_method": "dflash", "min_acceptance_length": 0})["passed"]
    assert evaluate([run(spec=spec(1.02))], {"speculative_method": "ngram"})["passed"]
    # Without counters the floor says nothing.
    assert evaluate([run(spec=None)], {"speculative_method": "dflash"})["notes"] == []


def test_without_speculative_decoding_the_acceptance_gate_explains_it_cannot_apply():
    verdict = evaluate([run(spec=None)], {"min_acceptance_length": 2.0})
    assert verdict["passed"] and verdict["reason"] is None
    assert "min_acceptance_length cannot apply" in verdict["notes"][0]
    assert evaluate([run(spec=None)], {})["notes"] == []


def test_a_run_other_traffic_reached_says_so():
    verdict = evaluate([run(spec=spec(3.0)), run(concurrency=4, spec=spec(2.5), other=3)], {})
    assert verdict["passed"]
    assert "concurrency 4" in verdict["notes"][0] and "server-wide" in verdict["notes"][0]


def test_the_gates_read_the_single_stream_run():
    verdict = evaluate([run(concurrency=1, decode_ms=20.0), run(concurrency=8, decode_ms=5.0)], {"min_decode_tokens_per_second": 60})
    assert verdict["reason"] == "too_slow" and "50.00 tok/s" in verdict["msg"]


def test_a_benchmark_that_completed_nothing_fails_as_such():
    verdict = evaluate([run(completed=0)], {})
    assert verdict["reason"] == "bench_failed"
    # Every verdict carries the keys the module reports (it failed with KeyError 'hint' on this one).
    assert set(verdict) == set(evaluate([run()], {})) and "--max-model-len" in verdict["hint"]


def test_a_deploy_keeps_the_figures_of_a_measured_run_and_nothing_of_a_skipped_one():
    result = {"status": "failed", "runs": [run(spec=spec(1.5)), run(concurrency=4)], "decode_tokens_per_second": 100.0,
              "acceptance_length": 1.5, "speedup": None, "notes": ["n"], "changed": False, "invocation": {}}
    result["runs"][0]["speculative"]["per_position_acceptance"] = [0.3, 0.2]
    kept = figures(result)
    assert kept["status"] == "failed" and kept["decode_tokens_per_second"] == 100.0 and kept["acceptance_length"] == 1.5
    assert kept["output_tokens_per_second"] == {"1": 90.0, "4": 90.0}
    assert kept["per_position_acceptance"] == [0.3, 0.2] and kept["notes"] == ["n"]
    assert "invocation" not in kept
    assert figures({"skipped": True, "changed": False}) == {} == figures(None)
    assert figures({"failed": True, "msg": "the unit did not start"}) == {}
