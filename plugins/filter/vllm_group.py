"""A serving group: one model over several hosts (``module_utils/plan/group``). Each host publishes what it brings
(``vllm_group_member``), then each reads the others' and adds its rank's words to its own plan (``vllm_group_plan``);
Jinja renders what these decide."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.llmops.vllm.plugins.module_utils.plan import group
from ansible_collections.llmops.vllm.plugins.module_utils.plan.serve import parallel_sizes

# `ip -o addr show dev IF`: "2: eth0    inet 172.18.0.2/16 brd ..." and "inet6 fe80::1/64 ...".
_ADDRESS = re.compile(r"\binet6?\s+([0-9A-Fa-f:.]+)/")


def _dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _interface_addresses(read: Any) -> Any:
    """The addresses on the interface, False when the host has no such interface, None when it was not read."""
    read = _dict(read)
    if not read or read.get("skipped"):
        return None
    if read.get("rc", 1) != 0:
        return False
    return _ADDRESS.findall(str(read.get("stdout", "")))


def _model_reads(results: Any) -> dict[str, Any]:
    """{which: fingerprint} from the preflight's registered reads of the models (their loop item names which)."""
    out = {}
    for result in results or []:
        result = _dict(result)
        which = _dict(result.get("item")).get("which")
        if which and not result.get("skipped"):
            out[which] = group.fingerprint(result)
    return out


def vllm_group_member(fields: Any, settings: Any, plan: Any, model_reads: Any = (), interface_read: Any = None) -> dict[str, Any]:
    """What this host brings to its group: ``fields`` (host, rank, address, interface, port, api_host, api_address,
    backend, master_port, package, version), its serve settings and plan, the reads of its models and interface."""
    fields, settings, plan = _dict(fields), _dict(settings), _dict(plan)
    models = _model_reads(model_reads)
    tp, pp = parallel_sizes(settings)
    return dict(fields, model=settings.get("model"), model_digest=models.get("target"),
                drafter_digest=models.get("drafter"), command=group.shared_words(plan.get("argv")),
                tensor_parallel_size=tp, pipeline_parallel_size=pp,
                interface_addresses=_interface_addresses(interface_read))


def _members(hosts: Any, hostvars: Any) -> dict[str, Any]:
    members = {}
    for other in hosts or []:
        if other in hostvars and "vllm_server_serving_group_member" in hostvars[other]:
            members[str(other)] = _dict(hostvars[other]["vllm_server_serving_group_member"])
    return members


def vllm_group_head(hosts: Any, hostvars: Any) -> dict[str, Any]:
    """The record the group's head published ({} when its ranks are wrong, or it has not published one)."""
    members = _members(hosts, hostvars)
    given = dict((h, m.get("rank")) for h, m in members.items())
    names = [str(h) for h in hosts or []]
    head = next((h for h in names if group.rank_of(h, names, given) == 0), None)
    return members.get(head, {}) if head else {}


def _reached(read: Any) -> Any:
    """What this rank's try of the head's master port says: None when not tried, else "open", "refused" or
    "unreachable: why"."""
    read = _dict(read)
    if not read or read.get("skipped"):
        return None
    return str(read.get("stdout") or read.get("msg") or "unreachable: no answer").strip()


def vllm_group_plan(plan: Any, name: str, hosts: Any, hostvars: Any, host: str, master_read: Any = None) -> dict[str, Any]:
    """This host's plan with its rank's words and the group's problems added, and the group under ``group``;
    master_read: this rank's try of the head's master port (the preflight's), None where not tried."""
    plan = _dict(plan)
    members = _members(hosts, hostvars)
    found = group.plan_for(str(host), str(name), [str(h) for h in hosts or []], members, _reached(master_read))
    return dict(plan, argv=list(plan.get("argv") or []) + found["words"],
                problems=list(plan.get("problems") or []) + found["problems"], group=found)


def vllm_group_rank(host: str, hosts: Any, hostvars: Any) -> Any:
    """This host's rank from the inventory alone (each host's vllm_server_serving_group_rank, or the inventory's order):
    None when the group's ranks are wrong, which the preflight names."""
    given = {}
    for other in hosts or []:
        given[str(other)] = hostvars[other].get("vllm_server_serving_group_rank") if other in hostvars else None
    return group.rank_of(str(host), [str(h) for h in hosts or []], given)


def _others(hosts: Any, hostvars: Any, host: str, fact: str) -> dict[str, Any]:
    out = {}
    for other in hosts or []:
        if other != host and other in hostvars:
            value = hostvars[other].get(fact)
            out[str(other)] = _dict(value) if isinstance(value, Mapping) else None
    return out


def vllm_group_rollout(decision: Any, hosts: Any, hostvars: Any, host: str) -> dict[str, Any]:
    """This rank's start decision, made the group's: one rank starting again starts every rank."""
    return group.start_together(_dict(decision), _others(hosts, hostvars, host, "_vllm_server_rollout"))


def vllm_group_failures(hosts: Any, hostvars: Any, host: str) -> list[str]:
    """The other ranks that did not come up in this start, each with its own log's reason."""
    return group.failures(_others(hosts, hostvars, host, "_vllm_server_wait"))


def vllm_group_wait(hosts: Any, hostvars: Any, active: Any, done: Any, rounds: Any) -> dict[str, Any]:
    """Where the group's start stands after ``done`` rounds of ``rounds``: every rank's last slice of vllm_wait (each
    host's _vllm_server_wait), the ranks still in the run ``active`` (ansible_play_hosts)."""
    waits = dict((str(h), _dict(hostvars[h].get("_vllm_server_wait")) if h in hostvars else None) for h in hosts or [])
    return group.wait_round(waits, [str(h) for h in active or []], int(done), int(rounds))


def serving_groups(hosts: Any, hostvars: Any) -> dict[str, str]:
    """{host: the serving group it names, or ""} for ``hosts`` (a host hostvars does not know: "")."""
    return dict((str(host), str(hostvars[host].get("vllm_server_serving_group") or "") if host in hostvars else "")
                for host in hosts or [])


def vllm_group_hosts(hosts: Any, hostvars: Any, name: str) -> list[str]:
    """The hosts of ``hosts`` that name the serving group ``name``, in their order ([] without a name)."""
    return [host for host, named in serving_groups(hosts, hostvars).items() if name and named == name]


def vllm_group_split(chosen: Any, hosts: Any, hostvars: Any, one_at_a_time: bool = False) -> list[str]:
    """Why an operation on ``chosen`` hosts would split a serving group of ``hosts``, one sentence per group."""
    return group.split_groups([str(h) for h in chosen or []], serving_groups(hosts, hostvars), bool(one_at_a_time))


class FilterModule:
    """Serving group filters."""

    def filters(self):
        return {"vllm_group_member": vllm_group_member, "vllm_group_plan": vllm_group_plan,
                "vllm_group_rank": vllm_group_rank, "vllm_group_rollout": vllm_group_rollout,
                "vllm_group_failures": vllm_group_failures, "vllm_group_wait": vllm_group_wait,
                "vllm_group_split": vllm_group_split,
                "vllm_group_head": vllm_group_head, "vllm_group_hosts": vllm_group_hosts}
