"""The filters that ask ``module_utils/plan/frontend`` which servers a front door lists, what its health check
sends, and what is wrong."""

from __future__ import annotations

from typing import Any

from ansible_collections.llmops.vllm.plugins.module_utils.plan import frontend


def vllm_frontend_servers(group: list[str], fresh: list[dict[str, Any]], current: str = "",
                          backend: str = "vllm") -> list[dict[str, Any]]:
    return frontend.servers(list(group), [dict(entry) for entry in fresh or []], current or "", backend)


def vllm_frontend_problems(entries: list[dict[str, Any]], door: str, inventory: list[str] | None = None,
                           mode: str = "completion", values: dict[str, Any] | None = None) -> list[str]:
    return frontend.problems([dict(entry) for entry in entries or []], door, list(inventory or []), mode,
                             dict(values or {}))


def vllm_frontend_check(entries: list[dict[str, Any]], mode: str = "completion") -> dict[str, str] | None:
    return frontend.health_check([dict(entry) for entry in entries or []], mode)


def vllm_api_key_id(api_key: str) -> str:
    return frontend.key_id(api_key or "")


class FilterModule:
    """Front door filters."""

    def filters(self):
        return {"vllm_frontend_servers": vllm_frontend_servers, "vllm_frontend_problems": vllm_frontend_problems,
                "vllm_frontend_check": vllm_frontend_check, "vllm_api_key_id": vllm_api_key_id}
