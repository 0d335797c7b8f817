"""A compare run measured in rounds (module_utils/report/rounds): each round's single-stream figure, the paired
intervals of the answer, the A/A check, and when a run may stop early."""

from __future__ import annotations

import json

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.report import compare, rounds
from ansible_collections.llmops.vllm.tests.helpers.compare_rounds import KEY, SETTINGS, measured, run

CLEAR = run([("none", "", 0, [[300, 305], [280, 282], [310, 300]]),
             ("k4", "dflash", 4, [[800, 810], [760, 770], [830, 820]])])
CLOSE = run([("none", "", 0, [[300, 305], [280, 282], [310, 300]]),
             ("k2", "dflash", 2, [[300, 310], [290, 300], [280, 290]])])


def test_a_round_s_figure_is_the_geometric_mean_of_its_repeats():
    assert rounds.round_value({"blocks": [100.0, 400.0]}) == 200.0
    assert rounds.round_value({"overall": {"1": {"decode_tokens_per_second": 90.0}}}) == 90.0
    assert rounds.round_value({}) is None
    assert rounds.by_round(CLEAR)["k4"] == {0: pytest.approx(804.98, abs=0.01), 1: pytest.approx(764.98, abs=0.01),
                                            2: pytest.approx(824.98, abs=0.01)}


def test_a_clear_winner_is_told_apart_with_its_interval():
    summary = compare.compare(CLEAR)
    rec = summary["recommendation"]
    assert rec["name"] == "k4" and rec["told_apart"] is True
    assert rec["interval"]["low"] > 2.5 and rec["interval"]["n"] == 3
    assert "95% interval [" in rec["msg"] and "over 3 rounds" in rec["msg"]
    assert summary["speedup_intervals"]["k4"]["none"]["ratio"] == pytest.approx(2.69, abs=0.01)


def test_a_close_pair_is_said_to_be_indistinguishable_with_what_would_tell():
    rec = compare.compare(CLOSE)["recommendation"]
    assert rec["told_apart"] is False
    # 1.00x: no number of rounds would tell them apart, and the message says so rather than a count.
    assert "cannot tell" in rec["msg"] and "holds 1.00" in rec["msg"] and "far larger" in rec["msg"]
    assert rec["name"] == "none" and "no speculative configuration was shown faster" in rec["msg"]


def test_dflash_ahead_on_tok_s_but_not_shown_faster_by_its_rounds_is_not_recommended():
    # k4 leads on aggregate tok/s (output 2x), but its rounds' single-stream decode swings from 0.3x to 3x the
    # baseline's: the interval holds 1.00, so the baseline is kept and the message says why.
    results = run([("none", "", 0, [[300, 300], [300, 300]]), ("k4", "dflash", 4, [[900, 900], [100, 100]])])
    for r in results:
        if r["name"] == "k4":
            r["bench"]["overall"]["1"]["output_tokens_per_second"] = 600.0
    rec = compare.compare(results)["recommendation"]
    assert rec["name"] == "none" and not rec["dflash_pays"] and rec["runner_up"] == "k4", rec
    assert rec["told_apart"] is False and rec["interval"]["low"] < 1.0 < rec["interval"]["high"]
    assert "kept over k4" in rec["msg"] and "DFlash is not shown to pay here" in rec["msg"], rec["msg"]
    assert "far larger than the difference" in rec["msg"], rec["msg"]


def test_dflash_shown_faster_by_its_rounds_is_recommended():
    rec = compare.compare(CLEAR)["recommendation"]
    assert rec["name"] == "k4" and rec["dflash_pays"] and "kept over" not in rec["msg"]


def test_one_round_gives_no_interval_and_says_so():
    one = [r for r in CLOSE if r["round"] == 0]
    summary = compare.compare(one)
    assert summary["recommendation"]["interval"]["low"] is None and summary["recommendation"]["told_apart"] is None
    text = compare.markdown(summary, KEY, "r1")
    assert "One round: no interval" in text


def test_the_same_settings_under_two_names_are_the_a_a_check():
    aa = run([("none", "", 0, [[300, 305], [280, 282], [310, 300]]),
              ("none-again", "", 0, [[302, 299], [284, 279], [305, 306]]),
              ("k4", "dflash", 4, [[800, 810], [760, 770], [830, 820]])])
    summary = compare.compare(aa)
    floor = summary["noise_floor"]
    assert floor["configurations"] == ["none", "none-again"] and floor["low"] <= 1.0 <= floor["high"]
    assert "A/A check (none-again against none" in compare.markdown(summary, KEY, "r1")


def test_a_configuration_that_failed_in_a_later_round_keeps_its_served_rounds():
    results = CLEAR[:-1] + [measured("k4", "dflash", 4, 2, [], status="failed")]
    # Round order 0: none, k4; 1: k4, none; 2: none, k4 (failed).
    summary = compare.compare(results)
    assert summary["failed"] == [] and summary["speedup_intervals"]["k4"]["none"]["n"] == 2


def test_a_run_may_stop_once_the_answer_is_narrow_enough():
    assert not rounds.settled([r for r in CLEAR if r["round"] == 0])
    assert rounds.settled(CLEAR, target=0.05)
    assert not rounds.settled(CLOSE, target=0.05)


def test_the_gate_reads_each_round_of_a_baseline_measured_in_rounds():
    kept = json.loads(json.dumps(compare.record(compare.compare(CLEAR), KEY, CLEAR, SETTINGS, "r1")))
    assert compare.measured_blocks(kept, "none") == pytest.approx([302.49, 281.0, 304.96], abs=0.01)
    assert kept["speedup_intervals"]["k4"]["none"]["n"] == 3


def client_run(repeat, ttft_ms, decode):
    """One run of two requests of 17 tokens: ``ttft_ms`` to the first, the 16 others at ``decode`` tok/s."""
    return {"category": "chat", "concurrency": 1, "repeat": repeat, "other_requests": 0, "speculative": None,
            "client": {"completed": 2, "median_ttft_ms": ttft_ms, "output_tokens": 34,
                       "duration_s": 2 * (13.0 + 16000.0 / decode) / 1000.0,
                       "decode_tokens_per_second": 1000.0 / (16000.0 / decode / 16)}}


def test_a_round_read_by_a_starved_client_takes_its_first_token_time_from_the_other_rounds():
    # Both runs of round 0 were read in bursts: the first token's time swallowed the decode (TPOT read near zero);
    # the configuration's other rounds say what its first token takes.
    starved = [client_run(0, 45.7, 430.0), client_run(1, 30.2, 430.0)]
    fine = [client_run(0, 13.0, 430.0), client_run(1, 13.0, 430.0)]
    results = [dict(measured("none", "", 0, r, [1.0]), bench={"runs": runs}) for r, runs in
               enumerate([starved, fine, fine])]
    assert rounds.by_round(results)["none"] == {0: pytest.approx(430.0, rel=1e-3), 1: pytest.approx(430.0, rel=1e-3),
                                                2: pytest.approx(430.0, rel=1e-3)}
