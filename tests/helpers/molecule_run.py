"""One `molecule test` of a scenario, started when asked and waited for by the scenario's test.

The default scenario serves one engine, pinned to the first core (molecule/default/host_vars); the integration
tests' engines are pinned to the last core (tests/helpers/vllm_serve.py). So the default scenario can run beside the
lint, unit and integration tests, started as soon as the session has collected them (tests/conftest.py), where it
would otherwise wait for them to end; the fleet scenario, one engine on each core, runs alone after them. The tests
marked quiet, which measure speed, run between the two, when nothing else runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from ansible_collections.llmops.vllm.tests.helpers.ansible_cli import REPO, ansible_env

# The scenario that may run beside the other stages, and its test.
BESIDE = "default"
BESIDE_TEST = "tests/molecule/test_scenarios.py::test_molecule_scenario[%s]" % BESIDE
# The most any scenario may take: one past it is hung, not slow. Two-core runs vary by up to 35% and CI runs slower
# than the figures in docs/figures.md, so the limit stands well above the longest scenario's budget; CI's own limit
# (90 minutes for the whole run) is the one that must never be reached.
TIMEOUT = 3000


class ScenarioRun:
    """``molecule test -s <scenario>`` in its own process, logging to .build/molecule-<scenario>.log.

    Each scenario's ephemeral directory is .build/molecule/<scenario> in the checkout; what a scenario records (the
    fleet probe's requests, each deploy's output and report) is in .build/molecule/<scenario>-record after the run,
    for bench/bench_fleet.py, beside the scenario's log.
    """

    def __init__(self, scenario: str):
        self.scenario = scenario
        self.ephemeral = REPO / ".build" / "molecule" / scenario
        self.ephemeral.mkdir(parents=True, exist_ok=True)
        self.log = REPO / ".build" / f"molecule-{scenario}.log"
        self.started = time.monotonic()
        with self.log.open("w") as fh:
            self._proc = subprocess.Popen(["molecule", "test", "-s", scenario], cwd=REPO, stdout=fh,
                                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          env=ansible_env({"MOLECULE_EPHEMERAL_DIRECTORY": str(self.ephemeral)}))

    def wait(self) -> tuple[int, str, float]:
        """Its exit status, its log and its seconds from start to end; a run past TIMEOUT is stopped."""
        try:
            rc = self._proc.wait(max(1.0, TIMEOUT - (time.monotonic() - self.started)))
        except subprocess.TimeoutExpired:
            self._proc.kill()
            rc = self._proc.wait()
        finally:
            self._stop_probe()
        return rc, self.log.read_text(), time.monotonic() - self.started

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(60)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._stop_probe()

    def _stop_probe(self) -> None:
        """End the fleet probe if a failed run left it going: the process the scenario started, by its PID."""
        pid_file = self.ephemeral.with_name(self.ephemeral.name + "-record") / "probe.pid"
        if not pid_file.exists():
            return
        pid = int(pid_file.read_text().split()[0])
        try:
            if b"probe.py" in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(pid, signal.SIGTERM)
        except (FileNotFoundError, ProcessLookupError):
            pass


_STARTED: dict[str, ScenarioRun] = {}


def start(scenario: str) -> ScenarioRun:
    """Start the scenario now, once."""
    if scenario not in _STARTED:
        _STARTED[scenario] = ScenarioRun(scenario)
    return _STARTED[scenario]


def stop_all() -> None:
    """Stop every scenario still running (a session that ended before it waited for one)."""
    for run in _STARTED.values():
        run.stop()
