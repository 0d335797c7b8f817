# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Short HTTP probes of a vLLM server (stdlib urllib), and a Prometheus text parser.

A probe never raises: it returns the HTTP status, or the kind of failure a
poller must tell apart: ``refused`` (nothing listens), ``reset`` (connection
dropped or empty reply, which is what a published Docker port shows while the
backend is down), ``timeout``, ``unreachable``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import re
import signal
import socket
import threading
from collections import namedtuple

from http.client import BadStatusLine, HTTPException, IncompleteRead
from urllib.error import HTTPError, URLError
from urllib.parse import urlsplit, urlunsplit
from urllib.request import ProxyHandler, Request, build_opener

REFUSED, RESET, TIMEOUT, UNREACHABLE = "refused", "reset", "timeout", "unreachable"
MAX_BODY = 1 << 20

ProbeResult = namedtuple("ProbeResult", "status error body")

# Probes go straight to the server: a proxy in the environment must not answer for it.
_OPENER = build_opener(ProxyHandler({}))
# Bind addresses that mean every interface: a client on this host reaches them on loopback.
WILDCARD_HOSTS = ("0.0.0.0", "::", "[::]", "")


def local_url(url):
    """Rewrite a wildcard bind address (0.0.0.0, ::) to 127.0.0.1, which is what a client can reach."""
    parts = urlsplit(url)
    if parts.hostname not in WILDCARD_HOSTS and parts.hostname is not None:
        return url
    netloc = "127.0.0.1" + (":%d" % parts.port if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def url_beside(health_url, path):
    """The URL of ``path`` on the server whose /health is given (same prefix, if any); a URL that already ends
    in ``path`` is returned as it is."""
    parts = urlsplit(health_url)
    if parts.path.endswith(path):
        return health_url
    prefix = parts.path[:-len("/health")] if parts.path.endswith("/health") else parts.path.rstrip("/")
    return urlunsplit((parts.scheme, parts.netloc, prefix + path, "", ""))


def models_url_for(health_url):
    """The /v1/models URL of the server whose /health is given (same prefix, if any)."""
    return url_beside(health_url, "/v1/models")


def url_host_port(url):
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.hostname, port


def is_local_host(host):
    """True for names and addresses that mean this machine (so /proc tells who listens)."""
    if host in WILDCARD_HOSTS or host in (None, "localhost", "ip6-localhost"):
        return True
    return host.startswith("127.") or host == "::1"


def get(url, timeout, headers=None, max_body=MAX_BODY):
    """GET ``url``; return ProbeResult(status, error, body), never raise."""
    return _send(Request(local_url(url), headers=headers or {}), timeout, max_body)


def post_json(url, body, timeout, headers=None, max_body=MAX_BODY):
    """POST ``body`` as JSON to ``url``; return ProbeResult(status, error, body), never raise."""
    headers = dict(headers or {}, **{"Content-Type": "application/json"})
    return _send(Request(local_url(url), data=json.dumps(body).encode(), headers=headers), timeout, max_body)


class _Expired(Exception):
    """The wall-clock deadline of one request passed."""


@contextlib.contextmanager
def _wall_clock(seconds):
    """Raise _Expired in the block once ``seconds`` have passed. A socket's timeout bounds each read, not the
    request: a server that drips its headers a byte at a time would hold a probe for ever. Signals reach the main
    thread only; elsewhere the socket timeouts alone bound it."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer") \
            or signal.getitimer(signal.ITIMER_REAL)[0] > 0:
        yield
        return

    def expire(_signum, _frame):
        raise _Expired()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, max(float(seconds), 0.01))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _send(request, timeout, max_body):
    """The request, all of it (connect, headers, body) within ``timeout`` seconds of wall-clock time."""
    try:
        with _wall_clock(timeout):
            return _exchange(request, timeout, max_body)
    except _Expired:
        return ProbeResult(None, TIMEOUT, None)


def _exchange(request, timeout, max_body):
    try:
        resp = _OPENER.open(request, timeout=timeout)
        try:
            return ProbeResult(resp.status, None, resp.read(max_body))
        finally:
            resp.close()
    except HTTPError as e:
        try:
            body = e.read(max_body)
        except (OSError, HTTPException):
            body = b""
        return ProbeResult(e.code, None, body)
    except URLError as e:
        return ProbeResult(None, _kind(e.reason), None)
    except (OSError, HTTPException, ValueError) as e:
        return ProbeResult(None, _kind(e), None)


def _kind(exc):
    if isinstance(exc, socket.timeout) or getattr(exc, "errno", None) == errno.ETIMEDOUT:
        return TIMEOUT
    if isinstance(exc, str) and "timed out" in exc:
        return TIMEOUT
    if isinstance(exc, ConnectionRefusedError):
        return REFUSED
    if isinstance(exc, (ConnectionResetError, ConnectionAbortedError, BrokenPipeError, BadStatusLine, IncompleteRead)):
        return RESET
    if isinstance(exc, socket.gaierror) or getattr(exc, "errno", None) in (errno.EHOSTUNREACH, errno.ENETUNREACH):
        return UNREACHABLE
    if isinstance(exc, HTTPException):
        return RESET
    return "error: %s" % (exc,)


def model_ids(body):
    """The ``id`` of every card in a /v1/models reply; [] when the body is not that JSON."""
    try:
        data = json.loads(body.decode("utf-8"))
        return [card["id"] for card in data.get("data", []) if isinstance(card, dict) and "id" in card]
    except (ValueError, AttributeError, TypeError, UnicodeDecodeError):
        return []


class HttpProber(object):
    """The two probes a wait needs; an object so tests can hand the waiter a fake."""

    def health(self, url, timeout):
        return get(url, timeout)

    def models(self, url, api_key, timeout):
        """(ProbeResult, ids) for /v1/models; the API key is sent only here, never to /health."""
        headers = {"Authorization": "Bearer %s" % api_key} if api_key else {}
        result = get(url, timeout, headers)
        ids = model_ids(result.body) if result.status == 200 else []
        return result, ids


_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][\w:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")
_LABEL = re.compile(r'(?P<key>[a-zA-Z_]\w*)="(?P<value>(?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """Parse Prometheus text exposition into {name: [(labels dict, float value), ...]}."""
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        try:
            value = float(m.group("value"))
        except ValueError:
            continue
        labels = dict((l.group("key"), l.group("value")) for l in _LABEL.finditer(m.group("labels") or ""))
        samples.setdefault(m.group("name"), []).append((labels, value))
    return samples


def metric_total(text_or_samples, name, **labels):
    """Sum of a metric's samples whose labels include ``labels`` (e.g. vllm:spec_decode_num_drafts_total)."""
    samples = parse_metrics(text_or_samples) if isinstance(text_or_samples, str) else text_or_samples
    total = 0.0
    for sample_labels, value in samples.get(name, ()):
        if all(sample_labels.get(k) == v for k, v in labels.items()):
            total += value
    return total
