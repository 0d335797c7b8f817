# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The answer of a compare run: configurations measured side by side on one canary, the same prompts and
concurrencies for each (playbooks/compare.yml).

Each result is a configuration (module_utils/plan/candidates.describe: name, method, K, baseline or not) with what
vllm_bench measured on it (module_utils/probe/speed.figures) or why it did not serve. From them: aggregate tok/s for
each configuration x category x concurrency; the speed-up of each DFlash configuration over each baseline; where
speculation stops paying (the lowest measured concurrency at which a configuration is no faster than the one without
speculation); the tok/s of every number of speculative tokens predicted from per-position acceptance
(module_utils/report/draft_length), beside what was measured; and a recommendation: the configuration with the most
tok/s at the target concurrency over the category mix, with its evidence.

Results are kept on the controller under a key (model, drafter, vLLM version, GPU model and count, tensor parallel
size): the rollout's speed gate reads the measured baseline of its own key, on the same workload.
"""

from __future__ import annotations

import re

from ansible_collections.llmops.vllm.plugins.module_utils.report import draft_length, intervals, rounds
from ansible_collections.llmops.vllm.plugins.module_utils.probe.speed import MISCONFIGURED_BELOW

KEY_FIELDS = ("model", "drafter", "vllm", "gpu", "gpu_count", "tensor_parallel_size")
OVERALL = "overall"
RANDOM = "random"


def key(fields):
    """The key results are kept under, every field as text ('' when not known)."""
    return {name: str(fields.get(name) if fields.get(name) is not None else "") for name in KEY_FIELDS}


def slug(fields):
    """A directory name for a key: its fields joined by '__', anything but letters, digits, '.', '_' and '-' as '_'."""
    name = "__".join(re.sub(r"[^A-Za-z0-9._-]", "_", fields[f]) or "-" for f in KEY_FIELDS)
    return "_" + name if name.startswith(".") else name


WORKLOAD = ("dataset", "dataset_digest", "categories", "dataset_output_len", "ignore_eos", "num_prompts", "input_len",
            "output_len", "warmups")


def workload(settings):
    """What must be the same for two measurements to be compared: the prompts (and their file's digest), the output
    length, the warm-up. Not the concurrencies or the repeats: the gate reads concurrency 1, which every run has."""
    return {name: settings.get(name) for name in WORKLOAD}


def gpu_fields(flavor, lines):
    """(GPU model, count) from the lines of ``nvidia-smi -L`` ("GPU 0: NVIDIA H200 (UUID: ...)"); ('cpu', 0) on the
    CPU flavor. Mixed models are named together, in order, each once."""
    if flavor == "cpu":
        return "cpu", 0
    names = []
    for line in lines or []:
        found = re.match(r"^GPU \d+: (.+?)(?: \(UUID: [^)]*\))?\s*$", line)
        if found:
            names.append(found.group(1))
    unique = [n for i, n in enumerate(names) if n not in names[:i]]
    return "+".join(unique) or "unknown", len(names)


def cells(bench):
    """{category: {concurrency: {output, decode, acceptance_length, per_position, spread}}} from one bench figures,
    with the overall figures as the category 'overall' (the fixed workload's as 'random' and 'overall')."""
    bench = bench or {}
    out = {}
    for name, by in (bench.get("categories") or {}).items():
        out[name] = {int(c): {"output": (cell.get("output_tokens_per_second") or {}).get("median"),
                              "decode": (cell.get("decode_tokens_per_second") or {}).get("median"),
                              "spread": (cell.get("output_tokens_per_second") or {}).get("spread"),
                              "acceptance_length": cell.get("acceptance_length"),
                              "per_position": cell.get("per_position_acceptance") or []}
                     for c, cell in by.items()}
    if bench.get("overall"):
        out[OVERALL] = {int(c): {"output": cell.get("output_tokens_per_second"),
                                 "decode": cell.get("decode_tokens_per_second"),
                                 "spread": max([out[n][int(c)]["spread"] or 0.0 for n in out if int(c) in out[n]] or [0.0]),
                                 "acceptance_length": cell.get("acceptance_length"),
                                 "per_position": cell.get("per_position_acceptance") or []}
                        for c, cell in bench["overall"].items()}
    elif bench.get("runs"):
        runs = {int(run["concurrency"]): run for run in bench["runs"]}
        fixed = {c: {"output": run["client"].get("output_tokens_per_second"),
                     "decode": run["client"].get("decode_tokens_per_second"), "spread": None,
                     "acceptance_length": (run.get("speculative") or {}).get("acceptance_length"),
                     "per_position": (run.get("speculative") or {}).get("per_position_acceptance") or []}
                 for c, run in runs.items()}
        out[RANDOM] = fixed
        out[OVERALL] = fixed
    return out


def score(by_category, concurrency, mix=None):
    """Aggregate tok/s at one concurrency over a category mix ({category: weight}); the overall figure without one.
    None when a category of the mix was not measured there."""
    if not mix:
        return (by_category.get(OVERALL, {}).get(concurrency) or {}).get("output")
    total, weight = 0.0, 0.0
    for name, share in mix.items():
        value = (by_category.get(name, {}).get(concurrency) or {}).get("output")
        if value is None:
            return None
        total += share * value
        weight += share
    return round(total / weight, 2) if weight else None


def _ratio(a, b):
    return round(a / b, 3) if a is not None and b else None


def _served(results):
    """The configurations that served, each once: the first round in which it served (its figures fill the tables;
    every round's figure goes into the intervals, module_utils/report/rounds)."""
    out, names = [], set()
    for r in results:
        if r.get("status") == "ready" and r.get("bench") and r["name"] not in names:
            names.add(r["name"])
            out.append(r)
    return out


def compare(results, target_concurrency=1, mix=None):
    """The comparison of one run's results (each a plan/candidates.describe dict with status, reason and bench)."""
    served = _served(results)
    by = {r["name"]: cells(r["bench"]) for r in served}
    concurrencies = sorted({c for table in by.values() for c in table.get(OVERALL, {})})
    categories = []
    for table in by.values():
        categories += [name for name in table if name not in categories and name != OVERALL]
    baselines = [r for r in served if r["baseline"]]
    candidates = [r for r in served if not r["baseline"]]
    plain = next((r for r in served if not r["method"]), None)

    def overall(name, c):
        return (by[name].get(OVERALL, {}).get(c) or {}).get("output")

    speedups = {r["name"]: {b["name"]: {c: _ratio(overall(r["name"], c), overall(b["name"], c)) for c in concurrencies}
                            for b in baselines} for r in candidates}
    stops = {}
    for r in [r for r in served if r["method"]]:
        # Against no speculation where it was measured, else against the fastest baseline at each concurrency.
        stops[r["name"]] = None
        for c in concurrencies:
            against = [overall(plain["name"], c)] if plain else [overall(b["name"], c) for b in baselines if b is not r]
            against = [v for v in against if v is not None]
            mine = overall(r["name"], c)
            if against and mine is not None and mine <= max(against):
                stops[r["name"]] = c
                break
    scores = {r["name"]: score(by[r["name"]], target_concurrency, mix) for r in served}
    per_round = rounds.by_round(results)
    speedup_intervals = {r["name"]: {b["name"]: rounds.paired(per_round, r["name"], b["name"]) for b in baselines}
                         for r in candidates}
    return {
        "concurrencies": concurrencies, "categories": categories, "target_concurrency": target_concurrency,
        "mix": mix or {}, "cells": by, "scores": scores,
        "methods": {r["name"]: r["method"] for r in served}, "ks": {r["name"]: r["k"] for r in served}, "speedups": speedups, "stops_paying": stops,
        "draft_length": _draft_lengths(served, plain, by),
        "recommendation": recommend(served, scores, by, plain, target_concurrency, per_round),
        # Single-stream decode tok/s of each round, the paired 95% intervals of each DFlash configuration over each
        # baseline, and the A/A check's (module_utils/report/rounds).
        "rounds": per_round, "speedup_intervals": speedup_intervals,
        "noise_floor": rounds.noise_floor(results, per_round),
        "failed": [{"name": r["name"], "status": r.get("status"), "reason": r.get("reason", ""), "msg": r.get("msg", "")}
                   for r in _never_served(results, by)],
        # Each configuration's wall time on the canary: its checks, its start (or rollback) and its measurements.
        "seconds": _seconds(results),
    }


def _never_served(results, served):
    """The first result of each configuration that served in no round."""
    out, names = [], set()
    for r in results:
        if r["name"] not in served and r["name"] not in names:
            names.add(r["name"])
            out.append(r)
    return out


def _seconds(results):
    """Each configuration's wall time on the canary, summed over its rounds (None when none was timed)."""
    out = {}
    for r in results:
        if r.get("seconds") is not None:
            out[r["name"]] = round((out.get(r["name"]) or 0.0) + r["seconds"], 1)
        else:
            out.setdefault(r["name"], None)
    return out


def _draft_lengths(served, plain, by):
    """Predicted against measured tok/s per K, for each DFlash drafter setting measured at more than one K or any."""
    groups = {}
    for r in served:
        if r["method"] and not r["baseline"]:
            groups.setdefault(repr(sorted(r.get("extra", {}).items())), []).append(r)
    out = []
    for members in groups.values():
        points = [{"k": r["k"], "decode_tokens_per_second": (by[r["name"]][OVERALL].get(1) or {}).get("decode"),
                   "acceptance_length": (by[r["name"]][OVERALL].get(1) or {}).get("acceptance_length"),
                   "per_position_acceptance": (by[r["name"]][OVERALL].get(1) or {}).get("per_position")}
                  for r in members if 1 in by[r["name"]].get(OVERALL, {})]
        if plain and 1 in by[plain["name"]].get(OVERALL, {}):
            points.append({"k": 0, "decode_tokens_per_second": by[plain["name"]][OVERALL][1]["decode"],
                           "acceptance_length": 1.0, "per_position_acceptance": []})
        rows = draft_length.predict(points)
        if rows:
            out.append({"configurations": [r["name"] for r in members], "rows": rows,
                        "best": draft_length.best(rows)})
    return out


def _step_cost(cell, plain_cell):
    """A speculative step's time over a plain step's, from decode tok/s and acceptance length at concurrency 1."""
    if not cell or not plain_cell or not cell.get("decode") or not plain_cell.get("decode") or not cell.get("acceptance_length"):
        return None
    return round((cell["acceptance_length"] / cell["decode"]) / (1.0 / plain_cell["decode"]), 3)


PRACTICAL_ROUNDS = 50


def _more_rounds(interval):
    """What would tell two configurations apart: about how many rounds, or that the noise is far larger than the
    difference (more rounds than a compare run would take)."""
    more = intervals.blocks_to_tell(interval, 1.0)
    if not more:
        return ""
    if more > PRACTICAL_ROUNDS:
        return "; the noise between rounds is far larger than the difference (over %d rounds would be needed)" % (
            PRACTICAL_ROUNDS)
    return "; about %d rounds would (vllm_compare_rounds)" % more


def _unproven(best, ranked, per_round):
    """When the fastest configuration is a DFlash one and its rounds do not show it faster than the fastest baseline
    (its paired interval holds 1.00, or lies below it): that baseline and the interval. None otherwise, and with one
    round, which gives no interval."""
    base = next((r for r in ranked if r["baseline"]), None)
    if best["baseline"] or base is None:
        return None
    interval = rounds.paired(per_round or {}, best["name"], base["name"])
    if interval is None or interval["low"] is None or interval["low"] > 1.0:
        return None
    return base, interval


def recommend(served, scores, by, plain, target_concurrency, per_round=None):
    """The configuration with the most tok/s at the target concurrency over the mix, and the evidence: the paired
    interval of its single-stream decode over the runner-up's, from the rounds; "cannot tell apart" when it holds
    1.00. A DFlash configuration is recommended only when its rounds show it faster than the fastest baseline: when
    they cannot, the baseline is (DFlash not shown to pay is DFlash not worth deploying)."""
    ranked = sorted([r for r in served if scores.get(r["name"]) is not None], key=lambda r: -scores[r["name"]])
    if not ranked:
        return {"name": None, "msg": "no configuration was measured at concurrency %d" % target_concurrency}
    best = ranked[0]
    runner = ranked[1] if len(ranked) > 1 else None
    unproven = _unproven(best, ranked, per_round)
    if unproven:
        best, runner = unproven[0], best
    spread = max([(by[r["name"]][OVERALL].get(target_concurrency) or {}).get("spread") or 0.0
                  for r in (best, runner) if r] or [0.0])
    margin = _ratio(scores[best["name"]], scores[runner["name"]]) if runner else None
    interval = rounds.paired(per_round or {}, best["name"], runner["name"]) if runner else None
    out = {"name": best["name"], "tokens_per_second": scores[best["name"]], "speculation_pays": bool(best["method"]),
           "dflash_pays": not best["baseline"], "runner_up": runner["name"] if runner else None,
           "margin": margin, "spread": spread, "interval": interval,
           "told_apart": None if interval is None or interval["low"] is None else intervals.tells_apart(interval)}
    lines = ["%s: %.2f tok/s at concurrency %d" % (best["name"], scores[best["name"]], target_concurrency)]
    if unproven:
        lines.append("kept over %s (%.2f tok/s, %.2fx), which its rounds do not show faster" % (
            runner["name"], scores[runner["name"]], _ratio(scores[runner["name"]], scores[best["name"]])))
    elif runner:
        lines.append("%.2fx %s (%.2f tok/s)" % (margin, runner["name"], scores[runner["name"]]))
    if runner:
        if interval is not None and interval["low"] is not None:
            said = ("single-stream decode %.2fx the runner-up's, 95%% interval [%.2f, %.2f] over %d rounds"
                    % (interval["ratio"], interval["low"], interval["high"], interval["n"]))
            if out["told_apart"]:
                lines.append(said)
            else:
                lines.append("cannot tell %s and %s apart within this run: %s holds 1.00%s" % (
                    best["name"], runner["name"], said, _more_rounds(interval)))
        elif margin is not None and margin - 1.0 <= spread:
            lines.append("within the spread of the repeated runs (%.0f%%), and one round cannot show the host's "
                         "drift: measure in more rounds (vllm_compare_rounds) to tell them apart" % (100 * spread))
    candidates = [r for r in ranked if not r["baseline"]]
    if best["baseline"] and candidates:
        top = candidates[0]
        cell = by[top["name"]][OVERALL].get(1)
        plain_cell = by[plain["name"]][OVERALL].get(1) if plain else None
        length = (cell or {}).get("acceptance_length")
        why = "DFlash %s here: its best configuration, %s, gives %.2f tok/s" % (
            "is not shown to pay" if unproven else "does not pay", top["name"], scores[top["name"]])
        if length is not None and length < MISCONFIGURED_BELOW:
            why += (" with a mean acceptance length of %.2f: its drafts are almost never accepted, so each step costs "
                    "more and yields no more tokens (a drafter that does not match its target, or prompts unlike its "
                    "training data)" % length)
        elif length is not None:
            cost = _step_cost(cell, plain_cell)
            why += " with a mean acceptance length of %.2f" % length
            if cost:
                why += ", but each step costs %.2fx a step without speculation" % cost
        lines.append(why)
    if not best["method"]:
        lines.append("speculation %s here: no speculative configuration was %sfaster than none" % (
            ("is not shown to pay", "shown ") if unproven else ("does not pay", "")))
    out["msg"] = "; ".join(lines)
    return out


def record(summary, fields, results, settings, run_id):
    """What the controller keeps of a run, under its key: the latest one is what the gate reads."""
    return {"run": run_id, "key": key(fields), "workload": workload(settings),
            "results": [{k: r.get(k) for k in ("name", "method", "k", "extra", "baseline", "args", "status", "reason",
                                               "restarted", "seconds", "measure_seconds", "bench", "round")}
                        for r in results],
            "scores": summary["scores"], "recommendation": summary["recommendation"],
            # The rest of the answer, as data: what compare.md shows beside the table.
            "speedups": summary["speedups"], "stops_paying": summary["stops_paying"],
            "draft_length": summary["draft_length"], "failed": summary["failed"],
            "speedup_intervals": summary["speedup_intervals"], "noise_floor": summary["noise_floor"]}


def measured_baseline(kept, name, fields, settings):
    """(single-stream decode tok/s of the configuration ``name`` in the kept record, problem): the baseline a rollout's
    speed gate compares with. The record must be of the same key and workload, and the configuration must have
    served."""
    if not kept:
        return None, ("no compare run is kept for %s: run playbooks/compare.yml with a configuration named %s first"
                      % (slug(key(fields)), name))
    if kept.get("key") != key(fields):
        return None, "the kept compare run is of %s, not %s" % (kept.get("key"), key(fields))
    if kept.get("workload") != workload(settings):
        return None, ("the kept compare run measured another workload (%s), not this gate's (%s): measure both on the "
                      "same prompts, output length and warm-up" % (kept.get("workload"), workload(settings)))
    result = next((r for r in kept.get("results", []) if r.get("name") == name), None)
    if result is None:
        return None, "the kept compare run has no configuration named %s (it has: %s)" % (
            name, ", ".join(r.get("name", "?") for r in kept.get("results", [])))
    single = (cells(result.get("bench")).get(OVERALL, {}).get(1) or {}).get("decode")
    if result.get("status") != "ready" or not single:
        return None, "the configuration %s did not serve in the kept compare run (%s)" % (name, result.get("reason") or "-")
    return single, None


def measured_blocks(kept, name):
    """The single-stream decode tok/s of each block the configuration ``name`` was measured in, in the kept record:
    each round's figure when it was measured in rounds, else its one round's repeats (vllm_bench's blocks). What the
    gate's interval takes as the baseline's; [] from a record that has none."""
    results = (kept or {}).get("results") or []
    per_round = rounds.by_round(results).get(name) or {}
    if len(per_round) >= 2:
        # Measured in rounds: each round's figure, which carries the drift between rounds that repeats cannot show.
        return [per_round[r] for r in sorted(per_round)]
    result = next((r for r in results if r.get("name") == name), None) or {}
    return [b for b in ((result.get("bench") or {}).get("blocks") or []) if isinstance(b, (int, float)) and b > 0]


def serving_figures(kept, fields, serving):
    """What the kept compare run measured on the configuration a host serves, for the fleet's alert rules and dashboard
    (module_utils/report/alerts): ``serving`` is {method, k, extra} as the host serves them; the configuration is the
    first that served in the kept run with the same method, K and extra keys and no args of its own. Returns {name,
    acceptance_length (at concurrency 1, else the lowest measured), stops_paying (the concurrency at which it was no
    faster than without speculation, None when it always was)}, or None: no record of this key, no such configuration,
    no speculation. The workload is not held to the gate's: acceptance is the drafter's on the run's prompts."""
    wanted = _configuration(serving)
    if not isinstance(kept, dict) or kept.get("key") != key(fields) or not wanted or not wanted[0]:
        return None
    for result in _served([r for r in kept.get("results") or [] if isinstance(r, dict)]):
        if _configuration(result) != wanted or result.get("args"):
            continue
        overall = cells(result["bench"]).get(OVERALL) or {}
        at = 1 if 1 in overall else min(overall, default=None)
        acceptance = (overall.get(at) or {}).get("acceptance_length")
        return {"name": result["name"],
                "acceptance_length": acceptance if isinstance(acceptance, (int, float)) and acceptance > 1 else None,
                "stops_paying": (kept.get("stops_paying") or {}).get(result["name"])}
    return None


def _configuration(described):
    # (method, K, extra keys) of a host's settings or a kept result; None when they are not of those types (a value
    # the preflight has yet to refuse, a record edited by hand).
    try:
        return (described.get("method") or "", int(described.get("k") or 0), dict(described.get("extra") or {}))
    except (AttributeError, TypeError, ValueError):
        return None


def _n(value, digits=2):
    return "-" if value is None else "%.*f" % (digits, value)


def _interval_lines(summary):
    """The paired intervals over rounds and the A/A check, or why there are none."""
    found = [(name, base, i) for name, over in (summary.get("speedup_intervals") or {}).items()
             for base, i in over.items() if i is not None]
    if not found:
        return []
    lines = ["", "## How sure: single-stream decode speed-ups, 95%% intervals over rounds (%s)" % intervals.METHOD, ""]
    if all(i["low"] is None for _n_, _b, i in found):
        return lines + ["One round: no interval. Repeats inside a round cannot show the host's drift between "
                        "configurations; measure in two rounds or more (vllm_compare_rounds)."]
    lines += ["| configuration | baseline | speed-up | 95% interval | rounds | told apart |", "|---|---|---|---|---|---|"]
    for name, base, i in found:
        lines.append("| %s | %s | %.2fx | %s | %d | %s |" % (
            name, base, i["ratio"], "[%.2f, %.2f]" % (i["low"], i["high"]) if i["low"] is not None else "-", i["n"],
            "yes" if intervals.tells_apart(i) else "no: the interval holds 1.00"))
    floor = summary.get("noise_floor")
    if floor and floor.get("low") is not None:
        lines += ["", "A/A check (%s against %s, the same settings): %s, so this host's noise floor is +-%.1f%%%s." % (
            floor["configurations"][1], floor["configurations"][0], intervals.describe(floor, "round"),
            100 * floor["half_width"],
            "" if floor["low"] <= 1.0 <= floor["high"] else
            "; it does not hold 1.00: something besides the settings differs between rounds")]
    return lines


def markdown(summary, fields, run_id):
    """The answer as Markdown: the recommendation, one table of tok/s, the speed-ups, where speculation stops paying,
    and each draft length predicted against measured."""
    c_all = summary["concurrencies"]
    lines = ["# Compare run %s" % run_id, "",
             "Key: " + ", ".join("%s %s" % (f, fields.get(f) or "-") for f in KEY_FIELDS), "",
             "**Recommendation:** %s" % summary["recommendation"]["msg"], ""]
    head = ["configuration", "method", "K", "category"] + ["tok/s at %d" % c for c in c_all]
    head += ["acceptance length", "per-position acceptance"]
    lines += ["## Aggregate tok/s (median over the repeats; spread = (max-min)/median)", "",
              "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, table in summary["cells"].items():
        for category in summary["categories"] + [OVERALL]:
            by_c = table.get(category)
            if not by_c:
                continue
            single = by_c.get(1) or by_c.get(min(by_c)) or {}
            row = [name, summary["methods"][name] or "none", str(summary["ks"][name] or "-"), category]
            row += ["%s%s" % (_n((by_c.get(c) or {}).get("output")),
                              " (±%.0f%%)" % (50 * by_c[c]["spread"]) if (by_c.get(c) or {}).get("spread") else "")
                    for c in c_all]
            row += [_n(single.get("acceptance_length")),
                    " / ".join("%.0f%%" % (100 * p) for p in single.get("per_position") or []) or "-"]
            lines.append("| " + " | ".join(row) + " |")
    if summary["speedups"]:
        lines += ["", "## Speed-up of each DFlash configuration over each baseline (overall aggregate tok/s)", "",
                  "| configuration | baseline | " + " | ".join("at %d" % c for c in c_all) + " |",
                  "|---|---|" + "---|" * len(c_all)]
        for name, over in summary["speedups"].items():
            for base, by_c in over.items():
                lines.append("| %s | %s | %s |" % (name, base, " | ".join(
                    ("%.2fx" % by_c[c]) if by_c.get(c) is not None else "-" for c in c_all)))
    lines += _interval_lines(summary)
    if summary["stops_paying"]:
        lines += ["", "## Where speculation stops paying", ""]
        for name, c in summary["stops_paying"].items():
            lines.append("- %s: %s" % (name, "no faster than without speculation from concurrency %d" % c
                                       if c is not None else "faster at every measured concurrency"))
    for group in summary["draft_length"]:
        lines += ["", "## Draft length: predicted from per-position acceptance, against measured (%s)"
                  % ", ".join(group["configurations"]), "",
                  "| K | predicted acceptance length | predicted tok/s | measured acceptance length | measured tok/s | error |",
                  "|---|---|---|---|---|---|"]
        for row in group["rows"]:
            lines.append("| %d | %s | %s | %s | %s | %s |" % (
                row["k"], _n(row["predicted_acceptance_length"]), _n(row["predicted_tokens_per_second"]),
                _n(row["measured_acceptance_length"]), _n(row["measured_tokens_per_second"]),
                "%+.1f%%" % (100 * row["error"]) if row["error"] is not None else "-"))
        lines.append("")
        lines.append("Best predicted K: %d (%s tok/s single-stream)" % (group["best"]["k"],
                                                                        _n(group["best"]["predicted_tokens_per_second"])))
    if any(v is not None for v in summary["seconds"].values()):
        lines += ["", "## Wall time on the canary, all rounds (checks, start or rollback, measurements)", ""]
        lines += ["- %s: %s s" % (name, _n(seconds, 1)) for name, seconds in summary["seconds"].items()]
    if summary["failed"]:
        lines += ["", "## Not measured", ""]
        lines += ["- %s: %s %s %s" % (f["name"], f["status"], f["reason"], f["msg"]) for f in summary["failed"]]
    return "\n".join(lines) + "\n"


def chart(summary, path, title):
    """A PNG: overall aggregate tok/s of each configuration against concurrency, and tok/s per category at the
    target concurrency. Returns None when drawn, else why not."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError as e:
        return "no chart: matplotlib is not installed for the controller's Python (%s)" % e
    figure, (lines, bars) = pyplot.subplots(1, 2, figsize=(12, 4.5))
    c_all = summary["concurrencies"]
    for name, table in summary["cells"].items():
        values = [(table.get(OVERALL, {}).get(c) or {}).get("output") for c in c_all]
        lines.plot(c_all, [v if v is not None else float("nan") for v in values], marker="o", label=name)
    lines.set_xlabel("concurrency")
    lines.set_ylabel("aggregate tok/s (overall)")
    lines.set_title("tok/s by concurrency")
    if len(c_all) > 1:
        lines.set_xscale("log", base=2)
    lines.legend(loc="best", fontsize="small")
    names = list(summary["cells"])
    categories = summary["categories"] or [OVERALL]
    width = 0.8 / max(len(names), 1)
    target = summary["target_concurrency"]
    for i, name in enumerate(names):
        values = [(summary["cells"][name].get(cat, {}).get(target) or {}).get("output") or 0.0 for cat in categories]
        bars.bar([x + i * width for x in range(len(categories))], values, width, label=name)
    bars.set_xticks([x + width * (len(names) - 1) / 2 for x in range(len(categories))])
    bars.set_xticklabels(categories, rotation=20)
    bars.set_ylabel("aggregate tok/s at concurrency %d" % target)
    bars.set_title("tok/s by category")
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    pyplot.close(figure)
    return None
