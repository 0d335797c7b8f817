from __future__ import annotations

import socket

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.probe import http_client
from ansible_collections.llmops.vllm.tests.helpers.http_stub import Route

METRICS = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="tiny"} 38.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny",position="0"} 5.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="tiny",position="1"} 2.0
vllm:num_requests_running{engine="0",model_name="tiny"} 0.0
weird_line_without_value
"""


KEY = "s3cret"


def models(request):
    """vLLM's /v1/models behind --api-key."""
    if request.headers.get("Authorization") != "Bearer " + KEY:
        return Route(401, b'{"error":"Unauthorized"}')
    return Route(body={"object": "list", "data": [{"id": "tiny"}, {"id": "draft"}]})


@pytest.fixture
def server(http_stub):
    """/health open to all, /v1/models only with the key."""
    http_stub.routes.update({"/health": Route(200), "/v1/models": models})
    return http_stub


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_health_status_codes(server):
    prober = http_client.HttpProber()
    assert prober.health(server.url + "/health", 2).status == 200
    server.routes["/health"] = Route(503)
    assert prober.health(server.url + "/health", 2) == (503, None, b"")


def test_models_sends_the_key_only_to_v1(server):
    prober = http_client.HttpProber()
    prober.health(server.url + "/health", 2)
    result, ids = prober.models(server.url + "/v1/models", "s3cret", 2)
    assert result.status == 200 and ids == ["tiny", "draft"]
    assert [(r.path, r.headers.get("Authorization")) for r in server.requests] == [("/health", None), ("/v1/models", "Bearer s3cret")]
    result, ids = prober.models(server.url + "/v1/models", None, 2)
    assert result.status == 401 and ids == []


def test_wildcard_host_is_probed_on_loopback(server):
    assert http_client.get("http://0.0.0.0:%d/health" % server.port, 2).status == 200


def test_refused():
    assert http_client.get("http://127.0.0.1:%d/health" % free_port(), 2) == (None, "refused", None)


def test_reset_like_docker_proxy(http_stub):
    http_stub.routes["/health"] = Route(reset=True)
    assert http_client.get(http_stub.url + "/health", 2).error == "reset"


def test_timeout(http_stub):
    http_stub.routes["/health"] = Route(delay=30)    # closing the stub ends the wait
    assert http_client.get(http_stub.url + "/health", 0.2).error == "timeout"


def test_proxy_in_the_environment_is_not_used(server, monkeypatch):
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:%d" % free_port())
    assert http_client.get(server.url + "/health", 2).status == 200


@pytest.mark.parametrize("url, expected", [
    ("http://0.0.0.0:8000/health", "http://127.0.0.1:8000/health"),
    ("http://[::]:8000/health", "http://127.0.0.1:8000/health"),
    ("http://10.0.0.5:8000/health", "http://10.0.0.5:8000/health"),
])
def test_local_url(url, expected):
    assert http_client.local_url(url) == expected


@pytest.mark.parametrize("health, models", [
    ("http://127.0.0.1:8000/health", "http://127.0.0.1:8000/v1/models"),
    ("http://h:9000/prefix/health", "http://h:9000/prefix/v1/models"),
])
def test_models_url_for(health, models):
    assert http_client.models_url_for(health) == models


def test_host_helpers():
    assert http_client.url_host_port("http://127.0.0.1:8123/health") == ("127.0.0.1", 8123)
    assert http_client.url_host_port("https://example.test/health") == ("example.test", 443)
    assert http_client.is_local_host("0.0.0.0") and http_client.is_local_host("::1")
    assert not http_client.is_local_host("10.1.230.172")


def test_model_ids_tolerates_garbage():
    assert http_client.model_ids(b"not json") == []
    assert http_client.model_ids(b'{"data": [{"id": "a"}, {"x": 1}, "b"]}') == ["a"]


def test_prometheus_parsing():
    samples = http_client.parse_metrics(METRICS)
    assert samples["vllm:spec_decode_num_drafts_total"] == [({"engine": "0", "model_name": "tiny"}, 38.0)]
    assert http_client.metric_total(METRICS, "vllm:spec_decode_num_accepted_tokens_per_pos_total") == 7.0
    assert http_client.metric_total(samples, "vllm:spec_decode_num_accepted_tokens_per_pos_total", position="1") == 2.0
    assert http_client.metric_total(METRICS, "vllm:absent_total") == 0.0


def test_a_server_that_drips_its_headers_is_cut_at_the_deadline():
    """Each byte comes within the socket timeout, so only a wall-clock deadline ends the request."""
    import threading
    import time

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    stop = threading.Event()

    def drip():
        conn, _addr = listener.accept()
        with conn:
            for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 200:
                if stop.is_set():
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return
                time.sleep(0.1)

    worker = threading.Thread(target=drip, daemon=True)
    worker.start()
    started = time.monotonic()
    result = http_client.get("http://127.0.0.1:%d/health" % listener.getsockname()[1], timeout=1)
    took = time.monotonic() - started
    stop.set()
    listener.close()
    assert result.error == http_client.TIMEOUT and result.status is None
    assert took < 3, "the probe ran %.1f s past a 1 s deadline" % took
