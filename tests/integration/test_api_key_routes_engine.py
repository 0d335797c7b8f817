"""Every route the serving vLLM registers, sent without the key to the real CPU engine behind the collection's
middleware: not one answers with content. The route list is read from the release's own app (build_app), not
kept here; the collection's middleware is loaded the way the unit loads it (PYTHONPATH and --middleware)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.plan.serve import AUTH_MIDDLEWARE
from ansible_collections.llmops.vllm.tests.ansible_cli import run_module
from ansible_collections.llmops.vllm.tests.fixtures import vllm_routes
from ansible_collections.llmops.vllm.tests.integration.vllm_serve import VllmServe, free_port, wait_args

pytestmark = pytest.mark.engine

KEY, METRICS = "sweep-key-0123456789", "sweep-metrics-token"


def routes(engine_python, repo_root):
    out = subprocess.run([str(engine_python), str(repo_root / "tests" / "fixtures" / "vllm_routes.py"), "list"],
                         capture_output=True, text=True, timeout=300, check=True,
                         env=dict(os.environ, VLLM_NO_USAGE_STATS="1", HF_HUB_OFFLINE="1")).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def url(server):
    return "http://127.0.0.1:%d" % server.port


@pytest.fixture(scope="module")
def keyed_server(engine_python, vllm_cli, tiny_models, repo_root, tmp_path_factory):
    log = tmp_path_factory.mktemp("keyed") / "vllm.log"
    server = VllmServe(engine_python, vllm_cli, log, tiny_models["target"], tiny_models["drafter"], free_port(),
                       ["--middleware", AUTH_MIDDLEWARE])
    server.env.update(VLLM_API_KEY=KEY, LLMOPS_VLLM_METRICS_TOKEN=METRICS,
                      PYTHONPATH=str(repo_root / "roles" / "vllm_server" / "files"))
    server.start()
    try:
        ready = run_module("llmops.vllm.vllm_wait", dict(wait_args(server, 0), api_key=KEY)).result()
        assert ready["status"] == "ready", ready.get("msg")
        yield server
    finally:
        server.stop()


def test_no_route_answers_without_the_key(keyed_server, engine_python, repo_root):
    found = routes(engine_python, repo_root)
    # The release's own list: the paths vLLM leaves open outside /v1 are in it.
    paths = {route["path"] for route in found}
    assert {"/invocations", "/tokenize", "/metrics", "/version", "/v1/completions", "/health"} <= paths, paths
    answered, sent = vllm_routes.sweep(url(keyed_server), found)
    assert answered == []
    assert len(found) >= 30 and sent >= len(found)   # the sweep covered the release's app, not a handful of paths
    status, body = vllm_routes.send(url(keyed_server), "GET", "/health")
    assert (status, body) == (200, b"")


def test_the_key_and_the_metrics_token_open_what_they_should(keyed_server):
    send = vllm_routes.send
    assert send(url(keyed_server), "GET", "/v1/models", KEY)[0] == 200
    status, body = send(url(keyed_server), "POST", "/invocations", KEY)
    assert status == 200 and json.loads(body)["choices"]
    status, body = send(url(keyed_server), "GET", "/metrics", METRICS)
    assert status == 200 and b"vllm:" in body
    assert send(url(keyed_server), "POST", "/v1/completions", METRICS)[0] == 401
    assert send(url(keyed_server), "POST", "/invocations", METRICS)[0] == 401


def test_the_speed_gate_and_the_drain_read_a_keyed_server(keyed_server, engine_python, vllm_cli, tiny_models, tmp_path):
    """Both read /metrics, which the key now guards too."""
    cli = tmp_path / "vllm-cpu-cli"
    cli.write_text("#!%s\n%s" % (engine_python, vllm_cli.read_text()))
    cli.chmod(0o755)
    bench = run_module("llmops.vllm.vllm_bench", {
        "executable": str(cli), "url": url(keyed_server), "model": "tiny-qwen3", "api_key": KEY,
        "tokenizer": str(tiny_models["target"]), "result_dir": str(tmp_path / "bench"), "num_prompts": 2,
        "input_len": 8, "output_len": 8, "warmups": 1}, timeout=600).result()
    assert bench["status"] == "passed", bench.get("msg")
    drained = run_module("llmops.vllm.vllm_drain", {"url": url(keyed_server) + "/health", "timeout": 5,
                                                    "api_key": KEY}).result()
    assert drained["status"] == "drained", drained
