"""Each molecule scenario as one test, so the whole suite closes with one summary."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ansible_collections.llmops.vllm.tests.ansible_cli import ansible_env

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = sorted(p.parent.name for p in (REPO / "molecule").glob("*/molecule.yml"))


@pytest.mark.docker
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_molecule_scenario(scenario, tmp_path):
    log = tmp_path / f"molecule-{scenario}.log"
    with log.open("w") as fh:
        proc = subprocess.run(["molecule", "test", "-s", scenario], cwd=REPO, stdout=fh,
                              stderr=subprocess.STDOUT, timeout=2400, check=False, env=ansible_env())
    text = log.read_text()
    (REPO / ".build").mkdir(exist_ok=True)
    (REPO / ".build" / log.name).write_text(text)
    assert proc.returncode == 0, text[-12000:]
