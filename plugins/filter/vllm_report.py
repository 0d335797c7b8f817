"""The filter that turns each host's vllm_server_result into the fleet report (``module_utils/fleet_report``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.llmops.vllm.plugins.module_utils import fleet_report


def vllm_fleet_report(hosts: list[str], hostvars: Mapping[str, Any]) -> dict[str, Any]:
    results = {}
    for host in hosts:
        result = hostvars[host].get("vllm_server_result") if host in hostvars else None
        results[host] = dict(result) if isinstance(result, Mapping) else None
    report_rows = fleet_report.rows(hosts, results)
    return {"hosts": report_rows, "table": fleet_report.table(report_rows)}


class FilterModule:
    """Deploy report filters."""

    def filters(self):
        return {"vllm_fleet_report": vllm_fleet_report}
