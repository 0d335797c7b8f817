"""The filters that turn each host's vllm_server_result into the fleet report (``module_utils/report/fleet``), the
speed figures a deploy keeps (``module_utils/probe/speed``), the Prometheus targets (``module_utils/report/prometheus``),
the alert rules (``module_utils/report/alerts``) and the dashboard (``module_utils/report/dashboard``)."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.module_utils.report import alerts
from ansible_collections.llmops.vllm.plugins.module_utils.report import dashboard
from ansible_collections.llmops.vllm.plugins.module_utils.report import fleet
from ansible_collections.llmops.vllm.plugins.module_utils.report import prometheus
from ansible_collections.llmops.vllm.plugins.module_utils.report import status
from ansible_collections.llmops.vllm.plugins.module_utils.probe import speed


def _facts(hostvars: Mapping[str, Any], host: str) -> Mapping[str, Any]:
    return hostvars[host] if host in hostvars else {}


def vllm_fleet_report(hosts: list[str], hostvars: Mapping[str, Any]) -> dict[str, Any]:
    results, not_rolled = {}, {}
    for host in hosts:
        facts = _facts(hostvars, host)
        result = facts.get("vllm_server_result")
        results[host] = dict(result) if isinstance(result, Mapping) else None
        if facts.get("vllm_deploy_not_rolled"):
            not_rolled[host] = str(facts["vllm_deploy_not_rolled"])
    # playbooks/deploy.yml notes each host that answered; without any such note an absent result cannot say why.
    reached = {host for host in hosts if _facts(hostvars, host).get("vllm_deploy_reached")}
    report_rows = fleet.rows(hosts, results, reached or None, not_rolled)
    return {"hosts": report_rows, "table": fleet.table(report_rows)}


def vllm_rollout_failed(hosts: list[str], hostvars: Mapping[str, Any]) -> list[str]:
    return [host for host in hosts if _facts(hostvars, host).get("vllm_deploy_failed")]


def vllm_rollout_stopped_by(hosts: list[str], hostvars: Mapping[str, Any], max_fail_percentage: float = 0) -> list[str]:
    return fleet.stopped_by(vllm_rollout_failed(hosts, hostvars), len(hosts), max_fail_percentage)


def vllm_bench_figures(result: Any) -> dict[str, Any]:
    return speed.figures(dict(result) if isinstance(result, Mapping) else None)


def vllm_prometheus_targets(hosts: list[str], hostvars: Mapping[str, Any], previous: Any = None) -> list[dict[str, Any]]:
    servers = []
    for host in hosts:
        facts = _facts(hostvars, host)
        result = facts.get("vllm_server_result")
        result = dict(result) if isinstance(result, Mapping) else {}
        # The drafter by its checkpoint's name: the directory vLLM is given is the collection's render directory.
        drafter = posixpath.basename(str(facts.get("vllm_drafter_dir") or "").rstrip("/")) if result.get("speculative_method") else ""
        servers.append(dict(result, host=host, drafter=drafter))
    targets = prometheus.entries(servers, previous if isinstance(previous, list) else None)
    found = prometheus.problems(targets)
    if found:
        # Never a file Prometheus would refuse: the task fails and the file the fleet had stays as it was.
        raise AnsibleFilterError("the fleet's Prometheus targets would not be a file Prometheus reads, so it was left as "
                                 "it was: %s." % "; ".join(found))
    return targets


def vllm_prometheus_rules(hosts: list[str], hostvars: Mapping[str, Any], settings: Any = None,
                          previous: Any = None) -> dict[str, Any]:
    """The fleet's alert rules (module_utils/report/alerts): each host's gates as its preflight read them
    (vllm_server_gates, with what the compare run of its key measured on its configuration), the acceptance length its
    speed gate measured when this deploy started it."""
    found = alerts.settings_problems(settings)
    if found:
        raise AnsibleFilterError("the alert rules were not written: %s." % "; ".join(found))
    servers = []
    for host in hosts:
        facts = _facts(hostvars, host)
        result = facts.get("vllm_server_result")
        result = dict(result) if isinstance(result, Mapping) else {}
        if not prometheus.serves_metrics(result):
            continue
        gates = facts.get("vllm_server_gates")
        gates = dict(gates) if isinstance(gates, Mapping) else None
        plan = facts.get("vllm_server_plan") if isinstance(facts.get("vllm_server_plan"), Mapping) else {}
        if gates is not None and plan.get("gate_baseline"):
            gates["baseline_tokens_per_second"] = plan["gate_baseline"]   # measured by a compare run
        bench = result.get("bench") if isinstance(result.get("bench"), Mapping) else {}
        measured = bench.get("acceptance_length") if result.get("status") == "ready" and result.get("restarted") else None
        compared = (gates or {}).pop("compare", None)
        servers.append({"host": host, "reached": gates is not None, "gate": gates or {},
                        "speculative_method": (gates or {}).get("speculative_method"),
                        "measured_acceptance_length": measured,
                        "compare": dict(compared) if isinstance(compared, Mapping) else None})
    return alerts.rules(servers, dict(settings or {}), previous if isinstance(previous, Mapping) else None)


def vllm_prometheus_rules_problems(settings: Any) -> list[str]:
    return alerts.settings_problems(settings)


def vllm_grafana_dashboard(settings: Any = None) -> dict[str, Any]:
    """The fleet's Grafana dashboard (module_utils/report/dashboard), for the same settings as the rules."""
    found = alerts.settings_problems(settings)
    if found:
        raise AnsibleFilterError("the dashboard was not written: %s." % "; ".join(found))
    return dashboard.dashboard(dict(settings or {}))


def vllm_status_report(hosts: list[str], hostvars: Mapping[str, Any], doors: Any = None, deploy_report: Any = None,
                       deploy_report_at: Any = None) -> dict[str, Any]:
    """The fleet at a glance (module_utils/report/status): each host's vllm_server_status, where the front doors have it,
    and the last deploy's report."""
    found = {}
    for host in hosts:
        row = _facts(hostvars, host).get("vllm_server_status")
        if isinstance(row, Mapping):
            found[host] = dict(row)
    status_rows = status.rows(hosts, found, dict(doors or {}), deploy_report if isinstance(deploy_report, list) else None,
                              deploy_report_at)
    return {"hosts": status_rows, "table": status.table(status_rows)}


def vllm_prometheus_problems(data: Any) -> list[str]:
    return prometheus.problems(data)


class FilterModule:
    """Deploy report filters."""

    def filters(self):
        return {"vllm_fleet_report": vllm_fleet_report, "vllm_rollout_failed": vllm_rollout_failed,
                "vllm_rollout_stopped_by": vllm_rollout_stopped_by, "vllm_bench_figures": vllm_bench_figures,
                "vllm_prometheus_targets": vllm_prometheus_targets, "vllm_prometheus_problems": vllm_prometheus_problems,
                "vllm_status_report": vllm_status_report, "vllm_prometheus_rules": vllm_prometheus_rules,
                "vllm_prometheus_rules_problems": vllm_prometheus_rules_problems,
                "vllm_grafana_dashboard": vllm_grafana_dashboard}
