# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Wait until a vLLM server has no request in flight, read from its own /metrics.

vLLM's gauges ``vllm:num_requests_running`` and ``vllm:num_requests_waiting`` (one sample per
model and engine) count what a stop would abort or, with ``--shutdown-timeout``, make it finish
first. A rollout stops a host only when their sum reaches 0 (the front door no longer sends it
work) or the time given has passed. The clock, the sleep and the fetch are injected, so the
wait is tested without a server or real time.
"""

from __future__ import annotations

import time

from ansible_collections.llmops.vllm.plugins.module_utils.probe import http_client

IN_FLIGHT = ("vllm:num_requests_running", "vllm:num_requests_waiting")


def in_flight(metrics_text):
    """Requests running or waiting, over every model and engine; None when the gauges are not there."""
    samples = http_client.parse_metrics(metrics_text)
    if not any(name in samples for name in IN_FLIGHT):
        return None
    return int(sum(http_client.metric_total(samples, name) for name in IN_FLIGHT))


def metrics_url_for(url):
    """The /metrics URL of a server, given it or the server's /health URL."""
    return http_client.url_beside(url, "/metrics")


def fetch_in_flight(url, timeout, headers=None):
    """(requests in flight, None), or (None, why) when /metrics cannot be read."""
    result = http_client.get(url, timeout, headers)
    if result.status != 200:
        return None, result.error or "HTTP %s" % result.status
    count = in_flight(result.body.decode("utf-8", "replace"))
    return count, None if count is not None else "no vllm:num_requests_* gauges in /metrics"


def drain(url, timeout, interval=0.5, clock=time.monotonic, sleep=time.sleep, fetch=fetch_in_flight):
    """Poll ``url`` (a /metrics URL) until nothing is in flight or ``timeout`` seconds passed.

    Returns a dict: ``status`` (``drained``, ``timeout`` or ``unreachable``, the last when the first read
    fails: a server that does not answer has nothing to drain that a wait could save), ``in_flight_at_start``,
    ``in_flight`` (at the end), ``most`` (the largest count seen), ``elapsed`` and ``detail``.
    """
    start = clock()
    first, error = fetch(url, min(5.0, max(timeout, 0.1)))
    if first is None:
        return {"status": "unreachable", "in_flight_at_start": 0, "in_flight": 0, "most": 0,
                "elapsed": round(clock() - start, 3), "detail": "%s: %s" % (url, error)}
    count, most = first, first
    while count > 0:
        left = timeout - (clock() - start)
        if left <= 0:
            return {"status": "timeout", "in_flight_at_start": first, "in_flight": count, "most": most,
                    "elapsed": round(clock() - start, 3),
                    "detail": "%d request(s) still in flight after %s s" % (count, timeout)}
        sleep(min(interval, left))
        seen, error = fetch(url, min(5.0, max(left, 0.1)))
        # A read that fails mid-drain (the server stopping, a blip) keeps the last count; the clock decides.
        if seen is not None:
            count, most = seen, max(most, seen)
    return {"status": "drained", "in_flight_at_start": first, "in_flight": 0, "most": most,
            "elapsed": round(clock() - start, 3),
            "detail": "nothing in flight" if first == 0 else "%d request(s) finished" % most}
