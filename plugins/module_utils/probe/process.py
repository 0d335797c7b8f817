# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Is the watched server still there, and does it own its port?

Two watchers answer the first question with the same ``ProcState``: ``PidWatch``
reads /proc/<pid>/stat (a zombie is dead, a recycled pid is dead), ``UnitWatch``
reads ``systemctl show`` through an injectable runner and treats any restart
since the wait began as a failure (a crash loop under Restart= looks alive
between its deaths). ``port_owner`` answers the second from /proc/net/tcp{,6}
and /proc/<pid>/fd: vLLM binds with SO_REUSEPORT, so an old server can answer
/health on the new server's port.
"""

from __future__ import annotations

import os
import signal
from collections import namedtuple

from ansible_collections.llmops.vllm.plugins.module_utils.log import vocabulary

ProcState = namedtuple("ProcState", "alive pid exit_code exit_detail restarts started_at note")
Listener = namedtuple("Listener", "kind pids detail")  # kind: ours | foreign | none | unknown

_CLD_EXITED, _CLD_KILLED, _CLD_DUMPED = 1, 2, 3
UNIT_PROPERTIES = ("MainPID", "ActiveState", "SubState", "NRestarts", "ExecMainStatus", "ExecMainCode", "Result",
                   "ExecMainStartTimestampMonotonic", "LoadState")


def _signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return "signal %d" % number


def describe_wait_status(status):
    """Word a waitpid() status: 'exit code 1' or 'killed by signal 9 (SIGKILL)'."""
    if status & 0x7F == 0:
        return (status >> 8) & 0xFF, "exit code %d" % ((status >> 8) & 0xFF)
    sig = status & 0x7F
    return None, "killed by signal %d (%s)" % (sig, _signal_name(sig))


def read_stat(pid, proc="/proc"):
    """Fields of /proc/<pid>/stat after the command name, or None when the pid is gone.

    Index 0 is the state letter, 1 the ppid, 19 the start time (clock ticks after
    boot) and 49 the exit status of a zombie (Linux 3.5+).
    """
    try:
        with open("%s/%d/stat" % (proc, pid), "rb") as fh:
            text = fh.read().decode("ascii", "replace")
    except (OSError, IOError):
        return None
    return text[text.rfind(")") + 2:].split()


def process_tree(root, proc="/proc"):
    """The pid and all its descendants, from the ppid of every process in /proc."""
    children = {}
    try:
        names = os.listdir(proc)
    except OSError:
        return set([root])
    for name in names:
        if not name.isdigit():
            continue
        fields = read_stat(int(name), proc)
        if fields and len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(name))
    tree, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in tree:
            tree.add(pid)
            todo.extend(children.get(pid, ()))
    return tree


class PidWatch(object):
    """Follow one pid. Its exit code is known only while it is a zombie (it is not our child)."""

    def __init__(self, pid, proc="/proc", start_ticks=None):
        self.pid = pid
        self.proc = proc
        self.start_ticks = start_ticks
        self._hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    def baseline(self):
        return "pid=%d:%s" % (self.pid, self.start_ticks if self.start_ticks is not None else "-")

    def poll(self):
        fields = read_stat(self.pid, self.proc)
        if fields is None:
            return self._dead(None, "exit code unknown (not a child of this process)", "pid %d is gone" % self.pid)
        ticks = int(fields[19])
        if self.start_ticks is None:
            self.start_ticks = ticks
        elif ticks != self.start_ticks:
            return self._dead(None, "exit code unknown", "pid %d now belongs to another process" % self.pid)
        started = float(ticks) / self._hz
        if fields[0] in ("Z", "X"):
            code, words = None, "exit code unknown"
            if len(fields) > 49:
                code, words = describe_wait_status(int(fields[49]))
            return ProcState(False, self.pid, code, words, 0, started, "pid %d has exited" % self.pid)
        return ProcState(True, self.pid, None, "", 0, started, "")

    def tree(self):
        return process_tree(self.pid, self.proc)

    def _dead(self, code, words, note):
        return ProcState(False, self.pid, code, words, 0, None, note)


def parse_show(text):
    """``Key=Value`` lines of ``systemctl show`` into a dict."""
    props = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            props[key.strip()] = value.strip()
    return props


def as_int(value, default=0):
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


# What systemctl runs with for output a module parses: no pager, C locale.
SYSTEMCTL_ENV = {"SYSTEMD_PAGER": "", "LC_ALL": "C"}


def unit_main_pid(unit, runner):
    """The unit's MainPID, 0 when it is not running (or systemctl cannot say). runner(argv) -> (rc, stdout, stderr)."""
    rc, out, _err = runner(["systemctl", "show", "--no-pager", "-p", "MainPID", "--value", "--", unit])
    out = (out or "").strip()
    return int(out) if rc == 0 and out.isdigit() else 0


class UnitWatch(object):
    """Follow a systemd unit; any restart since the wait began (or an earlier call's baseline) is a failure."""

    def __init__(self, unit, runner, proc="/proc", main_pid=None, restarts=None):
        self.unit = unit
        self.runner = runner  # runner(argv) -> (rc, stdout, stderr)
        self.proc = proc
        self.main_pid = main_pid or None
        self.base_restarts = restarts
        self.pid = None
        # (name, reason) when the unit's last process failed in systemd's own set-up, before exec (its status is
        # one of systemd's, module_utils/log/vocabulary): such a start prints nothing to the log.
        self.pre_exec = None

    def baseline(self):
        return "unit=%s:%s" % (self.main_pid or 0, self.base_restarts if self.base_restarts is not None else "-")

    def show(self):
        argv = ["systemctl", "show", "--no-pager", "-p", ",".join(UNIT_PROPERTIES), "--", self.unit]
        rc, out, err = self.runner(argv)
        if rc != 0:
            raise RuntimeError("systemctl show %s failed (rc %s): %s" % (self.unit, rc, (err or out).strip()))
        return parse_show(out)

    def poll(self):
        props = self.show()
        if props.get("LoadState") == "not-found":
            return ProcState(False, None, None, "", 0, None, "unit %s is not found" % self.unit)
        main = as_int(props.get("MainPID"))
        count = as_int(props.get("NRestarts"))
        if self.base_restarts is None:
            self.base_restarts = count
        if not self.main_pid and main:
            self.main_pid = main
        self.pid = main or self.main_pid
        restarts = max(0, count - self.base_restarts)
        active, sub = props.get("ActiveState", ""), props.get("SubState", "")
        started_us = as_int(props.get("ExecMainStartTimestampMonotonic"))
        started = started_us / 1e6 if started_us else None
        code, words = self._exit(props)
        note = ""
        if sub == "auto-restart":
            note = "unit %s is waiting to restart after a crash (Restart=)" % self.unit
        elif restarts:
            note = "unit %s restarted %d time(s) since the wait began" % (self.unit, restarts)
        elif self.main_pid and main and main != self.main_pid:
            note = "unit %s has a new main process (%d, was %d): it restarted" % (self.unit, main, self.main_pid)
        elif active in ("failed", "inactive", "deactivating"):
            note = "unit %s is %s (%s)" % (self.unit, active, props.get("Result", "?"))
        elif active == "active" and not main:
            note = "unit %s has no main process" % self.unit
        if note:
            return ProcState(False, self.pid, code, words, restarts, started, note)
        return ProcState(True, self.pid, None, "", restarts, started, "")

    def tree(self):
        return process_tree(self.pid, self.proc) if self.pid else set()

    def _exit(self, props):
        how, status = as_int(props.get("ExecMainCode")), as_int(props.get("ExecMainStatus"))
        if how == _CLD_EXITED:
            self.pre_exec = vocabulary.systemd_exit(status) if status else None
            if self.pre_exec:
                return status, "exit code %d (%d/%s: systemd failed to set up the unit before running it)" % (
                    status, status, self.pre_exec[0])
            return status, "exit code %d" % status
        if how in (_CLD_KILLED, _CLD_DUMPED):
            verb = "killed by" if how == _CLD_KILLED else "dumped core on"
            return None, "%s signal %d (%s)" % (verb, status, _signal_name(status))
        return None, "exit code unknown"


def listening_sockets(port, proc="/proc"):
    """{inode: uid} of LISTEN TCP sockets on ``port`` (IPv4 and IPv6); None when unreadable."""
    found, readable = {}, False
    for table in ("tcp", "tcp6"):
        try:
            with open("%s/net/%s" % (proc, table)) as fh:
                lines = fh.read().splitlines()[1:]
        except (OSError, IOError):
            continue
        readable = True
        for line in lines:
            cols = line.split()
            if len(cols) < 10 or cols[3] != "0A":
                continue
            if int(cols[1].rsplit(":", 1)[1], 16) == port:
                found[int(cols[9])] = int(cols[7])
    return found if readable else None


def socket_holders(inodes, pids, proc="/proc"):
    """{pid: inodes} for the given pids whose open files include one of the socket inodes."""
    wanted = dict(("socket:[%d]" % ino, ino) for ino in inodes)
    held = {}
    for pid in pids:
        fd_dir = "%s/%d/fd" % (proc, pid)
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink("%s/%s" % (fd_dir, fd))
            except OSError:
                continue
            if target in wanted:
                held.setdefault(pid, set()).add(wanted[target])
    return held


def _all_pids(proc):
    try:
        return [int(n) for n in os.listdir(proc) if n.isdigit()]
    except OSError:
        return []


def _comm(pid, proc):
    try:
        with open("%s/%d/comm" % (proc, pid)) as fh:
            return fh.read().strip()
    except (OSError, IOError):
        return "?"


def _uid(pid, proc):
    try:
        return os.stat("%s/%d" % (proc, pid)).st_uid
    except OSError:
        return None


def port_owner(port, tree, proc="/proc", root=None):
    """Who listens on ``port``: our process tree, someone else, nobody, or cannot tell.

    A listener held by another process makes the port ``foreign`` even when ours
    shares it (SO_REUSEPORT spreads connections over both). A listener no
    readable process holds counts as foreign when its uid is not the uid of
    ``root`` (the watched process; default: the lowest pid of the tree).
    """
    sockets = listening_sockets(port, proc)
    if sockets is None:
        return Listener("unknown", [], "cannot read %s/net/tcp" % proc)
    if not sockets:
        return Listener("none", [], "nothing listens on port %d" % port)
    ours = socket_holders(sockets, sorted(tree), proc)
    ours_inodes = set().union(*ours.values()) if ours else set()
    others = set(sockets) - ours_inodes
    if not others:
        return Listener("ours", sorted(ours), "port %d is held by pid %s" % (port, ", ".join(map(str, sorted(ours)))))
    foreign = socket_holders(others, [p for p in _all_pids(proc) if p not in tree], proc)
    if foreign:
        who = ", ".join("%d (%s)" % (pid, _comm(pid, proc)) for pid in sorted(foreign))
        return Listener("foreign", sorted(foreign), "port %d is held by pid %s, not by the watched process" % (port, who))
    tree_uid = _uid(root or min(tree), proc) if tree else None
    strangers = sorted(set(sockets[ino] for ino in others if sockets[ino] != tree_uid))
    if tree_uid is not None and strangers:
        return Listener("foreign", [], "port %d is held by a process of uid %s, not by the watched process"
                        % (port, ", ".join(map(str, strangers))))
    return Listener("unknown", sorted(ours), "cannot tell which process holds port %d" % port)


def service_port_owner(port, main_pid, service_uid, proc="/proc"):
    """Who holds ``port`` before a service (re)starts on it, by the same rules as ``port_owner``.

    ``main_pid`` is the service's running MainPID (0 or None when it is not running); its process tree is
    the service. A listener no readable process holds (root may not read another user's /proc/PID/fd, as in
    containers) belongs to the service when its socket's uid is the service account's, ``service_uid``.
    """
    tree = process_tree(main_pid, proc) if main_pid else set()
    owner = port_owner(port, tree, proc, root=main_pid or None)
    if owner.kind != "unknown":
        return owner
    sockets = listening_sockets(port, proc)
    if sockets is None:
        return owner
    uids = sorted(set(sockets.values()))
    if service_uid is not None and uids == [service_uid]:
        return Listener("ours", owner.pids, "port %d is held by a socket of the service account (uid %d)" % (port, service_uid))
    return Listener("foreign", [], "port %d is held by a process of uid %s, not by the service"
                    % (port, ", ".join(str(u) for u in uids if u != service_uid)))
