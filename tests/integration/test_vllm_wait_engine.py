"""vllm_wait, run through Ansible, against the real vLLM CPU engine serving the tiny models."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import time

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.plan import memory
from ansible_collections.llmops.vllm.plugins.module_utils.probe.http_client import metric_total
from ansible_collections.llmops.vllm.tests.helpers.ansible_cli import run_module
from ansible_collections.llmops.vllm.tests.helpers.vllm_serve import SERVED, VllmServe, free_port, http, wait_args

pytestmark = pytest.mark.engine


def test_real_start_is_ready_with_dflash_then_engine_death_is_reported(
        engine_python, vllm_cli, tiny_models, tmp_path):
    log = tmp_path / "vllm.log"
    # A previous run's success lines: before the offset, so they must not count.
    log.write_text("(APIServer pid=1) INFO 01-01 00:00:00 [entry.py:140] Starting vLLM server on http://127.0.0.1:8000\n"
                   "INFO:     Application startup complete.\n")
    offset = log.stat().st_size
    server = VllmServe(engine_python, vllm_cli, log, tiny_models["target"], tiny_models["drafter"], free_port())
    server.start()
    try:
        res = run_module("llmops.vllm.vllm_wait", wait_args(server, offset)).result()
        assert res["status"] == "ready", res.get("msg")
        assert res["reason"] == "ready" and res["changed"] is False
        assert res["health_status"] == 200 and SERVED in res["models"]
        assert "app_startup_complete" in res["phases"]

        completion = json.loads(http(server.port, "/v1/completions", {
            "model": SERVED, "prompt": "Speculative decoding", "max_tokens": 24, "temperature": 0, "ignore_eos": True}))
        assert completion["usage"]["completion_tokens"] == 24
        assert metric_total(http(server.port, "/metrics"), "vllm:spec_decode_num_drafts_total") > 0
        assert_the_memory_check_agrees_with_the_engine(log, tiny_models)
        # Every request feature the roll tries before traffic (the first logprobs request compiles a CPU kernel).
        smoke = run_module("llmops.vllm.vllm_smoke", {"url": wait_args(server, 0)["health_url"], "model": SERVED}).result()
        assert not smoke.get("failed") and smoke["failed_features"] == [], smoke
        assert [f["name"] for f in smoke["features"]] == ["logprobs", "several choices", "stop sequences", "streaming",
                                                          "structured output"]

        offset = log.stat().st_size
        os.kill(server.engine_core_pid(), signal.SIGKILL)
        killed_at = time.monotonic()
        res = run_module("llmops.vllm.vllm_wait", wait_args(server, offset, timeout=60)).result()
        assert res["failed"] and res["status"] == "failed", res
        assert res["reason"] == "engine_died", res["msg"]
        assert time.monotonic() - killed_at < 30
    finally:
        server.stop()


def assert_the_memory_check_agrees_with_the_engine(log, tiny_models):
    """The preflight's bytes a token (module_utils/plan/memory, from what vllm_model_info reads) against the cache
    the engine sized from its own KV cache spec: VLLM_CPU_KVCACHE_SPACE=1 GiB over the tokens it logs, within 5%."""
    target, drafter = (run_module("llmops.vllm.vllm_model_info", {"path": str(tiny_models[name])}).result()
                       for name in ("target", "drafter"))
    figures = memory.fit(memory.Inputs("cpu", 1, 256, 0.9, memory.GIB, target["config"], target["weight_bytes"],
                                       drafter["config"], drafter["weight_bytes"], dtype="float32"))["figures"]
    tokens = int(re.search(r"KV cache size: ([0-9,]+) tokens", log.read_text()).group(1).replace(",", ""))
    assert abs(figures["kv_bytes_per_token"] - memory.GIB / tokens) / (memory.GIB / tokens) < 0.05, (figures, tokens)
    assert target["weight_bytes"] and drafter["weight_bytes"]


FAILURES = {
    # case: (model, extra args, expected reason, detail substring)
    "model-missing": ("missing", [], "model_not_found", "missing"),
    "bogus-speculative-key": (None, ["--speculative-config", json.dumps(
        {"method": "dflash", "model": "@drafter", "num_speculative_tokens": 4, "bogus_key": 1})],
        "config_error", "bogus_key"),
    "unknown-flag": (None, ["--no-such-flag"], "config_error", "--no-such-flag"),
    # A KV cache the machine cannot hold, found by the engine as it allocates it (the preflight cannot know what a
    # CPU host has free), named with what to lower.
    "kv-cache-too-large": (None, ["--kv-cache-memory-bytes", str(200 * 2**30)], "out_of_memory", ""),
}


@pytest.mark.parametrize("case", sorted(FAILURES))
def test_real_start_failure_is_classified(case, engine_python, vllm_cli, tiny_models, tmp_path):
    model, extra, reason, detail = FAILURES[case]
    model_path = tiny_models["root"] / model if model else tiny_models["target"]
    extra = [a.replace("@drafter", str(tiny_models["drafter"])) for a in extra]
    drafter = None if any(a == "--speculative-config" for a in extra) else tiny_models["drafter"]
    server = VllmServe(engine_python, vllm_cli, tmp_path / "vllm.log", model_path, drafter, free_port(), extra)
    server.start()
    try:
        res = run_module("llmops.vllm.vllm_wait", wait_args(server, 0, timeout=180)).result()
    finally:
        server.stop()
    assert res["status"] == "failed", res.get("msg")
    assert res["reason"] == reason, res["msg"]
    assert detail in res["detail"] + res["root_cause_line"], res
    assert res["hint"] and res["log_tail"]
    if reason == "out_of_memory":
        assert "kv-cache-memory-bytes" in res["hint"], res["hint"]


def test_real_port_in_use_is_reported(engine_python, vllm_cli, tiny_models, tmp_path):
    port = free_port()
    with socket.socket() as occupant:
        occupant.bind(("127.0.0.1", port))
        occupant.listen(1)
        server = VllmServe(engine_python, vllm_cli, tmp_path / "vllm.log", tiny_models["target"],
                           tiny_models["drafter"], port)
        server.start()
        try:
            res = run_module("llmops.vllm.vllm_wait", wait_args(server, 0, timeout=180)).result()
        finally:
            server.stop()
    assert res["status"] == "failed" and res["reason"] == "port_in_use", res.get("msg")
