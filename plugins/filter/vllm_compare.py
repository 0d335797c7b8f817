"""The compare run's filters (playbooks/compare.yml): its configurations checked and turned into the server role's
variables (``module_utils/plan/compare``), and the measured baseline a speed gate reads (``module_utils/report/compare``).
Jinja renders what these decide."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from ansible_collections.llmops.vllm.plugins.module_utils.plan import compare as compare_plan
from ansible_collections.llmops.vllm.plugins.module_utils.report import compare as compare_report


def _dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def vllm_compare_problems(configurations: Any) -> list[str]:
    return compare_plan.problems(configurations)


def vllm_compare_order(configurations: list[Any]) -> list[dict[str, Any]]:
    return compare_plan.order([_dict(c) for c in configurations])


def vllm_compare_settings(configuration: Any, deployed: Any) -> dict[str, Any]:
    return compare_plan.settings(_dict(configuration), _dict(deployed))


def vllm_compare_describe(configuration: Any, deployed: Any) -> dict[str, Any]:
    return compare_plan.describe(_dict(configuration), _dict(deployed))


def vllm_compare_key(fields: Any, flavor: str = "gpu", gpu_lines: Any = None) -> dict[str, str]:
    gpu, count = compare_report.gpu_fields(flavor, list(gpu_lines or []))
    return compare_report.key(dict(_dict(fields), gpu=gpu, gpu_count=count))


def vllm_compare_baseline(directory: str, name: str, fields: Any, settings: Any) -> dict[str, Any]:
    path = os.path.join(str(directory), compare_report.slug(compare_report.key(_dict(fields))), "latest.json")
    try:
        with open(path) as fh:
            kept = json.load(fh)
    except (OSError, ValueError):
        kept = None
    value, problem = compare_report.measured_baseline(kept, str(name), _dict(fields), _dict(settings))
    return {"tokens_per_second": value, "problem": problem}


class FilterModule:
    """Compare run filters."""

    def filters(self):
        return {"vllm_compare_problems": vllm_compare_problems, "vllm_compare_order": vllm_compare_order,
                "vllm_compare_settings": vllm_compare_settings, "vllm_compare_describe": vllm_compare_describe,
                "vllm_compare_key": vllm_compare_key, "vllm_compare_baseline": vllm_compare_baseline}
