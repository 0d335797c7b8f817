"""Every route the serving vLLM registers, sent without the key to the real CPU engine behind the collection's
middleware: not one answers with content. The route list is read from the release's own app (build_app), not
kept here; the collection's middleware is loaded the way the unit loads it (PYTHONPATH and --middleware)."""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import subprocess
import urllib.error
import urllib.request

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.vllm_serve_plan import AUTH_MIDDLEWARE
from ansible_collections.llmops.vllm.tests.ansible_cli import run_module
from ansible_collections.llmops.vllm.tests.integration.vllm_serve import SERVED, VllmServe, free_port, wait_args

pytestmark = pytest.mark.engine

KEY, METRICS = "sweep-key-0123456789", "sweep-metrics-token"


def routes(engine_python, repo_root):
    out = subprocess.run([str(engine_python), str(repo_root / "tests" / "fixtures" / "vllm_routes.py")],
                         capture_output=True, text=True, timeout=300, check=True,
                         env=dict(os.environ, VLLM_NO_USAGE_STATS="1", HF_HUB_OFFLINE="1")).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def send(port, method, path, token=None):
    """(status, body) of one request; a body is sent with every method that takes one."""
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + token
    data = json.dumps({"model": SERVED, "prompt": "hi", "max_tokens": 1}).encode() if method in ("POST", "PUT") else None
    request = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data, headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def websocket_status(port, path):
    """The HTTP status a WebSocket handshake without a key gets (101 would be an open socket)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        key = base64.b64encode(os.urandom(16)).decode()
        conn.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % (path, key)).encode())
        return int(conn.recv(4096).split(b" ", 2)[1])


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
    answered = []
    for route in found:
        path = re.sub(r"\{[^}]+\}", "x", route["path"])
        if "WebSocket" in route["kind"]:
            status = websocket_status(keyed_server.port, path)
            if status not in (401, 403):
                answered.append((path, "WEBSOCKET", status))
            continue
        for method in route["methods"]:
            status, body = send(keyed_server.port, method, path)
            if path == "/health" and method in ("GET", "HEAD"):
                assert status == 200 and body == b""   # open, and says nothing
            elif status != 401:
                answered.append((path, method, status, body[:80]))
    assert answered == [], answered
    assert len(found) >= 30   # the sweep covered the release's app, not a handful of paths


def test_the_key_and_the_metrics_token_open_what_they_should(keyed_server):
    assert send(keyed_server.port, "GET", "/v1/models", KEY)[0] == 200
    status, body = send(keyed_server.port, "POST", "/invocations", KEY)
    assert status == 200 and json.loads(body)["choices"]
    status, body = send(keyed_server.port, "GET", "/metrics", METRICS)
    assert status == 200 and b"vllm:" in body
    assert send(keyed_server.port, "POST", "/v1/completions", METRICS)[0] == 401
    assert send(keyed_server.port, "POST", "/invocations", METRICS)[0] == 401
