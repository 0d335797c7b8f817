"""HAProxy's runtime API answers as HAProxy 2.6 (Debian bookworm) gives them, read back by name."""

from __future__ import annotations

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.probe import haproxy

# Captured from haproxy 2.6.12: gpu-node-1 drained while its health check fails, gpu-node-2 in maintenance.
SHOW_STAT_HEADER = ("# pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,wretr,wredis,"
                    "status,weight,act,bck,chkfail,chkdown,lastchg,downtime,qlimit,pid,iid,sid,throttle,lbtot")
SHOW_STAT = "\n".join([
    SHOW_STAT_HEADER,
    "f,FRONTEND,,,0,0,9985,0,0,0,0,0,0,,,,,OPEN,,,,,,,,,1,2,0,,",
    "vllm,gpu-node-1,0,0,3,5,,0,0,0,,0,,0,0,0,0,DOWN,1,1,0,1,1,1,1,,1,3,1,,0",
    "vllm,gpu-node-2,0,0,0,0,,0,0,0,,0,,0,0,0,0,MAINT,1,1,0,,,0,,,1,3,2,,0",
    "vllm,BACKEND,0,0,3,5,999,0,0,0,0,0,,0,0,0,0,DOWN,0,0,0,,1,0,0,,1,3,0,,0",
    "",
])
SERVERS_STATE = """1
# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight srv_iweight
3 vllm 1 gpu-node-1 127.0.0.1 0 8 1 1
3 vllm 2 gpu-node-2 127.0.0.1 0 1 1 1
3 vllm 3 gpu-node-3 127.0.0.1 2 0 1 1
"""


def answers(**by_command):
    sent = []

    def run(path, line):
        sent.append(line)
        for prefix, answer in by_command.items():
            if line.startswith(prefix.replace("_", " ")):
                return answer() if callable(answer) else answer
        raise AssertionError("unexpected command %r" % line)
    run.sent = sent
    return run


def test_a_server_row_by_name():
    row = haproxy.server("s", "vllm", "gpu-node-1", answers(show_stat=SHOW_STAT))
    assert (row["status"], row["scur"]) == ("DOWN", "3")
    with pytest.raises(haproxy.HaproxyError, match="no server vllm/gpu-node-9"):
        haproxy.server("s", "vllm", "gpu-node-9", answers(show_stat=SHOW_STAT))


@pytest.mark.parametrize("name, state", [("gpu-node-1", "drain"), ("gpu-node-2", "maint"), ("gpu-node-3", "ready")])
def test_the_admin_state_comes_from_the_servers_state_bits(name, state):
    assert haproxy.admin_state("s", "vllm", name, answers(show_servers_state=SERVERS_STATE)) == state


def test_set_state_sends_the_command_and_reports_a_refusal():
    run = answers(set_server="\n")
    haproxy.set_state("s", "vllm", "gpu-node-1", "drain", run)
    assert run.sent == ["set server vllm/gpu-node-1 state drain"]
    with pytest.raises(haproxy.HaproxyError, match="No such server"):
        haproxy.set_state("s", "vllm", "nope", "ready", answers(set_server="No such server.\n\n"))
    with pytest.raises(haproxy.HaproxyError, match="state must be one of"):
        haproxy.set_state("s", "vllm", "gpu-node-1", "down", run)


def test_wait_idle_until_the_sessions_end():
    counts = iter([3, 2, 0])

    def stat():
        return SHOW_STAT.replace("vllm,gpu-node-1,0,0,3,", "vllm,gpu-node-1,0,0,%d," % next(counts))
    now = [0.0]
    left, most, waited = haproxy.wait_idle("s", "vllm", "gpu-node-1", 10, interval=1, clock=lambda: now[0],
                                           sleep=lambda s: now.__setitem__(0, now[0] + s), run=answers(show_stat=stat))
    assert (left, most, waited) == (0, 3, 2.0)


def test_wait_idle_gives_up_at_the_timeout():
    now = [0.0]
    left, most, waited = haproxy.wait_idle("s", "vllm", "gpu-node-1", 2, interval=1, clock=lambda: now[0],
                                           sleep=lambda s: now.__setitem__(0, now[0] + s), run=answers(show_stat=SHOW_STAT))
    assert (left, most, waited) == (3, 3, 2.0)


def test_a_missing_socket_is_an_error_naming_it(tmp_path):
    with pytest.raises(haproxy.HaproxyError, match="admin.sock"):
        haproxy.command(str(tmp_path / "admin.sock"), "show stat")


def test_an_answer_that_trickles_is_cut_at_the_deadline(tmp_path):
    """Each byte comes within the socket timeout: only a deadline for the whole answer ends the call."""
    import socket
    import threading
    import time

    path = str(tmp_path / "admin.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)

    def trickle():
        conn, _addr = listener.accept()
        with conn:
            conn.recv(1024)
            for dummy in range(100):
                try:
                    conn.sendall(b"x")
                except OSError:
                    return
                time.sleep(0.1)

    threading.Thread(target=trickle, daemon=True).start()
    started = time.monotonic()
    with pytest.raises(haproxy.HaproxyError, match="no whole answer within 1 s|timed out"):
        haproxy.command(path, "show stat", timeout=1.0)
    assert time.monotonic() - started < 3
    listener.close()
