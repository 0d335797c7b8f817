# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a tune run rolls out to the fleet (playbooks/tune.yml), chosen from the compare run it made on the canary.

The compare run's recommendation (module_utils/report/compare.recommend) is the fastest configuration at the target
concurrency, DFlash only when its rounds show it faster than the fastest baseline. A tune run changes the fleet
only for an advantage outside the noise: it takes the recommendation when its interval over the runner-up excludes
1.00, and keeps the inventory's settings when the two cannot be told apart and the runner-up is what the inventory
runs already (a measured tie is no reason to restart a fleet), or when one round gave no interval at all.

The choice is the vllm_server variables of that configuration (module_utils/plan/candidates.overrides): its
speculative settings, its arguments as the layer ``vllm_server_args_tune`` (merged over the inventory's own, so
they stay the inventory's), and a speed gate set from what was just measured: a DFlash choice is gated against the
fastest baseline the compare run kept (``vllm_server_gate_baseline_config``), with ``vllm_server_gate_min_speedup``
the lower bound of its interval, rounded down to a hundredth: a host whose own interval lies wholly below what the
canary surely showed is rolled back; one its few repeats cannot decide passes, since the canary decided.

A shorter K than the chosen one's may be predicted faster (module_utils/report/draft_length, from the per-position
acceptance at the longest K measured): the choice names it with its predicted gain, as a configuration to add to
the next run to confirm it by measurement. A prediction is not rolled out.
"""

from __future__ import annotations

import math

from ansible_collections.llmops.vllm.plugins.module_utils.plan import candidates
from ansible_collections.llmops.vllm.plugins.module_utils.report import draft_length, intervals

LAYER = "vllm_server_args_tune"


def _result(record, name):
    return next((r for r in record.get("results") or [] if r.get("name") == name), None)


def _same(result, deployed):
    """Whether a measured configuration runs the inventory's settings: the description candidates.describe gives them
    (its speculative method, K and extra keys, no arguments over)."""
    mine = candidates.describe({"name": ""}, deployed)
    return result is not None and all(result.get(field) == mine[field] for field in ("method", "k", "extra", "args"))


def _gate(record, chosen):
    """(baseline name, minimum speed-up) for a DFlash choice: the baseline whose interval under the choice has the
    highest lower bound above 1.00; (None, None) without one."""
    if chosen.get("baseline") or not chosen.get("method"):
        return None, None
    best = None
    for baseline, interval in sorted(((record.get("speedup_intervals") or {}).get(chosen["name"]) or {}).items()):
        low = (interval or {}).get("low")
        if low is not None and low > 1.0 and (best is None or low > best[1]):
            best = (baseline, low)
    if best is None:
        return None, None
    return best[0], math.floor(best[1] * 100) / 100.0


def confirm(record, chosen):
    """The K predicted faster than the chosen DFlash configuration's and not measured, as {k, predicted_tokens_per_second,
    measured_tokens_per_second (the chosen's), gain, configuration}; None when there is none."""
    if not chosen or not chosen.get("method") or chosen.get("baseline"):
        return None
    for group in record.get("draft_length") or []:
        if chosen["name"] not in group.get("configurations", []):
            continue
        rows = group.get("rows") or []
        here = next((r for r in rows if r["k"] == chosen.get("k")), None)
        top = draft_length.best(rows)
        if not here or not top or top["k"] == chosen.get("k") or top.get("measured_tokens_per_second") is not None:
            return None
        against = here.get("measured_tokens_per_second") or here["predicted_tokens_per_second"]
        if not against or top["predicted_tokens_per_second"] <= against:
            return None
        return {"k": top["k"], "predicted_tokens_per_second": top["predicted_tokens_per_second"],
                "measured_tokens_per_second": against,
                "gain": round(top["predicted_tokens_per_second"] / against - 1.0, 4),
                "configuration": {"name": "dflash-k%d" % top["k"],
                                  "speculative": {"method": chosen["method"], "num_speculative_tokens": top["k"]}}}
    return None


def choose(record, configurations, deployed):
    """The configuration to roll out, from a kept compare record (module_utils/report/compare.record), the
    configurations it measured ({name, speculative, args}) and the inventory's settings (compare.yml's
    _vllm_compare_deployed). Returns {name, keep (the inventory's speculative settings stand), why, settings:
    {variable: value}, gate: {baseline, min_speedup} or None}; the settings hold the gate's variables even when the
    inventory's settings are kept, when those are the DFlash configuration measured faster."""
    rec = (record or {}).get("recommendation") or {}
    name = rec.get("name")
    if not name:
        return {"name": None, "keep": True, "settings": {}, "gate": None,
                "why": "nothing to choose: %s" % (rec.get("msg") or "no configuration was measured")}
    interval = rec.get("interval") or {}
    runner = rec.get("runner_up")
    deployed_name = next((r["name"] for r in record.get("results") or [] if _same(r, deployed)), None)
    if runner and interval.get("low") is None:
        return {"name": deployed_name, "keep": True, "settings": {}, "gate": None,
                "why": "one round gives no interval, so no advantage is shown outside the noise: the inventory's "
                       "settings are kept (vllm_compare_rounds 2 or more)"}
    if runner and not rec.get("told_apart") and runner == deployed_name:
        return {"name": runner, "keep": True, "settings": {}, "gate": None,
                "why": "%s and %s cannot be told apart (%s), and the inventory runs %s already: kept"
                       % (name, runner, intervals.describe(interval, "round"), runner)}
    entry = next((c for c in configurations or [] if c.get("name") == name), None)
    if entry is None:
        return {"name": None, "keep": True, "settings": {}, "gate": None,
                "why": "the recommended configuration %s is not among the configurations measured" % name}
    keep = name == deployed_name
    settings = {}
    if not keep:
        over = candidates.overrides(entry, deployed)
        for own in ("speculative_method", "speculative_model", "num_speculative_tokens", "speculative_extra"):
            if own in over:
                settings["vllm_server_" + own] = over[own]
        settings[LAYER] = dict(entry.get("args") or {})
    baseline, minimum = _gate(record, _result(record, name) or {})
    if baseline or not keep:
        settings["vllm_server_gate_baseline_config"] = baseline or ""
        settings["vllm_server_gate_min_speedup"] = minimum
        settings["vllm_server_gate_inconclusive"] = "pass" if baseline else "fail"
    suggestion = confirm(record, _result(record, name))
    why = ("%s is what the inventory runs already; " % name if keep else "") + (rec.get("msg") or "")
    if suggestion:
        why += ("; K=%d is predicted %.0f%% faster (%.2f against %.2f tok/s, from the per-position acceptance): add "
                "it to vllm_compare_configurations to confirm it by measurement" % (
                    suggestion["k"], 100 * suggestion["gain"], suggestion["predicted_tokens_per_second"],
                    suggestion["measured_tokens_per_second"]))
    return {"name": name, "keep": keep, "settings": settings, "confirm": suggestion,
            "gate": {"baseline": baseline, "min_speedup": minimum} if baseline else None, "why": why}
