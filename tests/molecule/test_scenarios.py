"""Each molecule scenario as one test, so the whole suite closes with one summary.

Each scenario's ephemeral directory is .build/molecule/<scenario> in the checkout; what a scenario records (the
fleet probe's requests, each deploy's output and report) is in .build/molecule/<scenario>-record after the run,
for bench/bench_fleet.py, beside the scenario's log.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from ansible_collections.llmops.vllm.tests.helpers.ansible_cli import ansible_env

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = sorted(p.parent.name for p in (REPO / "molecule").glob("*/molecule.yml"))


def stop_probe(ephemeral: Path) -> None:
    """End the fleet probe if a failed run left it going: the process the scenario started, by its PID."""
    pid_file = ephemeral.with_name(ephemeral.name + "-record") / "probe.pid"
    if not pid_file.exists():
        return
    pid = int(pid_file.read_text().split()[0])
    try:
        if b"probe.py" in Path(f"/proc/{pid}/cmdline").read_bytes():
            os.kill(pid, signal.SIGTERM)
    except (FileNotFoundError, ProcessLookupError):
        pass


@pytest.mark.docker
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_molecule_scenario(scenario):
    ephemeral = REPO / ".build" / "molecule" / scenario
    ephemeral.mkdir(parents=True, exist_ok=True)
    log = REPO / ".build" / f"molecule-{scenario}.log"
    try:
        with log.open("w") as fh:
            proc = subprocess.run(["molecule", "test", "-s", scenario], cwd=REPO, stdout=fh, stderr=subprocess.STDOUT,
                                  timeout=2400, check=False,
                                  env=ansible_env({"MOLECULE_EPHEMERAL_DIRECTORY": str(ephemeral)}))
    finally:
        stop_probe(ephemeral)
    text = log.read_text()
    assert proc.returncode == 0, text[-12000:]
