"""The request features a new server is tried on before it takes traffic, against scripted answers."""

from __future__ import annotations

import json

from ansible_collections.llmops.vllm.plugins.module_utils.probe import smoke
from ansible_collections.llmops.vllm.plugins.module_utils.probe.http_client import ProbeResult


def answers(dead_after=None):
    """A post() that answers each feature as a working server does, and 500 once `dead_after` was asked for."""
    sent = []

    def post(url, body, timeout, headers):
        sent.append((url, body, headers))
        if dead_after and any(b.get("logprobs") for _u, b, _h in sent):
            return ProbeResult(500, None, b'{"error": "EngineCore encountered an issue"}')
        if body.get("stream"):
            return ProbeResult(200, None, b'data: {"choices": []}\n\ndata: [DONE]\n\n')
        choice = {"text": "hi", "logprobs": {"token_logprobs": [-0.1]}, "message": {"content": "{}"}}
        return ProbeResult(200, None, json.dumps({"choices": [choice] * body.get("n", 1)}).encode())
    return post, sent


def test_a_working_server_answers_every_feature_and_the_parsers_add_theirs():
    post, sent = answers()
    results = smoke.run("http://127.0.0.1:8000", "m", api_key="k", post=post)
    assert [r["name"] for r in results] == ["logprobs", "several choices", "stop sequences", "streaming",
                                            "structured output"]
    assert all(r["ok"] for r in results), results
    assert all(h == {"Authorization": "Bearer k"} and b["model"] == "m" for _u, b, h in sent)
    names = [r["name"] for r in smoke.run("http://x", "m", tool_parser=True, reasoning_parser=True, post=answers()[0])]
    assert names[-2:] == ["tool calls", "reasoning"]


def test_an_engine_that_dies_on_logprobs_fails_that_feature_and_every_one_after_it():
    results = smoke.run("http://127.0.0.1:8000", "m", post=answers(dead_after="logprobs")[0])
    assert [r["ok"] for r in results] == [False] * 5
    assert "HTTP 500" in results[0]["detail"] and "EngineCore" in results[0]["detail"]


def test_an_answer_without_what_was_asked_fails():
    def post(url, body, timeout, headers):
        return ProbeResult(200, None, b'{"choices": [{"text": "hi"}]}')
    results = {r["name"]: r["ok"] for r in smoke.run("http://x", "m", post=post)}
    assert results == {"logprobs": False, "several choices": False, "stop sequences": True, "streaming": False,
                       "structured output": True}


def test_no_answer_at_all_names_the_kind_of_failure():
    results = smoke.run("http://x", "m", post=lambda url, body, timeout, headers: ProbeResult(None, "refused", None))
    assert results[0]["detail"] == "refused"
