"""The liveness watchdog's decisions (roles/vllm_server/files/vllm_watchdog.py), one probe per timer run."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.probe import liveness
from ansible_collections.llmops.vllm.tests.helpers import script_module

watchdog = script_module.load(Path(__file__).resolve().parents[3] / "roles" / "vllm_server" / "files" / "vllm_watchdog.py",
                              "vllm_watchdog")

RUNNING = {"active": "active", "sub": "running", "result": "success", "pid": 100, "nrestarts": 0}
OK, FAILED = (True, 0.05, ""), (False, 10.0, "timeout after 10 s")


def run(state, unit=None, result=None, lock_age=None, failures=3):
    unit = unit or RUNNING
    state, action = watchdog.decide(state, unit, lock_age, failures, 3600)
    if action == "probe":
        state, action = watchdog.decide(state, unit, lock_age, failures, 3600, result)
    return state, action


def state_after(state, **kwargs):
    return run(state, **kwargs)[0]


def test_a_server_that_answers_is_up_and_left_alone():
    state, action = run({}, result=OK)
    assert action is None and state["up"] and state["started"] and state["latency"] == 0.05


def test_a_server_still_starting_is_never_acted_on():
    state = {}
    for dummy in range(10):
        state, action = run(state, result=FAILED)
        assert action is None
    assert not state["started"] and state["note"].startswith("starting")


def test_a_headless_rank_counts_as_started_after_its_bound_and_is_restarted_when_its_head_is_gone():
    # A serving group's headless rank probes its head, which serves only once every rank has joined: a rank tied to a
    # head that died waits for ever unless "starting" is bounded (--started-after).
    state, actions = {}, []
    for now in (1000, 1100, 1700, 1701, 1702):
        state, action = watchdog.decide(state, RUNNING, None, 3, 3600, now=now, started_after=600)
        state, action = watchdog.decide(state, RUNNING, None, 3, 3600, FAILED, now=now, started_after=600)
        actions.append(action)
    assert actions == [None, None, None, None, "kill"]
    # Without the bound the same rank is never acted on.
    state = {}
    for now in (1000, 1100, 1700, 1701, 1702):
        state, action = watchdog.decide(state, RUNNING, None, 3, 3600, FAILED, now=now)
        assert action is None


def test_a_hang_right_after_loading_is_killed_though_no_probe_ever_succeeded():
    # SIGSTOP of the engine seconds after a start: /health answers 200 (the engine has loaded), completions time out.
    hung = FAILED + (True,)
    state, actions = {}, []
    for dummy in range(3):
        state, action = run(state, result=hung)
        actions.append(action)
    assert actions == [None, None, "kill"] and state["watchdog_restarts"] == 1


def test_the_health_route_is_read_as_loaded(http_stub):
    from ansible_collections.llmops.vllm.tests.helpers.http_stub import Route
    http_stub.routes["/health"] = Route(body="")
    assert watchdog.loaded(http_stub.url, 2.0) is True
    assert watchdog.loaded("http://127.0.0.1:9", 2.0) is False


def test_a_hung_engine_is_killed_after_the_allowed_failures_in_a_row():
    state = state_after({}, result=OK)
    actions = []
    for dummy in range(3):
        state, action = run(state, result=FAILED)
        actions.append(action)
    assert actions == [None, None, "kill"]
    assert state["watchdog_restarts"] == 1 and state["killed"] and not state["started"]
    # systemd starts it again: that restart is the watchdog's, not an exit's.
    state = state_after(state, unit=dict(RUNNING, pid=200, nrestarts=1), result=FAILED)
    assert state["exit_restarts"] == 0 and not state["killed"]


def test_one_good_probe_resets_the_count():
    state = state_after({}, result=OK)
    for result in (FAILED, FAILED, OK, FAILED, FAILED):
        state, action = run(state, result=result)
        assert action is None
    assert state["failures"] == 2


def test_a_rolling_deploy_is_left_alone_until_its_lock_is_stale():
    state = state_after({}, result=OK)
    state["failures"] = 2
    assert run(state, result=FAILED, lock_age=30)[1] is None
    assert run(state, result=FAILED, lock_age=7200)[1] == "kill"


def test_systemd_restarts_after_an_exit_are_counted_and_a_manual_start_resets_nothing():
    state = state_after({}, result=OK)
    state = state_after(state, unit=dict(RUNNING, pid=101, nrestarts=1), result=OK)
    state = state_after(state, unit=dict(RUNNING, pid=102, nrestarts=2), result=OK)
    assert state["exit_restarts"] == 2
    # A deploy's start resets systemd's NRestarts to 0; the count here goes on.
    state = state_after(state, unit=dict(RUNNING, pid=103, nrestarts=0), result=OK)
    assert state["exit_restarts"] == 2


def test_a_unit_that_is_not_running_is_systemds_to_handle():
    # A crash loop as systemd 252 (Debian 12) leaves it: failed with the last run's result, after 2 restarts.
    failed = dict(RUNNING, active="failed", sub="failed", result="exit-code", pid=0, nrestarts=2)
    state, action = run({}, unit=failed)
    assert action is None and not state["up"]
    text = watchdog.textfile(state, "vllm")
    assert 'vllm_unit_failed{service="vllm",result="exit-code"} 1' in text
    assert 'vllm_crash_loop{service="vllm"} 1' in text
    assert 'vllm_up{service="vllm"} 0' in text
    # Failed at its first start, never restarted: failed, not a crash loop.
    text = watchdog.textfile(run({}, unit=dict(failed, nrestarts=0))[0], "vllm")
    assert 'vllm_unit_failed{service="vllm",result="exit-code"} 1' in text and 'vllm_crash_loop{service="vllm"} 0' in text


def test_the_textfile_is_prometheus_text_format():
    state = state_after({}, result=OK)
    text = watchdog.textfile(state, "vllm")
    assert 'vllm_up{service="vllm"} 1' in text and 'vllm_restarts_total{service="vllm",cause="watchdog"} 0' in text
    samples = [line for line in text.splitlines() if not line.startswith("#")]
    assert all(len(line.split()) == 2 for line in samples)


@pytest.mark.parametrize("delay, ok", [(0.0, True), (1.5, False)])
def test_the_probe_is_a_completion_with_a_deadline(http_stub, delay, ok):
    from ansible_collections.llmops.vllm.tests.helpers.http_stub import Route
    http_stub.routes["/v1/completions"] = Route(body={"choices": [{"text": "x"}]}, delay=delay)
    probe = liveness.request("m")
    result = watchdog.probe(http_stub.url, probe["path"], probe["body"], deadline=0.5, api_key="k")
    assert result[0] is ok
    assert ok or result[2] == "timeout after 0.5 s"
    (request,) = http_stub.requests
    assert json.loads(request.body) == {"model": "m", "prompt": "ping", "max_tokens": 1, "temperature": 0}
    assert request.headers.get("Authorization") == "Bearer k"


class RawServer:
    """A loopback TCP server that answers every connection with ``respond(conn)``: hostile answers for the probe."""

    def __init__(self, respond):
        import socket
        import threading
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.url = "http://127.0.0.1:%d" % self.sock.getsockname()[1]
        self.respond, self.stop = respond, threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stop.is_set():
            try:
                conn, _addr = self.sock.accept()
            except OSError:
                return
            conn.recv(65536)
            try:
                self.respond(conn, self.stop)
            except OSError:
                pass
            conn.close()

    def close(self):
        self.stop.set()
        self.sock.close()


def drip(conn, stop):
    """One header byte every 0.2 s, for ever: each read is quick, the answer never ends."""
    for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 10000:
        if stop.wait(0.2):
            return
        conn.sendall(bytes([byte]))


def flood(conn, stop):
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n")
    chunk = b"x" * 65536
    while not stop.is_set():
        conn.sendall(chunk)


def test_a_dripping_server_cannot_hold_the_probe_past_its_deadline():
    server = RawServer(drip)
    try:
        started = time.monotonic()
        ok, seconds, why = watchdog.probe(server.url, "/v1/completions", "{}", deadline=1.0)
        assert not ok and why == "timeout after 1 s" and time.monotonic() - started < 2.0
    finally:
        server.close()


def test_an_endless_body_is_read_up_to_its_limit_only():
    server = RawServer(flood)
    try:
        started = time.monotonic()
        ok, seconds, why = watchdog.probe(server.url, "/v1/completions", "{}", deadline=5.0)
        assert ok and time.monotonic() - started < 2.0
    finally:
        server.close()


@pytest.mark.parametrize("content", ["[1, 2]", "{not json", '{"seen_nrestarts": "x", "failures": true, "unit": 3}',
                                     "x" * 100000, ""])
def test_a_malformed_state_file_starts_afresh(tmp_path, content):
    path = tmp_path / "watchdog.json"
    path.write_text(content)
    state = watchdog.load_state(str(path))
    assert isinstance(state, dict) and "seen_nrestarts" not in state and "unit" not in state
    state, action = run(state, result=OK)
    assert state["up"] and action is None


def test_a_state_path_that_is_no_regular_file_is_not_read(tmp_path):
    fifo = tmp_path / "watchdog.json"
    os.mkfifo(fifo)
    assert watchdog.load_state(str(fifo)) == {}
    link = tmp_path / "link.json"
    link.symlink_to("/etc/hostname")
    assert watchdog.load_state(str(link)) == {}


def test_a_watchdog_that_cannot_decide_reports_down_and_why(tmp_path, monkeypatch, capsys):
    def broken(unit):
        raise RuntimeError("systemctl gave nothing")
    monkeypatch.setattr(watchdog, "unit_state", broken)
    textfile = tmp_path / "vllm.prom"
    assert watchdog.main(["--unit", "vllm", "--url", "http://127.0.0.1:9", "--path", "/v1/completions", "--body", "{}",
                          "--state", str(tmp_path / "state.json"), "--lock", str(tmp_path / "lock"),
                          "--textfile", str(textfile)]) == 0
    text = textfile.read_text()
    assert 'vllm_up{service="vllm"} 0' in text and 'vllm_watchdog_decided{service="vllm"} 0' in text
    assert "cannot decide: RuntimeError: systemctl gave nothing" in capsys.readouterr().out


FAILED_UNIT = dict(RUNNING, active="failed", sub="failed", result="exit-code", pid=0, nrestarts=3)


def test_a_unit_its_start_limit_stopped_is_started_again_after_a_growing_backoff():
    state, action = watchdog.decide({}, FAILED_UNIT, None, 3, 3600, now=1000, backoff=300)
    assert action is None and state["failed_since"] == 1000
    state, action = watchdog.decide(state, FAILED_UNIT, None, 3, 3600, now=1299, backoff=300)
    assert action is None
    state, action = watchdog.decide(state, FAILED_UNIT, None, 3, 3600, now=1300, backoff=300)
    assert action == "start" and state["backoff_restarts"] == 1
    # It failed again: the next start waits twice as long.
    state, action = watchdog.decide(state, FAILED_UNIT, None, 3, 3600, now=1400, backoff=300)
    assert action is None
    state, action = watchdog.decide(state, FAILED_UNIT, None, 3, 3600, now=1400 + 599, backoff=300)
    assert action is None
    state, action = watchdog.decide(state, FAILED_UNIT, None, 3, 3600, now=1400 + 600, backoff=300)
    assert action == "start" and state["backoff_restarts"] == 2
    assert 'vllm_restarts_total{service="vllm",cause="backoff"} 2' in watchdog.textfile(state, "vllm")
    # Once it serves, the backoff starts from the beginning again.
    state, action = watchdog.decide(state, RUNNING, None, 3, 3600, result=OK, now=3000, backoff=300)
    assert state["backoff_in_a_row"] == 0 and "failed_since" not in state


def test_a_failed_unit_is_left_alone_while_a_deploy_rolls_it_or_without_a_backoff():
    state, action = watchdog.decide({"failed_since": 0}, FAILED_UNIT, 5, 3, 3600, now=10**6, backoff=300)
    assert action is None
    state, action = watchdog.decide({"failed_since": 0}, FAILED_UNIT, None, 3, 3600, now=10**6, backoff=0)
    assert action is None
    # Stopped on purpose (inactive), not failed: never started by the watchdog.
    stopped = dict(FAILED_UNIT, active="inactive", sub="dead", result="success")
    assert watchdog.decide({}, stopped, None, 3, 3600, now=10**6, backoff=300)[1] is None
