# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet at a glance (playbooks/status.yml): one row per host of the group from what each host said
(module_utils/probe/host_state), where each front door has it, and what the last deploy's report on the controller said.
A host that did not answer still has its row, named as such.
"""

from __future__ import annotations

import datetime

COLUMNS = (("host", "host"), ("state", "state"), ("version", "vllm"), ("model", "model"), ("speculation", "speculation"),
           ("pid", "pid"), ("uptime", "up"), ("restarts", "restarts"), ("watchdog", "watchdog"), ("liveness", "answers"),
           ("front_door", "front door"), ("last_deploy", "last deploy"), ("rollback", "rollback to"))


def _when(stamp):
    if stamp is None:
        return ""
    return datetime.datetime.fromtimestamp(float(stamp), datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _duration(seconds):
    if seconds is None:
        return ""
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return "%dd%02dh" % (days, hours)
    if hours:
        return "%dh%02dm" % (hours, minutes)
    return "%dm%02ds" % (minutes, secs)


def door_state(host, doors):
    """``doors``: {front door host: {server name: {admin, operational}}}. In words: 'in' (ready and up), 'drained',
    'down' (ready, failing its health check), 'maint', 'not in' (no front door has it), '' (no front door)."""
    if not doors:
        return ""
    states = []
    for door in sorted(doors):
        server = (doors[door] or {}).get(host)
        if not server:
            continue
        admin = server.get("admin", "ready")
        states.append(admin if admin != "ready" else ("in" if server.get("up") else "down"))
    return ",".join(sorted(set(states))) if states else "not in"


def rows(hosts, found, doors=None, deploy_report=None, deploy_report_at=None):
    """``found``: {host: the vllm_status module's row}, for the hosts that answered. ``deploy_report``: the list the
    deploy wrote (vllm-deploy-report.json), or None."""
    last = {r.get("host"): r for r in deploy_report or [] if isinstance(r, dict)}
    out = []
    for host in hosts:
        row = dict(found.get(host) or {})
        answered = bool(row)
        report = last.get(host)
        speculation = ""
        if row.get("speculative_method"):
            speculation = "%s K=%s" % (row["speculative_method"], row.get("num_speculative_tokens"))
        out.append({
            "host": host,
            "answered": answered,
            "state": (row.get("state") if row.get("installed", True) else "not installed") if answered else "unreachable",
            "version": row.get("version", ""),
            "package": row.get("package", ""),
            "venv": row.get("venv", ""),
            "model": row.get("served_model_name") or row.get("model", ""),
            "speculative_method": row.get("speculative_method", ""),
            "drafter": row.get("drafter", ""),
            "num_speculative_tokens": row.get("num_speculative_tokens"),
            "speculation": speculation or ("none" if row.get("pid") else ""),
            "pid": row.get("pid") or None,
            "uptime_seconds": row.get("uptime"),
            "restarts": row.get("restarts"),
            "watchdog": row.get("watchdog", ""),
            "liveness": row.get("liveness", ""),
            "front_door": door_state(host, doors or {}),
            "last_deploy_status": (report or {}).get("status", ""),
            "last_deploy_reason": (report or {}).get("reason", ""),
            "last_deploy_at": deploy_report_at if report else None,
            "last_good_at": row.get("last_good_at"),
            "rollback_target_at": row.get("rollback_target_at"),
        })
    return out


def _cell(row, key):
    if key == "uptime":
        return _duration(row["uptime_seconds"])
    if key == "last_deploy":
        if not row["last_deploy_status"]:
            return ""
        reason = row["last_deploy_reason"]
        return "%s%s %s" % (row["last_deploy_status"], " (%s)" % reason if reason and reason != row["last_deploy_status"] else "",
                            _when(row["last_deploy_at"]))
    if key == "rollback":
        return _when(row["rollback_target_at"]) or "-"
    value = row.get(key)
    return "" if value is None else str(value)


def table(status_rows):
    """The rows as fixed-width text lines, a header first."""
    keys = [key for key, _title in COLUMNS]
    cells = [[title for _key, title in COLUMNS]] + [[_cell(row, key) for key in keys] for row in status_rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(keys))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in cells]
