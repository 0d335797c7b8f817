"""llmops.vllm.vllm_wait run by ansible-playbook against real processes.

tests/fixtures/scripted_vllm.py plays the server: it writes vLLM-like lines to a
log over time, then serves /health and /v1/models, or dies, or reports a fatal
error, as each test asks. The task_results callback records when the controller
got the module's result, so detection latencies are measured end to end.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ansible_collections.llmops.vllm.tests.helpers.ansible_cli import module_play, start_playbook

SCRIPTED = Path(__file__).resolve().parents[1] / "fixtures" / "scripted_vllm.py"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_event(state, name, timeout=20.0):
    path = state / name
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError("the scripted server never recorded %s" % name)
        time.sleep(0.02)
    return float(path.read_text())


def holders_of(path, exclude):
    """Pids (other than ``exclude``) with ``path`` open, read from /proc."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) in exclude:
            continue
        try:
            for fd in os.listdir("/proc/%s/fd" % pid):
                if os.readlink("/proc/%s/fd/%s" % (pid, fd)) == str(path):
                    found.append(int(pid))
        except OSError:
            continue
    return found


class Scenario(object):
    """One scripted server, its log and state directory, and vllm_wait run through ansible-playbook."""

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.log = tmp_path / "serve.log"
        self.state = tmp_path / "state"
        self.state.mkdir()
        self.port = free_port()
        self.procs = []
        self.runs = []

    def start(self, behaviour, *extra, log=True):
        argv = [sys.executable, str(SCRIPTED), behaviour, "--port", str(self.port), "--state", str(self.state)]
        if log:
            argv += ["--log", str(self.log)]
        proc = subprocess.Popen(argv + list(extra))
        self.procs.append(proc)
        return proc

    def playbook(self, **args):
        run = start_playbook(module_play("llmops.vllm.vllm_wait", args))
        self.runs.append(run)
        return run

    def finish(self, run):
        done = run.wait(timeout=120)
        record = done.task()
        result = dict(record.result, task_outcome=record.outcome)
        return record.at, result, done.output

    def wait(self, **args):
        return self.finish(self.playbook(**args))

    def close(self):
        for run in self.runs:
            run.close()
        for proc in self.procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()


@pytest.fixture
def scenario(tmp_path):
    s = Scenario(tmp_path)
    yield s
    s.close()


def test_good_start_is_ready(scenario):
    server = scenario.start("good", "--pause", "0.3")
    _at, res, out = scenario.wait(pid=server.pid, log_path=str(scenario.log), expect_model="tiny", timeout=30,
                                  health_url="http://0.0.0.0:%d/health" % scenario.port)
    assert (res["status"], res["reason"], res["listener"]) == ("ready", "ready", "ours"), out
    assert res["task_outcome"] == "ok" and res["changed"] is False and res["models"] == ["tiny"]
    assert {"api_server_up", "engine_init", "weights_loaded", "app_startup_complete", "http_ready"} <= set(res["phases"])


@pytest.mark.parametrize("behaviour, code", [("exit1", 1), ("exit0", 0)])
def test_silent_death_is_reported_within_a_second(scenario, behaviour, code):
    go = scenario.tmp / "go"
    server = scenario.start(behaviour, "--go", str(go))
    run = scenario.playbook(pid=server.pid, log_path=str(scenario.log), timeout=60,
                            health_url="http://127.0.0.1:%d/health" % scenario.port)
    deadline = time.monotonic() + 60
    while not holders_of(scenario.log, exclude={server.pid}):   # the module follows the log: let the server die
        assert time.monotonic() < deadline and run.poll() is None, "vllm_wait never opened the log"
        time.sleep(0.02)
    go.touch()
    arrived, res, out = scenario.finish(run)
    exited = read_event(scenario.state, "exit_at")
    assert (res["status"], res["reason"]) == ("failed", "process_exited"), out
    assert "exit code %d" % code in res["detail"]
    assert res["task_outcome"] == "failed"
    assert arrived - exited < 1.0, "death reported %.2f s after the exit" % (arrived - exited)


def test_fatal_line_ends_the_wait_while_the_process_lives(scenario):
    server = scenario.start("fatal", "--after", "1.5", "--linger", "60")
    arrived, res, out = scenario.wait(pid=server.pid, log_path=str(scenario.log), timeout=60,
                                      health_url="http://127.0.0.1:%d/health" % scenario.port)
    fatal_at = read_event(scenario.state, "fatal_at")
    assert (res["reason"], res["detail"]) == ("missing_dependency", "flash_attn.ops"), out
    assert "No module named 'flash_attn.ops'" in res["root_cause_line"]
    assert server.poll() is None
    assert arrived - fatal_at < 1.5


def test_health_503_is_engine_died(scenario):
    server = scenario.start("engine-dead", "--pause", "0.1")
    _at, res, out = scenario.wait(pid=server.pid, log_path=str(scenario.log), timeout=30,
                                  health_url="http://127.0.0.1:%d/health" % scenario.port)
    assert (res["status"], res["reason"]) == ("failed", "engine_died"), out
    assert "exited unexpectedly" in res["detail"]


def test_stale_ready_line_before_the_offset_never_gives_ready(scenario):
    scenario.start("foreign", log=False)            # an old server still answers /health with 200
    read_event(scenario.state, "ready_at")
    server = scenario.start("stale", "--pause", "0.1")
    offset = int(read_event(scenario.state, "offset"))
    args = dict(log_path=str(scenario.log), log_offset=offset, timeout=3,
                health_url="http://127.0.0.1:%d/health" % scenario.port)
    _at, res, out = scenario.wait(**args)
    assert (res["status"], res["reason"], res["health_status"]) == ("timeout", "timeout", 200), out
    assert "never showed 'Application startup complete.'" in res["detail"]
    _at, res, out = scenario.wait(pid=server.pid, **args)
    assert (res["status"], res["reason"], res["listener"]) == ("failed", "port_in_use", "foreign"), out


def test_port_already_taken_is_port_in_use(scenario):
    scenario.start("foreign", log=False)
    read_event(scenario.state, "ready_at")
    server = scenario.start("good", "--pause", "0.1")
    _at, res, out = scenario.wait(pid=server.pid, log_path=str(scenario.log), timeout=30,
                                  health_url="http://127.0.0.1:%d/health" % scenario.port)
    assert (res["status"], res["reason"]) == ("failed", "port_in_use"), out
