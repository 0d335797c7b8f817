"""Fixtures for the integration tests: the real vLLM CPU engine and the tiny models it serves."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ansible_collections.llmops.vllm.tests.helpers.ansible_cli import run_playbook

REPO = Path(__file__).resolve().parents[2]
ENGINE_VERSION = "0.32.0"   # requirements/engine.txt


@pytest.fixture(scope="session")
def engine_python() -> Path:
    venv = os.environ.get("LLMOPS_ENGINE_VENV")
    if not venv or not (Path(venv) / ".complete").exists():
        pytest.fail("LLMOPS_ENGINE_VENV is not a finished engine venv: run the suite with scripts/test.sh")
    return Path(venv) / "bin" / "python"


@pytest.fixture(scope="session")
def vllm_cli() -> Path:
    """The same CLI wrapper the install role puts on CPU hosts."""
    return REPO / "roles" / "vllm_install" / "files" / "vllm_cpu_cli.py"


@pytest.fixture(scope="session")
def tiny_models(engine_python, tmp_path_factory) -> dict[str, Path]:
    """A tiny Qwen3 target and a tiny DFlash drafter whose config the drafter role renders, and the pair that agrees
    on every token (zeroed final norms), rendered the same way."""
    models = os.environ.get("LLMOPS_MODELS")
    if not models or not (Path(models) / ".complete").exists():
        pytest.fail("LLMOPS_MODELS does not hold the tiny models: run the suite with scripts/test.sh")
    root = Path(models)
    work = tmp_path_factory.mktemp("drafter")
    pairs = {"": ("tiny-qwen3", "tiny-qwen3-dflash"), "agree_": ("tiny-qwen3-agree", "tiny-qwen3-agree-dflash")}
    play = [{
        "name": "Render the tiny drafters", "hosts": "localhost", "gather_facts": False,
        "tasks": [{"name": "Render " + drafter, "ansible.builtin.include_role": {"name": "llmops.vllm.vllm_drafter"}, "vars": {
            "vllm_drafter_target_model_dir": str(root / target),
            "vllm_drafter_dir": str(root / drafter),
            "vllm_common_drafter_dir": str(work / drafter),
            "vllm_common_version": ENGINE_VERSION,
        }} for target, drafter in pairs.values()],
    }]
    run = run_playbook(play, timeout=1800)
    assert run.rc == 0, run.report()
    found = {"root": root}
    for prefix, (target, drafter) in pairs.items():
        found[prefix + "target"], found[prefix + "drafter"] = root / target, work / drafter
    return found
