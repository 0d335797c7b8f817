# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rounds of a compare run, and how sure its speed-ups are.

A compare run measures its configurations in rounds (module_utils/report/intervals.schedule: A B C, then C B A, ...),
each configuration started afresh in each round. A round's figure for a configuration is its single-stream decode
tok/s in that round (the geometric mean of the round's repeats): time per output token after the first, what a
drafter changes, not aggregate tok/s, which mixes in prefill and per-request overhead; on the engine's own clock
where the server exports it (workload.run_decode), else from wall clock, each request's latency less the
configuration's typical time to first token (workload.decode_after_first). Two
configurations measured in the same rounds give one log ratio per round, and the speed-up's 95% interval is the
paired t interval on them: the host's drift within a round touches both, and the counterbalanced order cancels a
drift linear in time. Repeats inside one round cannot show that drift, so one round gives no interval.

Two configurations with the same settings under different names are an A/A check: the interval of one over the
other is this host's noise floor, and must contain 1.00.
"""

from __future__ import annotations

from ansible_collections.llmops.vllm.plugins.module_utils.probe import workload
from ansible_collections.llmops.vllm.plugins.module_utils.report import intervals

SAME_SETTINGS = ("method", "k", "extra", "args")


def round_value(bench, ttft=None):
    """A round's single-stream decode tok/s: the geometric mean of its repeats' decode after the first token
    (module_utils/probe/workload.blocks, categories weighted alike, after ``ttft``: {category: ms}), else of its
    blocks as vllm_bench gave them, else its overall decode at concurrency 1; None when it measured none."""
    bench = bench or {}
    runs = [run for run in bench.get("runs") or [] if isinstance(run, dict) and run.get("client")]
    blocks = []
    if runs:
        names = set(run.get("category") for run in runs)
        blocks = workload.blocks(runs, dict((name, 1.0) for name in names), ttft=ttft)
    if not blocks:
        blocks = [b for b in bench.get("blocks") or [] if isinstance(b, (int, float)) and b > 0]
    if blocks:
        return round(intervals.geometric_mean(blocks), 3)
    value = ((bench.get("overall") or {}).get("1") or {}).get("decode_tokens_per_second")
    if value is None:
        value = bench.get("decode_tokens_per_second")
    return value if isinstance(value, (int, float)) and value > 0 else None


def by_round(results):
    """{name: {round: single-stream decode tok/s}} of the rounds in which each configuration served. The typical
    time to first token each request's decode is measured after is the configuration's, over all its rounds: one
    round's runs may all have been read by a starved client."""
    served = [r for r in results if r.get("status") == "ready" and r.get("bench")]
    runs = {}
    for result in served:
        runs.setdefault(result["name"], []).extend(
            run for run in (result["bench"].get("runs") or []) if isinstance(run, dict) and run.get("client"))
    out = {}
    for result in served:
        value = round_value(result["bench"], workload.reference_ttft(runs[result["name"]]))
        if value is not None:
            out.setdefault(result["name"], {})[int(result.get("round") or 0)] = value
    return out


def paired(rounds, candidate, baseline):
    """candidate over baseline on the rounds both served in (intervals.paired); None when they share none."""
    shared = sorted(set(rounds.get(candidate, {})) & set(rounds.get(baseline, {})))
    if not shared:
        return None
    return intervals.paired([rounds[baseline][r] for r in shared], [rounds[candidate][r] for r in shared])


def twins(results):
    """Pairs of names whose configurations have the same settings: the A/A checks, in the order first measured."""
    first = {}
    for result in results:
        first.setdefault(result["name"], result)
    seen, out = [], []
    for name, result in first.items():
        same = tuple(repr(result.get(field)) for field in SAME_SETTINGS)
        for other, settings in seen:
            if settings == same:
                out.append((other, name))
        seen.append((name, same))
    return out


def noise_floor(results, rounds=None):
    """The A/A interval (the second twin over the first) of the first pair of twins that shared a round, or None."""
    rounds = by_round(results) if rounds is None else rounds
    for first, second in twins(results):
        found = paired(rounds, second, first)
        if found is not None:
            return dict(found, configurations=[first, second])
    return None


def ranked(rounds):
    """Names by their single-stream decode tok/s over their rounds (geometric mean), fastest first."""
    return sorted(rounds, key=lambda name: -intervals.geometric_mean(list(rounds[name].values())))


def settled(results, target=intervals.TARGET_HALF_WIDTH):
    """Whether the speed-up the recommendation rests on, the fastest configuration over the next, is known within
    +-target: what lets a compare run stop before its last round. Never after one round (no interval yet)."""
    rounds = by_round(results)
    order = ranked(rounds)
    if len(order) < 2:
        return bool(order) and len(rounds[order[0]]) >= 2
    return intervals.narrow_enough(paired(rounds, order[0], order[1]) or {"half_width": None}, target)
