"""The module as Ansible runs it: a Python process reading ANSIBLE_MODULE_ARGS on stdin.

Running the file (rather than patching AnsibleModule internals) keeps these tests
independent of how a given ansible-core version hands arguments to modules.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.llmops.vllm.tests.fixtures.http_stub import Route

MODULE = "plugins/modules/vllm_wait.py"


def run_module(repo_root, collections_path, **args):
    env = dict(os.environ, PYTHONPATH=collections_path.split(os.pathsep)[0])
    proc = subprocess.run([sys.executable, str(repo_root / MODULE)], input=json.dumps({"ANSIBLE_MODULE_ARGS": args}),
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    return proc.returncode, json.loads(proc.stdout)


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


def test_failed_start_fails_the_task_with_the_reason(repo_root, collections_path, tmp_path, sleeper):
    log = tmp_path / "serve.log"
    shutil.copy(repo_root / "tests/fixtures/logs/cpu-bad-spec-key.log", log)
    rc, out = run_module(repo_root, collections_path, log_path=str(log), pid=sleeper, timeout=10,
                         health_url="http://127.0.0.1:9/health")
    assert rc == 1
    assert out["failed"] is True and out["changed"] is False
    assert (out["status"], out["reason"]) == ("failed", "config_error")
    assert "SpeculativeConfig.bogus_key" in out["detail"]
    assert out["msg"].startswith("vLLM failed to start (config_error)")
    assert out["log_tail"][-1].strip().startswith("For further information")


@pytest.mark.parametrize("check_mode", [False, True])
def test_ready_server_passes_in_both_modes(repo_root, collections_path, tmp_path, server, check_mode):
    log = tmp_path / "serve.log"
    log.write_text("(APIServer pid=1) INFO:     Application startup complete.\n")
    rc, out = run_module(repo_root, collections_path, log_path=str(log), pid=os.getpid(), timeout=10,
                         health_url="http://0.0.0.0:%d/health" % server, expect_model="tiny",
                         api_key="not-shown", _ansible_check_mode=check_mode)
    assert rc == 0, out
    assert (out["status"], out["reason"], out["changed"], out["listener"]) == ("ready", "ready", False, "ours")
    assert out["models"] == ["tiny"]
    assert "not-shown" not in json.dumps(out)
    assert out["cursor"].startswith("v1;log=")


def test_unit_and_pid_are_mutually_exclusive(repo_root, collections_path):
    rc, out = run_module(repo_root, collections_path, unit="vllm", pid=1)
    assert rc == 1 and "mutually exclusive" in out["msg"]


def test_bad_values_fail_with_a_message(repo_root, collections_path, tmp_path):
    rc, out = run_module(repo_root, collections_path, cursor="garbage", timeout=0)
    assert rc == 1 and "cursor" in out["msg"]
    rc, out = run_module(repo_root, collections_path, log_path=str(tmp_path / "x.log"), log_offset="soon", timeout=0)
    assert rc == 1 and "log_offset" in out["msg"]
    rc, out = run_module(repo_root, collections_path, fail_patterns=[{"pattern": "x", "reason": "bad"}], timeout=0)
    assert rc == 1 and "reason must be one of" in out["msg"]
