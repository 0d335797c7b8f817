from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils import http_probe

METRICS = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="tiny"} 38.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny",position="0"} 5.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny",position="1"} 2.0
vllm:num_requests_running{engine="0",model_name="tiny"} 0.0
weird_line_without_value
"""


class Handler(BaseHTTPRequestHandler):
    health = 200
    key = "s3cret"
    seen_auth = []

    def do_GET(self):  # noqa: N802 (http.server API)
        self.seen_auth.append((self.path, self.headers.get("Authorization")))
        if self.path == "/health":
            return self.reply(self.health, b"")
        if self.path == "/v1/models":
            if self.headers.get("Authorization") != "Bearer " + self.key:
                return self.reply(401, b'{"error":"Unauthorized"}')
            return self.reply(200, json.dumps({"object": "list", "data": [{"id": "tiny"}, {"id": "draft"}]}).encode())
        return self.reply(404, b"")

    def reply(self, code, body):
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    Handler.health, Handler.seen_auth = 200, []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield "http://127.0.0.1:%d" % srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def raw_listener(behaviour):
    """A TCP listener that closes every connection at once ('reset') or never answers ('silent')."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    held = []

    def loop():
        while True:
            try:
                conn, _peer = sock.accept()
            except OSError:
                return
            if behaviour == "reset":
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                conn.close()
            else:
                held.append(conn)

    threading.Thread(target=loop, daemon=True).start()
    return sock, "http://127.0.0.1:%d/health" % sock.getsockname()[1]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_health_status_codes(server):
    prober = http_probe.HttpProber()
    assert prober.health(server + "/health", 2).status == 200
    Handler.health = 503
    assert prober.health(server + "/health", 2) == (503, None, b"")


def test_models_sends_the_key_only_to_v1(server):
    prober = http_probe.HttpProber()
    prober.health(server + "/health", 2)
    result, ids = prober.models(server + "/v1/models", "s3cret", 2)
    assert result.status == 200 and ids == ["tiny", "draft"]
    assert Handler.seen_auth == [("/health", None), ("/v1/models", "Bearer s3cret")]
    result, ids = prober.models(server + "/v1/models", None, 2)
    assert result.status == 401 and ids == []


def test_wildcard_host_is_probed_on_loopback(server):
    port = server.rsplit(":", 1)[1]
    assert http_probe.get("http://0.0.0.0:%s/health" % port, 2).status == 200


def test_refused():
    assert http_probe.get("http://127.0.0.1:%d/health" % free_port(), 2) == (None, "refused", None)


def test_reset_like_docker_proxy():
    sock, url = raw_listener("reset")
    try:
        assert http_probe.get(url, 2).error == "reset"
    finally:
        sock.close()


def test_timeout():
    sock, url = raw_listener("silent")
    try:
        assert http_probe.get(url, 0.2).error == "timeout"
    finally:
        sock.close()


def test_proxy_in_the_environment_is_not_used(server, monkeypatch):
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:%d" % free_port())
    assert http_probe.get(server + "/health", 2).status == 200


@pytest.mark.parametrize("url, expected", [
    ("http://0.0.0.0:8000/health", "http://127.0.0.1:8000/health"),
    ("http://[::]:8000/health", "http://127.0.0.1:8000/health"),
    ("http://10.0.0.5:8000/health", "http://10.0.0.5:8000/health"),
])
def test_local_url(url, expected):
    assert http_probe.local_url(url) == expected


@pytest.mark.parametrize("health, models", [
    ("http://127.0.0.1:8000/health", "http://127.0.0.1:8000/v1/models"),
    ("http://h:9000/prefix/health", "http://h:9000/prefix/v1/models"),
])
def test_models_url_for(health, models):
    assert http_probe.models_url_for(health) == models


def test_host_helpers():
    assert http_probe.url_host_port("http://127.0.0.1:8123/health") == ("127.0.0.1", 8123)
    assert http_probe.url_host_port("https://example.test/health") == ("example.test", 443)
    assert http_probe.is_local_host("0.0.0.0") and http_probe.is_local_host("::1")
    assert not http_probe.is_local_host("10.1.230.172")


def test_model_ids_tolerates_garbage():
    assert http_probe.model_ids(b"not json") == []
    assert http_probe.model_ids(b'{"data": [{"id": "a"}, {"x": 1}, "b"]}') == ["a"]


def test_prometheus_parsing():
    samples = http_probe.parse_metrics(METRICS)
    assert samples["vllm:spec_decode_num_drafts_total"] == [({"engine": "0", "model_name": "tiny"}, 38.0)]
    assert http_probe.metric_total(METRICS, "vllm:spec_decode_num_accepted_tokens_per_pos_total") == 7.0
    assert http_probe.metric_total(samples, "vllm:spec_decode_num_accepted_tokens_per_pos_total", position="1") == 2.0
    assert http_probe.metric_total(METRICS, "vllm:absent_total") == 0.0
