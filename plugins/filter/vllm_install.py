"""The filter that asks ``module_utils/plan/install`` what is wrong with the install settings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.module_utils.plan import install


def vllm_install_problems(settings: Mapping[str, Any], reads: Mapping[str, Any] | None = None) -> list[str]:
    if not isinstance(settings, Mapping):
        raise AnsibleFilterError(f"vllm_install_problems expects a mapping of settings, got {type(settings).__name__}")
    return install.problems(dict(settings), dict(reads or {}))


class FilterModule:
    """vLLM install filters."""

    def filters(self):
        return {"vllm_install_problems": vllm_install_problems}
