"""The filters that ask ``module_utils/plan/variables`` which inventory variables no entry point reads, and
``module_utils/plan/kinds`` which values do not fit their option's kind."""

from __future__ import annotations

from typing import Any

from ansible_collections.llmops.vllm.plugins.module_utils.plan import kinds
from ansible_collections.llmops.vllm.plugins.module_utils.plan import variables


def vllm_unknown_variables(names: list[str], argument_specs: list[dict[str, Any]], ignored: list[str] | None = None) -> list[str]:
    return variables.unknown(list(names or []), variables.known_names(list(argument_specs or [])),
                             list(ignored or []))


def vllm_option_problems(values: dict[str, Any]) -> list[str]:
    return kinds.problems(dict(values or {}))


class FilterModule:
    """Variable name filters."""

    def filters(self):
        return {"vllm_unknown_variables": vllm_unknown_variables, "vllm_option_problems": vllm_option_problems}
