"""The liveness probe's request: what the watchdog and HAProxy's health check send."""

from __future__ import annotations

import json

from ansible_collections.llmops.vllm.plugins.module_utils.probe import liveness


def test_the_probe_is_a_one_token_greedy_completion():
    probe = liveness.request("qwen3.6-27b")
    assert (probe["method"], probe["path"]) == ("POST", "/v1/completions")
    assert json.loads(probe["body"]) == {"model": "qwen3.6-27b", "prompt": "ping", "max_tokens": 1, "temperature": 0}


def test_the_body_goes_between_single_quotes_in_haproxy_cfg_as_it_is():
    model = "it's \u00e9t\u00e9 50% $HOME #1"
    body = liveness.request(model)["body"]
    assert "'" not in body and body.isascii() and "\n" not in body
    assert json.loads(body)["model"] == model
