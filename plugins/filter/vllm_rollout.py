"""The roll's decisions for one host (``module_utils/plan/rollout``) and the record of the inputs it started
(``module_utils/probe/inputs``): Jinja renders what these decide."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.filter.vllm_group import serving_groups
from ansible_collections.llmops.vllm.plugins.module_utils.plan import rollout
from ansible_collections.llmops.vllm.plugins.module_utils.probe.inputs import env_file, remember


def _dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def vllm_rollout_plan(status: Any, inputs: Any, history: Any = None, checked: str = "", failed_why: Any = None,
                      previews: Any = (), check_mode: bool = False) -> dict[str, Any]:
    return rollout.plan(_dict(status), _dict(inputs), _dict(history), str(checked or ""), _dict(failed_why),
                        list(previews or []), rollout.flag(check_mode))


def vllm_changed_parts(parts: Any) -> list[str]:
    try:
        return rollout.changed(_dict(parts))
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def vllm_chosen_hosts(value: Any, group: Any, variable: str) -> dict[str, Any]:
    """The hosts an operation names by ``variable``, the others, and what is wrong with the value."""
    return rollout.chosen(value, list(group or []), variable)


def vllm_host_name_problems(hosts: Any, group: str) -> list[str]:
    return rollout.host_name_problems(list(hosts or []), str(group))


def vllm_stage_check(status: Any, inputs: Any, check_mode: bool = False) -> bool:
    return rollout.stage_check(_dict(status), _dict(inputs), rollout.flag(check_mode))


def vllm_stage_restarts(status: Any, inputs: Any, check_mode: bool = False) -> bool:
    return rollout.stage_restarts(_dict(status), _dict(inputs), rollout.flag(check_mode))


def vllm_rollout_batches(hosts: list[str], hostvars: Mapping[str, Any], serial: Any = 1) -> dict[str, Any]:
    restarts = {}
    for host in hosts:
        value = hostvars[host].get("vllm_server_roll_restarts") if host in hostvars else None
        restarts[host] = None if value is None else rollout.flag(value)
    return rollout.batches(list(hosts), restarts, serving_groups(hosts, hostvars), serial)


def vllm_server_result(outcome: Any, decision: Any, facts: Any, failure: Any = None) -> dict[str, Any]:
    return rollout.result(_dict(outcome), _dict(decision), _dict(facts), _dict(failure) or None)


def vllm_failure_message(failure: Any, service: str, venv: str, restored: Any = (), refused: bool = False,
                         rollback_wait: Any = None) -> str:
    return rollout.failure_message(_dict(failure), str(service), str(venv), [str(p) for p in restored or []],
                                   rollout.flag(refused), _dict(rollback_wait))


def vllm_inputs_history(history: Any, inputs: Any) -> dict[str, Any]:
    current = _dict(inputs)
    return remember(_dict(history), {"digest": current.get("digest", ""), "parts": _dict(current.get("parts"))})


def vllm_inputs_env(digest: str) -> str:
    return env_file(str(digest))


class FilterModule:
    """Rollout filters."""

    def filters(self):
        return {"vllm_rollout_plan": vllm_rollout_plan, "vllm_stage_check": vllm_stage_check,
                "vllm_stage_restarts": vllm_stage_restarts, "vllm_rollout_batches": vllm_rollout_batches,
                "vllm_server_result": vllm_server_result, "vllm_failure_message": vllm_failure_message,
                "vllm_inputs_history": vllm_inputs_history, "vllm_inputs_env": vllm_inputs_env,
                "vllm_chosen_hosts": vllm_chosen_hosts, "vllm_changed_parts": vllm_changed_parts,
                "vllm_host_name_problems": vllm_host_name_problems}
