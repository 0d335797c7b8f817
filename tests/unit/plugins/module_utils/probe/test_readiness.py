from __future__ import annotations

import os
import time

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.probe.http_client import ProbeResult
from ansible_collections.llmops.vllm.plugins.module_utils.probe.process import Listener, ProcState, UnitWatch
from ansible_collections.llmops.vllm.plugins.module_utils.log.follower import Cursor, LogFollower
from ansible_collections.llmops.vllm.plugins.module_utils.log.watch import LogWatch
from ansible_collections.llmops.vllm.plugins.module_utils.probe.readiness import (
    VllmWaiter,
    WaitSettings,
    build_waiter,
    load_cursor,
)

API = "(APIServer pid=1) "
START = [API + "INFO 05-09 10:31:10 [utils.py:233] non-default args: {}",
         "(EngineCore pid=2) INFO 05-09 10:31:32 [core.py:109] Initializing a V1 LLM engine (v0.20.2) with config: x"]
READY = [API + "INFO 05-09 10:33:15 [api_server.py:602] Starting vLLM server on http://0.0.0.0:8000",
         API + "INFO:     Application startup complete."]
REFUSED = ProbeResult(None, "refused", None)
OK = ProbeResult(200, None, b"")


class Clock(object):
    """Fake monotonic time; sleeping runs the scripted events that fall due."""

    def __init__(self):
        self.now = 1000.0
        self.events = []
        self.sleeps = []

    def __call__(self):
        return self.now

    def at(self, delay, action):
        self.events.append((self.now + delay, action))
        self.events.sort(key=lambda e: e[0])

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds
        while self.events and self.events[0][0] <= self.now:
            self.events.pop(0)[1]()


class Process(object):
    def __init__(self, pid=4242, started_at=990.0):
        self.pid, self.started_at = pid, started_at
        self.alive, self.exit_code, self.exit_detail, self.note, self.restarts = True, None, "", "", 0

    def poll(self):
        return ProcState(self.alive, self.pid, self.exit_code, self.exit_detail, self.restarts, self.started_at, self.note)

    def tree(self):
        return {self.pid}

    def baseline(self):
        return "pid=%d:77" % self.pid

    def die(self, code, words):
        self.alive, self.exit_code, self.exit_detail, self.note = False, code, words, "pid %d has exited" % self.pid


class Prober(object):
    def __init__(self, health=REFUSED, models=("tiny",), models_status=200):
        self.health_result, self.model_ids, self.models_status = health, list(models), models_status
        self.health_calls = []

    def health(self, url, timeout):
        self.health_calls.append(url)
        return self.health_result

    def models(self, url, api_key, timeout):
        return ProbeResult(self.models_status, None, b""), (self.model_ids if self.models_status == 200 else [])


class Harness(object):
    def __init__(self, tmp_path, process=True, owner="ours", offset=0, watch=None, **settings):
        tmp_path.mkdir(parents=True, exist_ok=True)
        self.log = tmp_path / "serve.log"
        self.log.touch()
        self.clock = Clock()
        self.process = Process() if process else None
        self.prober = Prober()
        self.owner = owner
        settings.setdefault("timeout", 30)
        self.settings = WaitSettings(log_path=str(self.log), **settings)
        self.follower = LogFollower(str(self.log), Cursor(offset))
        self.watch = watch or LogWatch()

    def write(self, *lines):
        with open(self.log, "a") as fh:
            fh.write("".join(line + "\n" for line in lines))

    def owner_lookup(self, port, tree, root=None):
        return Listener(self.owner, [4242], "port %d held by %s" % (port, self.owner))

    def run(self):
        waiter = VllmWaiter(self.settings, self.watch, self.follower, self.process, self.prober, self.owner_lookup,
                            clock=self.clock, sleep=self.clock.sleep, wall_clock=lambda: 1.7e9)
        return waiter.run()

    def serve(self, result=OK):
        self.prober.health_result = result


def test_ready_when_health_is_200_from_our_listener(tmp_path):
    h = Harness(tmp_path, expect_model="tiny")
    h.write(*START)
    h.clock.at(2.0, lambda: h.write(*READY))
    h.clock.at(2.01, h.serve)
    res = h.run()
    assert (res["status"], res["reason"], res["models"], res["listener"]) == ("ready", "ready", ["tiny"], "ours")
    assert res["elapsed"] <= 2.1
    assert res["phases"]["http_ready"] == pytest.approx(res["elapsed"] + 10.0, abs=0.01)  # process started 10 s earlier
    assert set(res["phases"]) >= {"api_server_up", "engine_init", "server_starting", "app_startup_complete", "http_ready"}
    assert res["msg"].startswith("vLLM is ready")


def test_probes_fast_once_the_log_says_the_server_starts(tmp_path):
    h = Harness(tmp_path, interval=0.25)
    h.clock.at(1.0, lambda: h.write(*READY))
    h.clock.at(1.12, h.serve)   # uvicorn logs startup complete a moment before it listens
    res = h.run()
    assert res["status"] == "ready"
    assert res["elapsed"] < 1.25
    assert 0.05 in h.clock.sleeps


def test_unknown_owner_needs_the_log_to_say_startup_complete(tmp_path):
    h = Harness(tmp_path, owner="unknown", timeout=3)
    h.serve()
    h.write(*START)
    res = h.run()
    assert (res["status"], res["health_status"]) == ("timeout", 200)
    assert "owner is unknown" in res["detail"]


def test_unknown_same_uid_owner_is_trusted_when_the_server_started_before_the_call(tmp_path):
    # Confirming a running server (log_offset 'end'): no start-up line follows the offset.
    h = Harness(tmp_path, owner="unknown", timeout=3, already_started=True, expect_model="tiny")
    h.serve()
    res = h.run()
    assert (res["status"], res["listener"], res["models"]) == ("ready", "unknown", ["tiny"])


def test_a_headless_rank_is_ready_once_its_head_serves_though_its_log_never_says_so(tmp_path):
    # A serving group's headless rank logs no start-up line and holds no port: health_url is its head's.
    h = Harness(tmp_path, owner="unknown", timeout=3, headless=True, health_url="http://10.0.0.11:8000/health",
                expect_model="tiny")
    assert h.settings.port is None
    h.write(*START)
    h.clock.at(1.0, h.serve)
    res = h.run()
    assert (res["status"], res["models"]) == ("ready", ["tiny"]) and 1.0 <= res["elapsed"] < 1.5


def test_a_headless_rank_that_dies_fails_while_its_head_still_answers(tmp_path):
    h = Harness(tmp_path, headless=True, health_url="http://10.0.0.11:8000/health")
    h.write(*START)
    h.clock.at(0.5, lambda: h.process.die(0, "exit code 0"))
    res = h.run()
    assert res["status"] == "failed" and res["elapsed"] < 1.0


def test_foreign_owner_is_port_in_use_even_when_the_server_started_before_the_call(tmp_path):
    h = Harness(tmp_path, owner="foreign", timeout=3, already_started=True)
    h.serve()
    res = h.run()
    assert (res["status"], res["reason"]) == ("failed", "port_in_use")


def test_log_offset_end_means_already_started_unless_resuming(tmp_path):
    log = tmp_path / "serve.log"
    log.write_text("old line\n")
    assert build_waiter({"log_path": str(log), "log_offset": "end"}).settings.already_started
    assert not build_waiter({"log_path": str(log), "log_offset": 0}).settings.already_started


def test_stale_ready_line_before_the_offset_never_counts(tmp_path):
    stale = "".join(line + "\n" for line in START + READY)
    for offset, status in ((len(stale.encode()), "timeout"), (0, "ready")):
        h = Harness(tmp_path / str(offset), process=False, offset=offset, timeout=2)
        h.write(*START + READY)
        h.serve()   # an old server still answers /health
        assert h.run()["status"] == status


def test_foreign_listener_is_port_in_use_never_ready(tmp_path):
    h = Harness(tmp_path, owner="foreign")
    h.write(*START)
    h.serve()
    res = h.run()
    assert (res["status"], res["reason"], res["listener"]) == ("failed", "port_in_use", "foreign")
    assert res["elapsed"] == 0


def test_health_503_means_engine_dead(tmp_path):
    h = Harness(tmp_path)
    h.write(*START + READY)
    h.serve(ProbeResult(503, None, b""))
    res = h.run()
    assert (res["status"], res["reason"]) == ("failed", "engine_died")
    assert "503" in res["detail"]


def test_silent_death_is_process_exited_with_the_exit_code(tmp_path):
    h = Harness(tmp_path, interval=0.25)
    h.write(*START)
    h.clock.at(3.0, lambda: h.process.die(1, "exit code 1"))
    res = h.run()
    assert (res["status"], res["reason"]) == ("failed", "process_exited")
    assert "exit code 1" in res["detail"]
    assert res["elapsed"] <= 3.0 + 0.25
    assert "Log: %s" % h.log in res["msg"]


def test_an_unplaced_exception_before_the_engines_death_keeps_its_own_hint(tmp_path):
    h = Harness(tmp_path)
    h.write(*START)

    def engine_raises():
        h.write("(EngineCore pid=2) KeyError: 'rope_scaling'",
                API + "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}")
        h.process.die(1, "exit code 1")

    h.clock.at(1.0, engine_raises)
    res = h.run()
    assert (res["status"], res["reason"]) == ("failed", "engine_died")
    assert "KeyError" in res["root_cause_line"]
    # a Python exception explains this death: the hint must not blame a kill without one (the OOM killer)
    assert "KeyError" in res["hint"] and "OOM killer" not in res["hint"]


def test_a_collector_prefixed_log_is_read(tmp_path):
    h = Harness(tmp_path)
    h.write("2025-05-09T10:31:10.1Z " + START[0])

    def fails():
        h.write("2025-05-09T10:31:24.1Z (EngineCore pid=2) ERROR 05-09 10:31:24 [core.py:708] ValueError: No available "
                "memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.")
        h.process.die(1, "exit code 1")

    h.clock.at(1.0, fails)
    res = h.run()
    assert (res["status"], res["reason"]) == ("failed", "out_of_memory")
    assert res["root_cause_line"].startswith("(EngineCore pid=2) ERROR")


def test_exit_code_0_after_an_engine_death_is_still_a_failure(tmp_path):
    h = Harness(tmp_path)
    h.write(*START + READY)

    def engine_dies():
        h.write(API + "WARNING 11-30 07:06:05 [core_client.py:817] [shutdown] MPClient: engine core exited "
                      "unexpectedly; starting cleanup")
        h.process.die(0, "exit code 0")

    h.clock.at(1.0, engine_dies)
    h.prober.health_result = REFUSED
    res = h.run()
    assert (res["status"], res["reason"]) == ("failed", "engine_died")
    assert "exit code 0" in res["detail"]


def test_last_words_without_newline_are_read_after_death(tmp_path):
    h = Harness(tmp_path)
    h.write(*START)

    def dies():
        with open(h.log, "a") as fh:
            fh.write("OSError: [Errno 98] Address already in use")
        h.process.die(1, "exit code 1")

    h.clock.at(0.5, dies)
    res = h.run()
    assert res["reason"] == "port_in_use"
    assert res["root_cause_line"] == "OSError: [Errno 98] Address already in use"


def test_certain_failure_ends_the_wait_while_the_process_lives(tmp_path):
    h = Harness(tmp_path)
    h.write(*START)
    h.clock.at(2.0, lambda: h.write(
        "(Worker_TP0 pid=3) ERROR 05-09 10:31:47 [multiproc_executor.py:870] WorkerProc failed to start."))
    h.clock.at(2.1, lambda: h.write(
        "(Worker_TP0 pid=3) ERROR 05-09 10:31:47 [multiproc_executor.py:870] ModuleNotFoundError: No module named "
        "'flash_attn.ops'"))
    res = h.run()
    assert (res["status"], res["reason"], res["detail"]) == ("failed", "missing_dependency", "flash_attn.ops")
    assert 2.0 <= res["elapsed"] <= 3.0
    assert h.process.alive
    assert "flash_attn.ops" in res["root_cause_line"]


def test_uncertain_evidence_alone_does_not_end_the_wait(tmp_path):
    h = Harness(tmp_path, timeout=2)
    h.write("(Worker pid=3) WARNING 11-30 07:02:33 [_custom_ops.py:20] Failed to import from vllm._C: "
            "ImportError('libnuma.so.1: cannot open shared object file')")
    res = h.run()
    assert res["status"] == "timeout"
    assert "libnuma" in res["root_cause_line"]


def test_timeout_names_the_last_milestone(tmp_path):
    h = Harness(tmp_path, timeout=5)
    h.write(*START)
    res = h.run()
    assert (res["status"], res["reason"]) == ("timeout", "timeout")
    assert "last milestone: engine_init" in res["detail"]
    assert "/health: refused" in res["detail"]
    assert res["elapsed"] == pytest.approx(5.0, abs=0.3)
    assert res["msg"].startswith("vLLM was not ready in time")


def test_timeout_zero_takes_one_look(tmp_path):
    h = Harness(tmp_path, timeout=0)
    res = h.run()
    assert res["status"] == "timeout" and h.clock.sleeps == []


def test_missing_log_file_is_reported_at_timeout(tmp_path):
    h = Harness(tmp_path, timeout=1)
    os.remove(h.log)
    assert "does not exist" in h.run()["detail"]


@pytest.mark.parametrize("status, ids, words", [
    (200, ["other"], "not 'tiny'"),
    (401, [], "API key"),
])
def test_expected_model_problems_are_config_errors(tmp_path, status, ids, words):
    h = Harness(tmp_path, expect_model="tiny")
    h.prober.model_ids, h.prober.models_status = ids, status
    h.write(*START + READY)
    h.serve()
    res = h.run()
    assert (res["status"], res["reason"]) == ("failed", "config_error")
    assert words in res["detail"]


def test_shutdown_during_the_wait(tmp_path):
    h = Harness(tmp_path)
    h.write(*START)

    def stopped():
        h.write(API + "INFO 11-30 07:02:51 [launcher.py:254] [shutdown] API server: shutdown triggered",
                API + "ERROR 11-30 07:02:51 [async_llm.py:906] EngineDeadError: EngineCore encountered an issue.")
        h.process.die(0, "exit code 0")

    h.clock.at(1.0, stopped)
    res = h.run()
    assert res["reason"] == "process_exited"
    assert "asked to shut down" in res["detail"]


def test_cursor_resumes_with_milestones_and_process_baseline(tmp_path):
    h = Harness(tmp_path, owner="unknown", timeout=1)
    h.write(*START + READY)
    first = h.run()
    assert first["status"] == "timeout"   # nothing answers yet
    state = load_cursor(first["cursor"])
    assert state["log"].offset == os.path.getsize(h.log)
    assert "app_startup_complete" in state["seen"] and state["pid"] == (4242, 77)
    h2 = Harness(tmp_path, owner="unknown", timeout=1, watch=LogWatch(seen=state["seen"]))
    h2.follower = LogFollower(str(h.log), state["log"])
    h2.serve()
    res = h2.run()
    assert res["status"] == "ready"       # the earlier call saw the log say so
    assert "app_startup_complete" not in res["phases"]


def test_unit_crash_loop_is_a_failure_with_the_root_cause(tmp_path):
    outputs = ["MainPID=100\nActiveState=active\nSubState=running\nNRestarts=0\n",
               "MainPID=0\nActiveState=activating\nSubState=auto-restart\nNRestarts=0\nExecMainCode=1\nExecMainStatus=1\n"]
    h = Harness(tmp_path)
    h.process = UnitWatch("vllm", lambda argv: (0, outputs.pop(0) if len(outputs) > 1 else outputs[0], ""),
                          proc=str(tmp_path / "no-proc"))
    h.write(*START)
    h.clock.at(0.1, lambda: h.write("(EngineCore pid=2) RuntimeError: Insufficient space in /dev/shm for "
                                    "shared-memory allocation: 160 MiB required, 64 MiB free."))
    res = h.run()
    assert (res["reason"], res["pid"]) == ("out_of_memory", 100)
    assert "waiting to restart" in res["detail"]
    assert "unit=100:0" in res["cursor"]


@pytest.mark.parametrize("text", ["v2;log=1:2:3", "v1;log=oops", "v1;pid=x:1", "v1;color=blue"])
def test_bad_cursors(text):
    with pytest.raises(ValueError):
        load_cursor(text)


def test_build_waiter_from_module_params(tmp_path):
    log = tmp_path / "serve.log"
    log.write_text("stale\n")
    w = build_waiter({"log_path": str(log), "log_offset": "end", "pid": os.getpid(), "timeout": 1.0,
                      "health_url": "http://0.0.0.0:8123/health", "log_tail_lines": 5})
    assert w.follower.cursor.offset == len("stale\n")
    assert w.settings.port == 8123
    assert w.settings.models_url == "http://0.0.0.0:8123/v1/models"
    assert build_waiter({"health_url": "http://10.0.0.5:8000/health"}).settings.port is None
    for bad in ({"log_path": str(log), "log_offset": "middle"}, {"log_path": str(log), "log_offset": -1},
                {"log_tail_lines": 5000}, {"interval": 0}, {"fail_patterns": ["("]}):
        with pytest.raises(ValueError):
            build_waiter(bad)


def test_backlog_phases_come_from_the_lines_own_timestamps(tmp_path):
    h = Harness(tmp_path)   # the process started at 990 on the monotonic clock; the wait starts at 1000
    stamp = time.strftime("%m-%d %H:%M:%S", time.localtime(1.7e9 - 4))
    h.write(API + "INFO %s [utils.py:233] non-default args: {}" % stamp)   # written 4 s before the wait
    h.clock.at(1.0, lambda: h.write(*READY))
    h.clock.at(1.0, h.serve)
    res = h.run()
    assert res["phases"]["api_server_up"] == pytest.approx(6.0, abs=1.0)
    assert res["phases"]["app_startup_complete"] == pytest.approx(11.0, abs=0.3)


@pytest.mark.parametrize("status, name, reason", [(226, "NAMESPACE", "config_error"), (217, "USER", "config_error"),
                                                  (203, "EXEC", "missing_dependency"), (200, "CHDIR", "config_error")])
def test_a_unit_that_failed_before_exec_gets_systemds_reason_from_an_empty_log(tmp_path, status, name, reason):
    # Nothing ran, so nothing was logged: the status systemd recorded is the evidence (module_utils/log/vocabulary).
    show = "MainPID=0\nActiveState=failed\nSubState=failed\nNRestarts=0\nResult=exit-code\nExecMainCode=1\n" \
           "ExecMainStatus=%d\n" % status
    h = Harness(tmp_path)
    h.process = UnitWatch("vllm", lambda argv: (0, show, ""), proc=str(tmp_path / "no-proc"))
    res = h.run()
    assert res["reason"] == reason, res
    assert "%d/%s" % (status, name) in res["detail"] and "before running it" in res["detail"]


def test_an_ordinary_exit_status_stays_process_exited(tmp_path):
    show = "MainPID=0\nActiveState=failed\nSubState=failed\nNRestarts=0\nResult=exit-code\nExecMainCode=1\nExecMainStatus=1\n"
    h = Harness(tmp_path)
    h.process = UnitWatch("vllm", lambda argv: (0, show, ""), proc=str(tmp_path / "no-proc"))
    assert h.run()["reason"] == "process_exited"


def killed_engine(tmp_path, kernel):
    """An engine SIGKILLed during start: it logs nothing; the API server only reports that it died. The kernel's log
    (``kernel``) may say why."""
    h = Harness(tmp_path)
    h.write(*START)
    h.write("(EngineCore_DP0 pid=4300) INFO 11-20 10:00:12 [core.py:93] Initializing a V1 LLM engine (v0.20.2)",
            "(APIServer pid=4242) ERROR 11-20 10:00:20 [core_client.py:564] Engine core proc EngineCore_DP0 died "
            "unexpectedly, shutting down client.")
    h.clock.at(0.1, lambda: h.process.die(None, "killed by signal 9 (SIGKILL)"))
    return VllmWaiter(h.settings, h.watch, h.follower, h.process, h.prober, h.owner_lookup, clock=h.clock,
                      sleep=h.clock.sleep, wall_clock=lambda: 1.7e9, kernel_log=lambda: kernel).run()


def test_a_death_the_kernels_oom_killer_caused_is_out_of_memory(tmp_path):
    res = killed_engine(tmp_path, "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),task=VLLM::EngineCor,pid=4300,uid=998\n"
                                  "Out of memory: Killed process 4300 (VLLM::EngineCor) total-vm:81234567kB, anon-rss:6012345kB\n"
                                  "Out of memory: Killed process 999 (someone-else) total-vm:1kB\n")
    assert res["reason"] == "out_of_memory", res
    assert "VLLM::EngineCor (pid 4300)" in res["detail"] and "999" not in res["detail"]


def test_a_death_the_gpu_driver_reported_is_named_by_its_xid(tmp_path):
    # A GPU that fell off the bus kills its process with no Python error; the driver's report names the process.
    res = killed_engine(tmp_path, "NVRM: Xid (PCI:0000:17:00): 13, Graphics SM Warp Exception on (GPC 0, TPC 0)\n"  # no pid
                                  "NVRM: Xid (PCI:0000:3b:00): 79, pid=4300, name=VLLM::EngineCor, GPU has fallen off the bus.\n"
                                  "NVRM: Xid (PCI:0000:5e:00): 31, pid=999, name=someone-else, Ch 00000008, intr 10000000.\n")
    assert res["reason"] == "engine_died", res
    assert "Xid 79 for VLLM::EngineCor (pid 4300) on 0000:3b:00: GPU has fallen off the bus" in res["detail"], res
    assert "999" not in res["detail"] and "Xid 13" not in res["detail"] and "Xid" in res["hint"]


def test_an_oom_kill_of_another_process_explains_nothing(tmp_path):
    h = Harness(tmp_path)
    h.write(*START)
    h.clock.at(0.1, lambda: h.process.die(None, "killed by signal 9 (SIGKILL)"))
    waiter = VllmWaiter(h.settings, h.watch, h.follower, h.process, h.prober, h.owner_lookup, clock=h.clock,
                        sleep=h.clock.sleep, wall_clock=lambda: 1.7e9,
                        kernel_log=lambda: "Out of memory: Killed process 999 (someone-else)\n")
    assert waiter.run()["reason"] != "out_of_memory"
