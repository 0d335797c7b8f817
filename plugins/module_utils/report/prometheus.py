# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet as a Prometheus file-based service-discovery file: one target group per vLLM server.

The format is Prometheus' ``file_sd_configs`` JSON: a list of ``{"targets": ["host:port"], "labels": {...}}``.
Label names follow Prometheus' rule (``[a-zA-Z_][a-zA-Z0-9_]*``, and ``__`` is reserved), values are strings.
A host that serves what this deploy set (status ``ready``) gets its entry from this run; any other host keeps the
entry the file had for it (a host not reached, or rolled back, still serves what it served), so a deploy never
drops a server from monitoring.
"""

from __future__ import annotations

import re

from ansible_collections.llmops.vllm.plugins.module_utils.probe.http_client import url_host_port

LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
TARGET = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):[0-9]{1,5}$")


def target_of(endpoint):
    """``host:port`` of a server's endpoint URL (an IPv6 address in brackets)."""
    host, port = url_host_port(endpoint)
    return "%s:%d" % ("[%s]" % host if ":" in host else host, port)


def serves_metrics(server):
    """Whether a server's result is one Prometheus scrapes: a serving group's other ranks serve no /metrics, the
    head's target is the group's."""
    return (server.get("group") or {}).get("rank") in (None, 0)


def entries(servers, previous=None):
    """``servers``: [{host, status, endpoint, model, version, speculative_method, drafter}] in the fleet's order;
    ``previous``: the file's current list (or None). Returns the new list."""
    kept = {}
    for entry in previous or []:
        if isinstance(entry, dict) and isinstance(entry.get("labels"), dict) and entry["labels"].get("host"):
            kept[entry["labels"]["host"]] = entry
    out = []
    for server in servers:
        if not serves_metrics(server):
            continue
        if server.get("status") == "ready" and server.get("endpoint"):
            labels = {
                "host": server["host"],
                "model": server.get("model") or "",
                "vllm_version": server.get("version") or "",
                "speculative_method": server.get("speculative_method") or "none",
                "drafter": server.get("drafter") or "",
            }
            # Prometheus reads an empty label as no label: leave it out.
            out.append({"targets": [target_of(server["endpoint"])], "labels": {k: v for k, v in labels.items() if v}})
        elif server["host"] in kept:
            out.append(kept[server["host"]])
    return out


def problems(data):
    """What makes ``data`` not a file Prometheus reads (the checks ``promtool check config`` makes of it)."""
    if not isinstance(data, list):
        return ["the file must hold a list of target groups, got %s" % type(data).__name__]
    found = []
    for index, group in enumerate(data):
        where = "target group %d" % index
        if not isinstance(group, dict) or set(group) - {"targets", "labels"}:
            found.append("%s must be a mapping with only 'targets' and 'labels'" % where)
            continue
        targets = group.get("targets")
        if not isinstance(targets, list) or not all(isinstance(t, str) and TARGET.match(t) for t in targets):
            found.append("%s: targets must be a list of host:port strings, got %r" % (where, targets))
        for name, value in (group.get("labels") or {}).items():
            if not LABEL_NAME.match(str(name)) or str(name).startswith("__"):
                found.append("%s: %r is not a label name Prometheus allows" % (where, name))
            if not isinstance(value, str):
                found.append("%s: label %s must be a string, got %r" % (where, name, value))
    return found
