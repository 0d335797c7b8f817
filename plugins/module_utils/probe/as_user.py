# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run a read, or a command, as the service user, not as root.

A module that becomes root to read a model directory would otherwise follow any link the directory's owner put there
(an index naming /etc/shadow as a shard, a config.json linked to a root-only file). The read runs in a forked child
that has taken the service user's uid, gid and groups, so it reaches exactly what vLLM, started as that user, would
reach; its answer comes back as JSON through a pipe.

When the account does not exist yet (the preflight of a fresh host runs before the install role creates it), it can
have replaced nothing, and the read stays with the caller. A caller that is not root reads as itself.

A command (vLLM's client, vLLM's own check, a read of a running server's environment) runs under ``drop_argv``:
setpriv with the account's uid, gid and groups, as systemd's ``User=`` starts the service.
"""

from __future__ import annotations

import json
import os
import pwd
import select
import signal
import time

# A model's config and safetensors headers are read in milliseconds; a read that takes this long is on a hung
# filesystem, and the child is killed rather than the play hanging with it.
READ_DEADLINE_S = 120.0

# The child's answer: a config, an entry list and a manifest of every file; a hub checkpoint's stays under a few MiB.
MAX_ANSWER_BYTES = 256 * 1024 * 1024


class ReadAsUserError(Exception):
    """The read could not be run as the account (not the read's own failure, which the callable raises)."""


def account(name):
    """The passwd entry of ``name``, or None when the host has no such account."""
    try:
        return pwd.getpwnam(name)
    except KeyError:
        return None


def drop_argv(user):
    """(argv prefix, passwd entry) that run a command as ``user``; ([], None) where no drop takes place: no user
    named, the user is root, or the caller is not root (it runs as itself). KeyError when the account does not exist."""
    if not user or user == "root" or os.geteuid() != 0:
        return [], None
    entry = pwd.getpwnam(user)
    return ["setpriv", "--reuid", str(entry.pw_uid), "--regid", str(entry.pw_gid), "--init-groups", "--"], entry


def _become(entry):
    os.initgroups(entry.pw_name, entry.pw_gid)
    os.setgid(entry.pw_gid)
    os.setuid(entry.pw_uid)
    if os.getuid() == 0 or os.geteuid() == 0:  # a setuid that silently kept root is not a drop
        raise ReadAsUserError("could not leave root")


def _child(write_fd, entry, read, args, error_types):
    status = 0
    try:
        _become(entry)
        answer = {"ok": read(*args)}
    except error_types as exc:
        answer = {"error": str(exc)}
    except BaseException as exc:  # pylint: disable=broad-exception-caught  # the parent reports it; the child must not return
        answer = {"crash": "%s: %s" % (type(exc).__name__, exc)}
        status = 1
    try:
        payload = json.dumps(answer).encode("utf-8")
        with os.fdopen(write_fd, "wb") as pipe:
            pipe.write(payload)
    finally:
        os._exit(status)  # never run the module's own exit handlers in the child


def _collect(read_fd, pid, deadline_s):
    chunks, size, end = [], 0, time.monotonic() + deadline_s
    with os.fdopen(read_fd, "rb") as pipe:
        while True:
            left = end - time.monotonic()
            if left <= 0 or not select.select([pipe], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                raise ReadAsUserError("the read took more than %d s (a hung filesystem?)" % deadline_s)
            chunk = os.read(pipe.fileno(), 1 << 20)
            if not chunk:
                break
            size += len(chunk)
            if size > MAX_ANSWER_BYTES:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                raise ReadAsUserError("the read answered more than %d MiB" % (MAX_ANSWER_BYTES >> 20))
            chunks.append(chunk)
    os.waitpid(pid, 0)
    try:
        return json.loads(b"".join(chunks).decode("utf-8"))
    except ValueError:
        raise ReadAsUserError("the reading process ended without an answer")


def read_as(user, read, args=(), error_types=(), deadline_s=READ_DEADLINE_S):
    """``read(*args)``, run as ``user`` when the caller is root and the account exists.

    Returns ``(result, who)``: who names the account that read (the caller's uid when no drop took place). An
    exception of ``error_types`` raised by the read is raised again here, as the first of those types, with its
    message and the account it was read as; anything else the read raises becomes a ReadAsUserError. The result must be JSON-serialisable.
    """
    entry = account(user) if user else None
    if os.geteuid() != 0 or entry is None or entry.pw_uid == 0:
        return read(*args), None
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _child(write_fd, entry, read, args, tuple(error_types) or (Exception,))
    os.close(write_fd)
    answer = _collect(read_fd, pid, deadline_s)
    if "ok" in answer:
        return answer["ok"], entry.pw_name
    if "error" in answer and error_types:
        raise error_types[0]("%s (read as %s)" % (answer["error"], entry.pw_name))
    raise ReadAsUserError(answer.get("crash") or answer.get("error") or "no answer")
