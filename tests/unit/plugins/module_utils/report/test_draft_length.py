"""The number of speculative tokens from the evidence (module_utils/report/draft_length)."""

from __future__ import annotations

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.report import draft_length


def point(k, tps, per_position=()):
    length = 1.0 + sum(per_position) if k else 1.0
    return {"k": k, "decode_tokens_per_second": tps, "acceptance_length": length,
            "per_position_acceptance": list(per_position)}


def test_a_drafter_that_agrees_on_every_token_is_accepted_for_k_plus_1_at_every_k():
    assert draft_length.acceptance_lengths([1.0] * 8, range(1, 9)) == {k: k + 1.0 for k in range(1, 9)}


def test_a_shorter_draft_keeps_the_first_positions_acceptance():
    assert draft_length.acceptance_lengths([0.8, 0.5, 0.25, 0.1], [1, 2, 4, 5]) == {1: 1.8, 2: 2.3, 4: 2.65}


def test_the_measured_points_come_back_exactly_and_the_others_between_them():
    # Step cost 10 ms without speculation, 12 ms at K=2, 16 ms at K=4.
    per_position = [0.9, 0.7, 0.5, 0.3]
    points = [point(0, 100.0), point(2, 2.6 / 0.012, per_position[:2]), point(4, 3.4 / 0.016, per_position)]
    rows = draft_length.predict(points)
    assert [row["k"] for row in rows] == [1, 2, 3, 4]
    by_k = {row["k"]: row for row in rows}
    for k in (2, 4):
        assert by_k[k]["error"] == pytest.approx(0.0, abs=1e-3) and by_k[k]["measured_tokens_per_second"]
    # K=1: cost between 10 and 12 ms (11 ms), 1.9 tokens a step. K=3: 14 ms, 3.1 tokens.
    assert by_k[1]["predicted_tokens_per_second"] == pytest.approx(1.9 / 0.011, rel=1e-3)
    assert by_k[3]["predicted_tokens_per_second"] == pytest.approx(3.1 / 0.014, rel=1e-3)
    assert by_k[1]["measured_tokens_per_second"] is None and by_k[1]["error"] is None
    assert draft_length.best(rows)["k"] == 3


def test_at_a_measured_k_the_error_is_how_far_its_acceptance_is_from_the_longest_draft_s():
    # The step cost at a measured K is its own, so what a measured point can miss is the acceptance model: the
    # longest draft accepts every position, but the draft of 2 was accepted for 2.5 tokens a step, not 3.
    points = [point(0, 100.0), point(4, 200.0, [1.0, 1.0, 1.0, 1.0]), point(2, 125.0, [0.8, 0.7])]
    rows = {row["k"]: row for row in draft_length.predict(points)}
    assert rows[4]["error"] == pytest.approx(0.0, abs=1e-3)
    assert rows[2]["predicted_acceptance_length"] == 3.0 and rows[2]["measured_acceptance_length"] == 2.5
    assert rows[2]["error"] == pytest.approx(3.0 / 2.5 - 1, abs=1e-3)
    assert rows[3]["measured_tokens_per_second"] is None and rows[3]["error"] is None


def test_a_random_drafter_predicts_no_gain_from_a_longer_draft():
    per_position = [0.02, 0.0, 0.0, 0.0]
    points = [point(0, 100.0), point(4, 50.0, per_position)]
    rows = draft_length.predict(points)
    assert all(row["predicted_acceptance_length"] <= 1.02 for row in rows)
    # Every draft costs and none pays: the shortest draft is the least bad, and still slower than none.
    assert draft_length.best(rows)["k"] == 1 and draft_length.best(rows)["predicted_tokens_per_second"] < 100.0


def test_without_per_position_figures_there_is_nothing_to_predict():
    assert draft_length.predict([point(0, 100.0)]) == []
    assert draft_length.predict([{"k": 4, "decode_tokens_per_second": 10.0, "acceptance_length": 2.0,
                                  "per_position_acceptance": []}]) == []
    assert draft_length.best([]) is None
