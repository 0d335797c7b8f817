"""The compare run's filters (playbooks/compare.yml): its configurations checked and turned into the server role's
variables (``module_utils/plan/candidates``), and the measured baseline a speed gate reads (``module_utils/report/compare``).
Jinja renders what these decide."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from ansible_collections.llmops.vllm.plugins.module_utils.plan import candidates
from ansible_collections.llmops.vllm.plugins.module_utils.plan import tune
from ansible_collections.llmops.vllm.plugins.module_utils.report import compare
from ansible_collections.llmops.vllm.plugins.module_utils.report import intervals
from ansible_collections.llmops.vllm.plugins.module_utils.report import rounds


def _dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def vllm_compare_problems(configurations: Any, run: Any = None) -> list[str]:
    """The list's problems (none for None: the default list), and the run's own settings found in ``run`` (the
    canary's variables) when given."""
    found = [] if configurations is None else candidates.problems(configurations)
    if run is not None:
        found += candidates.run_problems(dict((name, run[name]) for name in candidates.RUN_OPTIONS if name in run),
                                         configurations)
    return found


def vllm_compare_order(configurations: list[Any]) -> list[dict[str, Any]]:
    return candidates.order([_dict(c) for c in configurations])


def vllm_compare_schedule(configurations: list[Any], rounds: Any = 1, aa: Any = False) -> list[dict[str, Any]]:
    configurations = [_dict(c) for c in configurations]
    return candidates.schedule(candidates.with_twin(configurations) if aa else configurations, int(rounds or 1))


def vllm_compare_settled(results: list[Any], target: Any = None) -> bool:
    return rounds.settled([_dict(r) for r in results],
                          float(target) if target else intervals.TARGET_HALF_WIDTH)


def vllm_compare_settings(configuration: Any, deployed: Any) -> dict[str, Any]:
    return candidates.settings(_dict(configuration), _dict(deployed))


def vllm_compare_describe(configuration: Any, deployed: Any) -> dict[str, Any]:
    return candidates.describe(_dict(configuration), _dict(deployed))


def vllm_compare_key(fields: Any, flavor: str = "gpu", gpu_lines: Any = None) -> dict[str, str]:
    gpu, count = compare.gpu_fields(flavor, list(gpu_lines or []))
    return compare.key(dict(_dict(fields), gpu=gpu, gpu_count=count))


def _kept(directory: str, fields: Any) -> Any:
    """The compare run kept on the controller for a key (``<directory>/<key>/latest.json``), or None."""
    path = os.path.join(str(directory), compare.slug(compare.key(_dict(fields))), "latest.json")
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def vllm_compare_baseline(directory: str, name: str, fields: Any, settings: Any) -> dict[str, Any]:
    kept = _kept(directory, fields)
    value, problem = compare.measured_baseline(kept, str(name), _dict(fields), _dict(settings))
    return {"tokens_per_second": value, "problem": problem,
            "blocks": compare.measured_blocks(kept, str(name)) if value else []}


def vllm_compare_serving(directory: str, fields: Any, serving: Any) -> Any:
    """What the compare run kept for a key measured on the configuration a host serves (module_utils/report/compare
    .serving_figures), or None."""
    return compare.serving_figures(_kept(directory, fields), _dict(fields), _dict(serving))


def vllm_compare_expected(schedule: Any, deployed: Any, runs_per_block: Any, directory: str, fields: Any,
                          settings: Any) -> dict[str, Any]:
    """How long the run will take, from the record kept for the same key and workload
    (module_utils/plan/candidates.expected)."""
    kept = _kept(directory, fields)
    if kept is None:
        return {"seconds": None, "why": "no earlier run on this key to time it from"}
    if not isinstance(kept, dict) or kept.get("workload") != compare.workload(_dict(settings)):
        return {"seconds": None, "why": "the earlier run on this key measured another workload"}
    return candidates.expected([_dict(b) for b in schedule or []], _dict(deployed), int(runs_per_block or 1), kept)


def vllm_tune_choice(latest: str, configurations: Any, deployed: Any) -> dict[str, Any]:
    """What a tune run rolls out, from the compare record kept at ``latest`` (module_utils/plan/tune)."""
    try:
        with open(str(latest)) as fh:
            kept = json.load(fh)
    except (OSError, ValueError) as exc:
        return {"name": None, "keep": True, "settings": {}, "gate": None,
                "why": "the compare run's record %s could not be read: %s" % (latest, exc)}
    return tune.choose(kept, [_dict(c) for c in configurations or []], _dict(deployed))


class FilterModule:
    """Compare run filters."""

    def filters(self):
        return {"vllm_compare_problems": vllm_compare_problems, "vllm_compare_order": vllm_compare_order,
                "vllm_compare_settings": vllm_compare_settings, "vllm_compare_describe": vllm_compare_describe,
                "vllm_compare_key": vllm_compare_key, "vllm_compare_baseline": vllm_compare_baseline,
                "vllm_compare_serving": vllm_compare_serving,
                "vllm_compare_expected": vllm_compare_expected,
                "vllm_compare_schedule": vllm_compare_schedule, "vllm_compare_settled": vllm_compare_settled,
                "vllm_tune_choice": vllm_tune_choice}
