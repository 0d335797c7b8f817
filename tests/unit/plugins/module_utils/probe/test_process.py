from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.probe.process import (
    PidWatch,
    UnitWatch,
    describe_wait_status,
    listening_sockets,
    port_owner,
    service_port_owner,
    process_tree,
)

TCP_HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"


class FakeProc(object):
    """A /proc look-alike: stat files, fd links and net/tcp tables."""

    def __init__(self, root):
        self.root = root
        (root / "net").mkdir(parents=True)
        (root / "net" / "tcp").write_text(TCP_HEADER)
        (root / "net" / "tcp6").write_text(TCP_HEADER)

    def process(self, pid, ppid=1, state="S", start=1000, exit_status=0, comm="python3"):
        d = self.root / str(pid)
        (d / "fd").mkdir(parents=True, exist_ok=True)
        tail = ["0"] * 50
        tail[0], tail[1], tail[19], tail[49] = state, str(ppid), str(start), str(exit_status)
        (d / "stat").write_text("%d (%s) %s\n" % (pid, comm, " ".join(tail)))
        (d / "comm").write_text(comm + "\n")
        return d

    def socket(self, pid, fd, inode):
        os.symlink("socket:[%d]" % inode, str(self.root / str(pid) / "fd" / str(fd)))

    def listen(self, port, inode, uid=0, table="tcp", state="0A"):
        with open(self.root / "net" / table, "a") as fh:
            fh.write("   0: 00000000:%04X 00000000:0000 %s 00000000:00000000 00:00000000 00000000 %5d 0 %d 1\n"
                     % (port, state, uid, inode))


@pytest.fixture
def proc(tmp_path):
    return FakeProc(tmp_path / "proc")


def test_pid_alive_then_zombie_with_exit_code(proc):
    proc.process(100, start=5000)
    watch = PidWatch(100, proc=str(proc.root))
    state = watch.poll()
    assert state.alive and state.pid == 100
    assert state.started_at == pytest.approx(5000.0 / os.sysconf("SC_CLK_TCK"))
    proc.process(100, state="Z", start=5000, exit_status=1 << 8)
    state = watch.poll()
    assert not state.alive
    assert (state.exit_code, state.exit_detail) == (1, "exit code 1")


def test_pid_gone_and_pid_reused(proc):
    proc.process(100, start=5000)
    watch = PidWatch(100, proc=str(proc.root))
    assert watch.poll().alive
    proc.process(100, start=7000)  # same number, another process
    state = watch.poll()
    assert not state.alive and "another process" in state.note
    assert not PidWatch(999, proc=str(proc.root)).poll().alive


def test_pid_baseline_from_an_earlier_call(proc):
    proc.process(100, start=7000)
    assert not PidWatch(100, proc=str(proc.root), start_ticks=5000).poll().alive
    assert PidWatch(100, proc=str(proc.root), start_ticks=7000).baseline() == "pid=100:7000"


def test_describe_wait_status():
    assert describe_wait_status(0) == (0, "exit code 0")
    assert describe_wait_status(2 << 8) == (2, "exit code 2")
    assert describe_wait_status(9) == (None, "killed by signal 9 (SIGKILL)")


def test_process_tree(proc):
    proc.process(10, ppid=1)
    proc.process(11, ppid=10)
    proc.process(12, ppid=11)
    proc.process(20, ppid=1)
    assert process_tree(10, str(proc.root)) == {10, 11, 12}


def show(**props):
    base = {"LoadState": "loaded", "ActiveState": "active", "SubState": "running", "MainPID": "4242",
            "NRestarts": "0", "ExecMainCode": "0", "ExecMainStatus": "0", "Result": "success",
            "ExecMainStartTimestampMonotonic": "123456789"}
    base.update(props)
    return "".join("%s=%s\n" % kv for kv in base.items())


class Runner(object):
    def __init__(self, *outputs):
        self.outputs = list(outputs)
        self.calls = []

    def __call__(self, argv):
        self.calls.append(argv)
        return 0, self.outputs.pop(0) if len(self.outputs) > 1 else self.outputs[0], ""


def test_unit_running():
    runner = Runner(show())
    state = UnitWatch("vllm", runner).poll()
    assert state.alive and state.pid == 4242 and state.restarts == 0
    assert state.started_at == pytest.approx(123.456789)
    assert runner.calls[0][:3] == ["systemctl", "show", "--no-pager"]
    assert "MainPID,ActiveState,SubState,NRestarts" in runner.calls[0][4]


@pytest.mark.parametrize("later, note", [
    (show(ActiveState="activating", SubState="auto-restart", MainPID="0", ExecMainCode="1", ExecMainStatus="1"),
     "waiting to restart"),
    (show(NRestarts="1", MainPID="5000"), "restarted 1 time"),
    (show(MainPID="5000"), "new main process"),
    (show(ActiveState="failed", SubState="failed", MainPID="0", ExecMainCode="1", ExecMainStatus="1",
          Result="exit-code"), "is failed (exit-code)"),
    (show(ActiveState="inactive", SubState="dead", MainPID="0", ExecMainCode="1", ExecMainStatus="0"), "inactive"),
])
def test_unit_failures(later, note):
    watch = UnitWatch("vllm", Runner(show(), later))
    assert watch.poll().alive
    state = watch.poll()
    assert not state.alive
    assert note in state.note


def test_unit_exit_details():
    watch = UnitWatch("vllm", Runner(show(ActiveState="failed", MainPID="0", ExecMainCode="2", ExecMainStatus="9")))
    state = watch.poll()
    assert (state.exit_code, state.exit_detail) == (None, "killed by signal 9 (SIGKILL)")
    watch = UnitWatch("vllm", Runner(show(ActiveState="failed", MainPID="0", ExecMainCode="1", ExecMainStatus="1")))
    assert watch.poll().exit_detail == "exit code 1"


def test_unit_restart_between_calls_is_caught_from_the_baseline():
    watch = UnitWatch("vllm", Runner(show(MainPID="5000", NRestarts="3")), main_pid=4242, restarts=2)
    state = watch.poll()
    assert not state.alive and state.restarts == 1
    assert UnitWatch("vllm", Runner(show()), main_pid=4242, restarts=0).baseline() == "unit=4242:0"


def test_unit_not_found_and_systemctl_failure():
    assert "not found" in UnitWatch("nope", Runner(show(LoadState="not-found", MainPID="0"))).poll().note
    with pytest.raises(RuntimeError):
        UnitWatch("vllm", lambda argv: (1, "", "Failed to connect to bus")).poll()


def test_listening_sockets_reads_both_tables(proc):
    proc.listen(8000, 111, uid=1000)
    proc.listen(8000, 222, table="tcp6")
    proc.listen(8000, 333, state="01")      # established, not a listener
    proc.listen(9000, 444)
    assert listening_sockets(8000, str(proc.root)) == {111: 1000, 222: 0}
    assert listening_sockets(8000, "/nonexistent") is None


def test_port_owner_kinds(proc):
    proc.process(10)
    proc.process(11, ppid=10)
    proc.process(50, comm="old-vllm")
    root = str(proc.root)
    assert port_owner(8000, {10, 11}, root).kind == "none"
    proc.listen(8000, 111)
    proc.socket(11, 5, 111)
    assert port_owner(8000, {10, 11}, root).kind == "ours"
    proc.listen(8000, 222, table="tcp6")   # an old server sharing the port (SO_REUSEPORT)
    proc.socket(50, 7, 222)
    owner = port_owner(8000, {10, 11}, root)
    assert owner.kind == "foreign" and owner.pids == [50]
    assert "50 (old-vllm)" in owner.detail


def test_port_owner_unreadable_holder(proc, tmp_path):
    proc.process(10)
    proc.listen(8000, 111, uid=os.stat(str(proc.root / "10")).st_uid)
    assert port_owner(8000, {10}, str(proc.root)).kind == "unknown"
    proc.listen(8001, 112, uid=4242)
    assert port_owner(8001, {10}, str(proc.root)).kind == "foreign"   # another uid holds it
    assert port_owner(8000, {10}, str(tmp_path / "missing")).kind == "unknown"


def test_port_owner_on_the_real_system():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        assert port_owner(port, {os.getpid()}).kind == "ours"
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            owner = port_owner(port, {child.pid}, root=child.pid)
            assert owner.kind == "foreign" and os.getpid() in owner.pids
        finally:
            child.kill()
            child.wait()
    finally:
        server.close()


def test_service_port_owner(proc):
    proc.process(10)
    proc.process(11, ppid=10)
    proc.process(50, comm="old-vllm")
    root = str(proc.root)
    assert service_port_owner(8000, 10, 999, root).kind == "none"
    proc.listen(8000, 111)
    proc.socket(11, 5, 111)
    assert service_port_owner(8000, 10, 999, root).kind == "ours"
    assert service_port_owner(8000, None, 999, root).kind == "foreign"     # the service is stopped: pid 11 is not it
    proc.listen(8001, 222, uid=999)                                        # nobody readable holds it
    assert service_port_owner(8001, None, 999, root).kind == "ours"        # the service account's socket
    owner = service_port_owner(8001, None, 1000, root)
    assert owner.kind == "foreign" and "uid 999" in owner.detail
    proc.socket(50, 7, 222)
    assert service_port_owner(8001, 10, 999, root).pids == [50]            # a readable holder outside the tree


def test_unit_main_pid_is_zero_unless_systemctl_names_one():
    from ansible_collections.llmops.vllm.plugins.module_utils.probe.process import unit_main_pid
    asked = []

    def runner(argv):
        asked.append(argv)
        return 0, "1234\n", ""

    assert unit_main_pid("vllm", runner) == 1234
    assert asked == [["systemctl", "show", "--no-pager", "-p", "MainPID", "--value", "--", "vllm"]]
    assert unit_main_pid("vllm", lambda argv: (0, "0\n", "")) == 0
    assert unit_main_pid("vllm", lambda argv: (1, "", "no bus")) == 0
    assert unit_main_pid("vllm", lambda argv: (0, "", "")) == 0
