"""Speed-up intervals on synthetic measurements whose truth is known: the quantiles, the coverage, the drift that
interleaving cancels and a sequential order hides, the A/A check and the gate's three verdicts."""

from __future__ import annotations

import math
import random

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.report import intervals


@pytest.mark.parametrize("df,expected", [(1, 12.706), (2, 4.303), (5, 2.571), (10, 2.228), (30, 2.042),
                                         (1000, 1.962), (7.5, 2.333)])
def test_t_quantiles_match_the_published_table(df, expected):
    assert intervals.t_quantile(0.975, df) == pytest.approx(expected, abs=2e-3)


def test_the_t_distribution_is_symmetric():
    assert intervals.t_quantile(0.025, 4) == pytest.approx(-intervals.t_quantile(0.975, 4), abs=1e-9)
    assert intervals.t_cdf(0.0, 3) == pytest.approx(0.5)


def host(rng, truth, blocks, noise=0.05, drift=0.0, order=None):
    """Blocks of a baseline (300 tok/s) and a candidate (truth times faster), each block's throughput multiplied by
    log-normal noise and by a drift linear in the block's position in time (``drift``: the relative change from
    the first block to the last)."""
    order = order or intervals.schedule(["base", "cand"], blocks)
    out = {"base": [], "cand": []}
    for position, (_round, name) in enumerate(order):
        level = 1.0 + drift * position / max(len(order) - 1, 1)
        out[name].append(300.0 * (truth if name == "cand" else 1.0) * level * math.exp(rng.gauss(0.0, noise)))
    return out["base"], out["cand"]


def test_the_paired_interval_covers_the_truth_95_times_in_100():
    rng = random.Random(7)
    trials, covered = 2000, 0
    for _trial in range(trials):
        base, cand = host(rng, 1.10, 5, noise=0.08)
        found = intervals.paired(base, cand)
        covered += found["low"] <= 1.10 <= found["high"]
    assert 0.93 <= covered / trials <= 0.97


def test_the_unpaired_interval_covers_the_truth_95_times_in_100():
    rng = random.Random(11)
    trials, covered = 2000, 0
    for _trial in range(trials):
        base = [300.0 * math.exp(rng.gauss(0.0, 0.05)) for _block in range(4)]
        cand = [330.0 * math.exp(rng.gauss(0.0, 0.12)) for _block in range(6)]
        found = intervals.unpaired(base, cand)
        covered += found["low"] <= 1.10 <= found["high"]
    assert 0.93 <= covered / trials <= 0.975


def test_drift_is_cancelled_by_interleaving_and_biases_a_sequential_order():
    # The machine slows by 30% over the run (measured on two cores: blocks minutes apart moved ~30%).
    rng = random.Random(3)
    interleaved = intervals.paired(*host(rng, 1.10, 6, noise=0.01, drift=-0.30))
    sequential_order = [(i, "base") for i in range(6)] + [(i, "cand") for i in range(6)]
    sequential = intervals.paired(*host(rng, 1.10, 6, noise=0.01, drift=-0.30, order=sequential_order))
    assert interleaved["low"] <= 1.10 <= interleaved["high"]
    assert interleaved["ratio"] == pytest.approx(1.10, rel=0.02)
    # All of the candidate's blocks came after the baseline's, on a slower machine: a 10% gain reads as a loss, with
    # a narrow interval that does not hold the truth. This is what a sequential design hides.
    assert sequential["high"] < 1.0


def test_the_schedule_counterbalances_each_round():
    assert intervals.schedule(["a", "b", "c"], 3) == [
        (0, "a"), (0, "b"), (0, "c"), (1, "c"), (1, "b"), (1, "a"), (2, "a"), (2, "b"), (2, "c")]


def test_an_a_a_check_contains_one():
    rng = random.Random(5)
    found = intervals.paired(*host(rng, 1.0, 4, noise=0.05))
    assert found["low"] <= 1.0 <= found["high"] and not intervals.tells_apart(found)


def test_one_block_gives_the_ratio_and_says_there_is_no_interval():
    found = intervals.paired([300.0], [330.0])
    assert found["ratio"] == pytest.approx(1.1) and found["low"] is None
    assert intervals.describe(found) == "1.10x (one block: no interval)"
    assert intervals.verdict(found, 1.2) == {"verdict": "too_slow", "by": "point"}
    assert intervals.blocks_for(found) is None


@pytest.mark.parametrize("low,high,verdict", [(1.21, 1.40, "passed"), (1.20, 1.40, "passed"), (1.05, 1.19, "too_slow"),
                                              (1.10, 1.30, "inconclusive")])
def test_the_gate_passes_fails_or_says_it_cannot_tell(low, high, verdict):
    interval = {"ratio": math.sqrt(low * high), "low": low, "high": high, "n": 4, "half_width": 0.1}
    assert intervals.verdict(interval, 1.2)["verdict"] == verdict


def test_the_blocks_needed_for_a_target_width_grow_with_the_square_of_the_width():
    interval = {"ratio": 1.3, "low": 1.17, "high": 1.43, "n": 4, "half_width": 0.10}
    assert intervals.blocks_for(interval, 0.05) == 16
    assert not intervals.narrow_enough(interval) and intervals.narrow_enough(interval, 0.10)


def test_bad_throughputs_are_refused():
    with pytest.raises(ValueError, match="positive"):
        intervals.paired([0.0, 1.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="as many"):
        intervals.paired([1.0, 2.0], [1.0])
