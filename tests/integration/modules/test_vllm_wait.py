"""The module as a user runs it: a task in a playbook, its result as the controller got it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.llmops.vllm.tests.helpers.ansible_cli import RC_HOST_FAILED, run_module
from ansible_collections.llmops.vllm.tests.helpers.http_stub import Route


def vllm_wait(check=False, **args):
    """(ansible-playbook's exit status, the task's result)."""
    run = run_module("llmops.vllm.vllm_wait", args, check=check, timeout=60)
    return run.rc, run.result()


@pytest.fixture
def server(http_stub):
    http_stub.routes.update({"/health": Route(200), "/v1/models": Route(body={"data": [{"id": "tiny"}]})})
    return http_stub.port


@pytest.fixture
def sleeper():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc.pid
    proc.kill()
    proc.wait()


def test_failed_start_fails_the_task_with_the_reason(repo_root, tmp_path, sleeper):
    log = tmp_path / "serve.log"
    shutil.copy(repo_root / "tests/fixtures/logs/cpu-bad-spec-key.log", log)
    rc, out = vllm_wait(log_path=str(log), pid=sleeper, timeout=10, health_url="http://127.0.0.1:9/health")
    assert rc == RC_HOST_FAILED
    assert out["failed"] is True and out["changed"] is False
    assert (out["status"], out["reason"]) == ("failed", "config_error")
    assert "SpeculativeConfig.bogus_key" in out["detail"]
    assert out["msg"].startswith("vLLM failed to start (config_error)")
    assert out["log_tail"][-1].strip().startswith("For further information")


@pytest.mark.parametrize("check_mode", [False, True])
def test_ready_server_passes_in_both_modes(tmp_path, server, check_mode):
    log = tmp_path / "serve.log"
    log.write_text("(APIServer pid=1) INFO:     Application startup complete.\n")
    rc, out = vllm_wait(log_path=str(log), pid=os.getpid(), timeout=10,
                        health_url="http://0.0.0.0:%d/health" % server, expect_model="tiny",
                        api_key="not-shown", check=check_mode)
    assert rc == 0, out
    assert (out["status"], out["reason"], out["changed"], out["listener"]) == ("ready", "ready", False, "ours")
    assert out["models"] == ["tiny"]
    assert "not-shown" not in json.dumps(out)
    assert out["cursor"].startswith("v1;log=")


def test_unit_and_pid_are_mutually_exclusive():
    rc, out = vllm_wait(unit="vllm", pid=1)
    assert rc == RC_HOST_FAILED and "mutually exclusive" in out["msg"]


def test_bad_values_fail_with_a_message(tmp_path):
    rc, out = vllm_wait(cursor="garbage", timeout=0)
    assert rc == RC_HOST_FAILED and "cursor" in out["msg"]
    rc, out = vllm_wait(log_path=str(tmp_path / "x.log"), log_offset="soon", timeout=0)
    assert rc == RC_HOST_FAILED and "log_offset" in out["msg"]
    rc, out = vllm_wait(fail_patterns=[{"pattern": "x", "reason": "bad"}], timeout=0)
    assert rc == RC_HOST_FAILED and "reason must be one of" in out["msg"]
