# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""HAProxy's runtime API on its local socket: a server's state, draining it, putting it back.

One command per connection (HAProxy's non-interactive mode answers and closes). ``show stat`` is
CSV whose header names its fields, so the columns are found by name, not position. The clock and
the sleep are injected for the tests.
"""

from __future__ import annotations

import socket
import time

STATES = ("ready", "drain", "maint")


class HaproxyError(Exception):
    """The socket could not be used, or HAProxy refused the command."""


def command(path, line, timeout=5.0, clock=time.monotonic):
    """Send one runtime API command and return HAProxy's answer, all of it within ``timeout`` seconds (a socket
    timeout bounds each read only: an answer that trickles would hold the caller for ever)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    deadline = clock() + timeout
    sock.settimeout(timeout)
    try:
        sock.connect(path)
        sock.sendall(line.encode() + b"\n")
        chunks = []
        while True:
            left = deadline - clock()
            if left <= 0:
                raise socket.timeout("no whole answer within %g s" % timeout)
            sock.settimeout(left)
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    except OSError as e:
        raise HaproxyError("HAProxy runtime socket %s: %s" % (path, e))
    finally:
        sock.close()
    return b"".join(chunks).decode("utf-8", "replace")


def parse_stat(text):
    """``show stat`` CSV as a list of dicts keyed by the header's field names."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or not lines[0].startswith("# "):
        raise HaproxyError("not the output of show stat: %r" % text[:200])
    fields = lines[0][2:].split(",")
    return [dict(zip(fields, line.split(","))) for line in lines[1:]]


def server(path, backend, name, run=command):
    """The ``show stat`` row of one server: its ``status`` (UP, DOWN, DRAIN, MAINT, ...) and ``scur`` (sessions)."""
    for row in parse_stat(run(path, "show stat")):
        if row.get("pxname") == backend and row.get("svname") == name:
            return row
    raise HaproxyError("HAProxy has no server %s/%s" % (backend, name))


# srv_admin_state bits of ``show servers state`` (HAProxy's SRV_ADMF_*): forced maintenance, forced drain.
# ``show stat`` cannot tell: a drained server whose health check fails shows plain DOWN there.
_FORCED_MAINT = 0x01
_FORCED_DRAIN = 0x08


def parse_servers_state(text):
    """``show servers state`` (a version line, a ``# name ...`` header, rows split on spaces) as dicts."""
    lines = [line for line in text.splitlines() if line.strip()]
    header = next((line for line in lines if line.startswith("# ")), None)
    if header is None:
        raise HaproxyError("not the output of show servers state: %r" % text[:200])
    fields = header[2:].split()
    return [dict(zip(fields, line.split())) for line in lines[lines.index(header) + 1:]]


def _admin(row):
    bits = int(row.get("srv_admin_state") or 0)
    return "maint" if bits & _FORCED_MAINT else "drain" if bits & _FORCED_DRAIN else "ready"


def servers(path, backend, run=command):
    """Every server of the backend: {name: {admin: ready | drain | maint, up: its health check has it running}}."""
    return {row["srv_name"]: {"admin": _admin(row), "up": row.get("srv_op_state") == "2"}
            for row in parse_servers_state(run(path, "show servers state %s" % backend)) if row.get("srv_name")}


def admin_state(path, backend, name, run=command):
    """What an operator set: drain, maint, or ready (HAProxy's own health checks decide UP/DOWN under ready)."""
    found = servers(path, backend, run).get(name)
    if found is None:
        raise HaproxyError("HAProxy has no server %s/%s" % (backend, name))
    return found["admin"]


def set_state(path, backend, name, state, run=command):
    if state not in STATES:
        raise HaproxyError("state must be one of %s, got %r" % (", ".join(STATES), state))
    answer = run(path, "set server %s/%s state %s" % (backend, name, state)).strip()
    if answer:
        raise HaproxyError("HAProxy refused 'set server %s/%s state %s': %s" % (backend, name, state, answer))


def wait_idle(path, backend, name, timeout, interval=0.5, clock=time.monotonic, sleep=time.sleep, run=command):
    """Wait until the server has no session left (``scur`` 0); returns (sessions left, most seen, seconds)."""
    start = clock()
    sessions = int(server(path, backend, name, run).get("scur") or 0)
    most = sessions
    while sessions > 0 and clock() - start < timeout:
        sleep(min(interval, max(timeout - (clock() - start), 0)))
        sessions = int(server(path, backend, name, run).get("scur") or 0)
        most = max(most, sessions)
    return sessions, most, round(clock() - start, 3)
