# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which vLLM servers a front door lists, and what is wrong with that list, before HAProxy is touched.

A host the deploy could not reach has no fresh address and port, but its server may well be serving: the front
door keeps the line its running configuration has for it (read back from the file this role renders), rather
than take a working server out of traffic because the controller lost its SSH session.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re

from ansible_collections.llmops.vllm.plugins.module_utils.probe import liveness
from ansible_collections.llmops.vllm.plugins.module_utils.plan import kinds
from ansible_collections.llmops.vllm.plugins.module_utils.plan.rollout import HOST_NAME

# The server lines of roles/vllm_frontend/templates/haproxy.cfg.j2: "server NAME ADDRESS:PORT check".
_SECTION = re.compile(r"^(?:backend|frontend|defaults|global|listen)\b\s*(\S*)")
_SERVER = re.compile(r"^\s+server\s+(\S+)\s+(\[[^\]]+\]|[^\s:]+):(\d+)\b")


def configured(text, backend):
    """The servers of ``backend`` in a configuration text: {name: {name, address, port}}."""
    servers, section = {}, None
    for line in (text or "").splitlines():
        head = _SECTION.match(line)
        if head:
            section = head.group(1) if line.startswith("backend") else None
            continue
        match = _SERVER.match(line) if section == backend else None
        if match:
            name, address, port = match.groups()
            servers[name] = {"name": name, "address": address.strip("[]"), "port": int(port)}
    return servers


def servers(group, fresh, current_text, backend):
    """The front door's list, in the group's order: a host's fresh entry, else the running configuration's.

    ``group``: the vLLM hosts' names; ``fresh``: {name, address, port} of each host this deploy reached.
    A host in neither (never reached, never listed) is left out: there is nothing to point at. Without a group,
    the fresh entries as they are.
    """
    # A serving group's other ranks serve no API: its head is the group's one member (module_utils/plan/group).
    headless = set(entry["name"] for entry in fresh if entry.get("headless"))
    fresh = [entry for entry in fresh if not entry.get("headless")]
    if not group:
        return [dict(entry) for entry in fresh]
    group = [name for name in group if name not in headless]
    by_name = {entry["name"]: dict(entry) for entry in fresh}
    kept = configured(current_text, backend)
    return [by_name.get(name) or kept[name] for name in group if name in by_name or name in kept]


def _loopback(address):
    if address.lower() in ("localhost", "localhost.localdomain", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


HEALTH_ONLY = {"method": "GET", "path": "/health", "body": ""}


def health_check(entries, mode="completion"):
    """The request HAProxy's health check sends: the servers' own liveness probe (``check`` of each fresh entry,
    module_utils/probe/liveness), or with ``mode`` ``health`` a GET of /health, which a hung engine still answers.
    None when the servers carry no probe or disagree (problems() says so)."""
    if mode == "health":
        return dict(HEALTH_ONLY)
    checks = [entry["check"] for entry in entries if entry.get("check")]
    if not checks or any(check != checks[0] for check in checks):
        return None
    return {"method": checks[0].get("method", liveness.METHOD), "path": checks[0]["path"], "body": checks[0]["body"]}


def _check_problems(entries, mode):
    if mode == "health" or not entries:
        return []
    checks = {}
    for entry in entries:
        if entry.get("check"):
            checks.setdefault(entry["check"].get("body"), []).append(str(entry.get("name")))
    if not checks:
        return ["vllm_frontend_servers carry no liveness probe (their check): list them from each vLLM host's "
                "vllm_server_backend (playbooks/deploy.yml does), or set vllm_frontend_health_check to health, "
                "which a hung engine passes."]
    if len(checks) > 1:
        return ["The vLLM hosts behind one front door serve different models (%s), and its health check sends one "
                "request to all: give them one served model name (vllm_server_served_model_name)."
                % "; ".join("%s: %s" % (", ".join(names), body) for body, names in checks.items())]
    return []


def key_id(api_key):
    """What a vLLM host tells its front doors of its API key: enough to tell two keys apart, nothing to send."""
    return hashlib.sha256(api_key.encode("utf-8")).hexdigest()[:16] if api_key else ""


def value_problems(values):
    """The front door's own settings against their kinds (module_utils/plan/kinds), by variable name."""
    return kinds.problems(values)


def _key_problems(entries, api_key):
    """One key for all hosts behind a door: it checks one and its health check sends one."""
    keys = {}
    for entry in entries:
        if "key_id" in entry:
            keys.setdefault(entry["key_id"], []).append(str(entry.get("name")))
    if not keys:
        return []
    if len(keys) > 1:
        return ["The vLLM hosts behind one front door have different API keys (%s): the front door checks one key and "
                "its health check sends one, so the others would stay DOWN. Give them one vllm_server_api_key."
                % "; ".join("%s: one key" % ", ".join(names) for names in keys.values())]
    if list(keys)[0] != key_id(api_key or ""):
        return ["vllm_frontend_api_key is not the key of the vLLM hosts behind it (%s): their health checks would fail."
                % ", ".join(list(keys.values())[0])]
    return []


def problems(entries, door, inventory=(), mode="completion", values=None):
    """Sentences naming what to change; ``door`` is the front door's own inventory name, ``inventory`` every host's.

    A loopback address is wrong for another host of the inventory: from the front door it is the front door. (A
    name outside the inventory is a server the caller placed on the front door's machine itself.)"""
    out = []
    for entry in entries:
        missing = [key for key in ("name", "address", "port") if entry.get(key) in (None, "")]
        if missing:
            out.append("vllm_frontend_servers: %s lacks %s; each vLLM host is listed as {name, address, port}."
                       % (entry, ", ".join(missing)))
        elif not isinstance(entry["name"], str) or not HOST_NAME.match(entry["name"]):
            # Given by hand (the front door's role alone): the deploy checks the inventory's names in its first play.
            out.append("vllm_frontend_servers: the server name %r may hold only letters, digits, '-', '_', '.' and ':' "
                       "(HAProxy's characters for a server's name): it is written into haproxy.cfg's server line."
                       % (entry["name"],))
        elif kinds.problem("vllm_server_public_address", entry["address"]) or kinds.problem("vllm_server_port",
                                                                                            entry["port"]):
            # The line each entry makes in haproxy.cfg: a space or newline there would add a server or a directive.
            out.append("vllm_frontend_servers: %s: %s" % (entry["name"], kinds.problem(
                "vllm_server_public_address", entry["address"]) or kinds.problem("vllm_server_port", entry["port"])))
        elif _loopback(str(entry["address"])) and entry["name"] != door and entry["name"] in inventory:
            out.append("The front door %s would reach the vLLM host %s at %s, which from %s is %s itself. Set "
                       "vllm_server_public_address for %s to a name or address the front door reaches (it defaults to "
                       "ansible_host, which is where the controller reaches it)."
                       % (door, entry["name"], entry["address"], door, door, entry["name"]))
    if not entries:
        out.append("vllm_frontend_servers is empty: the front door needs at least one vLLM host behind it.")
    values = values or {}
    metrics = values.get("vllm_frontend_metrics_port")
    if isinstance(metrics, int) and not isinstance(metrics, bool) and metrics and (
            metrics > 65535 or metrics == values.get("vllm_frontend_port")):
        out.append("vllm_frontend_metrics_port %s is not a port of its own (1-65535, not vllm_frontend_port); 0 exposes "
                   "no exporter." % metrics)
    return (value_problems(values) + out + _check_problems(entries, mode)
            + _key_problems(entries, values.get("vllm_frontend_api_key", "")))
