# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One table for the fleet at the end of a deploy: a row per host from the result its server role published.

A host with no result never got that far: unreachable from the start (playbooks/deploy.yml notes the hosts
that answered before any check), or failed before its server role. Its row says which, so the report names every
host of the group, not only those that finished.
"""

from __future__ import annotations

COLUMNS = (("host", "host"), ("status", "status"), ("reason", "reason"), ("version", "vLLM"),
           ("restarted", "restarted"), ("seconds", "s to ready"), ("drained", "drained"),
           ("tokens_per_second", "tok/s"), ("acceptance_length", "accept len"), ("hint", "hint"))


def stopped_by(failed, group_size, max_fail_percentage):
    """The failed hosts once they are more than ``max_fail_percentage`` of the group (the rollout stops), else []."""
    return list(failed) if len(failed) * 100 > float(max_fail_percentage) * group_size else []


def _missing(host, reached, not_rolled):
    """Status and reason of a host without a result; ``reached`` is None where the deploy did not note it."""
    if not_rolled.get(host):
        return "not rolled", not_rolled[host]
    if reached is None:
        return "no result", "unreachable, or failed before its server started"
    if host not in reached:
        return "unreachable", "the controller could not reach it; it was not changed"
    return "no result", "failed before its server started (see its failed task above)"


def rows(hosts, results, reached=None, not_rolled=None):
    """``results``: {host: vllm_server_result or None}; ``reached``: the hosts that answered at the start of the
    deploy, or None; ``not_rolled``: {host: why} for those a stopped rollout left alone. One dict per host, in the
    order given."""
    out = []
    for host in hosts:
        result = results.get(host) or {}
        restarted = bool(result.get("restarted"))
        bench = dict(result.get("bench") or {})
        status, missing_reason = (result.get("status"), "") if result else _missing(host, reached, not_rolled or {})
        out.append({
            "host": host,
            "status": status or "no result",
            "reason": result.get("reason") or missing_reason,
            "version": result.get("version") or "",
            "restarted": restarted,
            "restart_reasons": list(result.get("restart_reasons") or []),
            "rolled_back": bool(result.get("rolled_back")),
            "seconds": float(result.get("elapsed") or 0) if restarted else 0.0,
            "drained": int(result.get("drained") or 0),
            # The speed gate's figures of the server this deploy started (failed ones included), if it measured it.
            "tokens_per_second": bench.get("decode_tokens_per_second"),
            "acceptance_length": bench.get("acceptance_length"),
            "bench": bench,
            "hint": result.get("hint") or "",
            "endpoint": result.get("endpoint") or "",
            "group": _group(result),
        })
    return out


def _group(result):
    """A serving group's rank, as the table names it: "qwen rank 1"; "" for a host serving alone."""
    group = result.get("group") or {}
    return "%s rank %s" % (group["name"], group.get("rank")) if group.get("name") else ""


def _cell(row, key):
    value = row[key]
    if key == "host" and row.get("group"):
        return "%s (%s)" % (value, row["group"])
    if key == "restarted":
        if not value:
            return "no"
        # A server this deploy found failed (a crash loop its start limit ended) says so: nobody else reports it.
        failed = [reason for reason in row["restart_reasons"] if reason.startswith(("was failed", "was in a crash loop"))]
        return ("rolled back" if row["rolled_back"] else "yes") + "".join(", " + reason for reason in failed)
    if key == "seconds":
        return "%.1f" % value if row["restarted"] else "-"
    if key in ("tokens_per_second", "acceptance_length"):
        return "-" if value is None else "%.2f" % value
    if key == "reason" and value == row["status"]:
        return ""
    return str(value)


def table(report_rows):
    """The rows as fixed-width text lines, a header first."""
    keys = [key for key, _title in COLUMNS]
    cells = [[title for _key, title in COLUMNS]] + [[_cell(row, key) for key in keys] for row in report_rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(keys))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in cells]
