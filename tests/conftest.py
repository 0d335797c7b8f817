"""Make this checkout importable as ``ansible_collections.llmops.vllm``.

The repository root is the collection root, so a symlink farm in a temporary
directory gives Python (and Ansible, through ANSIBLE_COLLECTIONS_PATH) the
``ansible_collections/<namespace>/<name>`` shape without copying anything.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_FARM = Path(tempfile.mkdtemp(prefix="llmops-collections-"))
(_FARM / "ansible_collections" / "llmops").mkdir(parents=True)
(_FARM / "ansible_collections" / "llmops" / "vllm").symlink_to(REPO)
sys.path.insert(0, str(_FARM))

# Ansible run from tests (ansible-playbook, ansible) finds the same checkout.
os.environ["ANSIBLE_COLLECTIONS_PATH"] = os.pathsep.join(
    p for p in (str(_FARM), os.environ.get("ANSIBLE_COLLECTIONS_PATH", "")) if p
)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture
def http_stub():
    """An HttpStub (tests/helpers/http_stub.py) on a free loopback port with no routes yet; closed after the test."""
    from ansible_collections.llmops.vllm.tests.helpers.http_stub import HttpStub   # importable once the farm is on sys.path

    with HttpStub() as stub:
        yield stub


# Each stage's time at the end of the run (lint, unit, integration, each molecule scenario), with the set-up
# scripts/test.sh did before pytest: CI has a budget, and a stage that grows shows here first.
_STAGE_SECONDS: dict[str, float] = defaultdict(float)
# Each stage's budget in minutes (docs/development.md, "Time"), and the wall time's: 45, the most a fresh clone's run
# may take on two cores, where CI stops at 90 and one run differs from the next by up to 35%. molecule default runs
# beside lint, unit and integration: the wall is the set-up, the longer of the two, then molecule fleet. So lint,
# unit and integration share molecule default's 22 minutes (integration's 18 are on one core while molecule default
# has the other: 10 when it ran alone on two).
STAGE_BUDGET_MINUTES = {"set-up (scripts/lib.sh prepare_controller)": 1, "lint": 2, "unit": 1, "integration": 18,
                        "molecule default": 22, "molecule fleet": 22}
WALL_BUDGET_MINUTES = 45
_SESSION_START = time.monotonic()
# The stages that ran beside the others (tests/helpers/molecule_run.py): their time overlaps the others'.
_BESIDE: list[str] = []


def _stage(nodeid: str) -> str:
    path = nodeid.split("::")[0].split("/")
    if path[:2] == ["tests", "molecule"]:
        scenario = re.search(r"\[([\w-]+)\]", nodeid)
        return "molecule " + (scenario.group(1) if scenario else "?")
    return path[1] if path[0] == "tests" and len(path) > 2 else path[0]


def pytest_collection_modifyitems(items):
    """The tests marked quiet run right after the scenario that runs beside the others, while nothing else runs (the
    next scenario starts with its own test); without that scenario, where they were."""
    from ansible_collections.llmops.vllm.tests.helpers import molecule_run

    quiet = [item for item in items if item.get_closest_marker("quiet")]
    rest = [item for item in items if not item.get_closest_marker("quiet")]
    ids = [item.nodeid for item in rest]
    if quiet and molecule_run.BESIDE_TEST in ids:
        at = ids.index(molecule_run.BESIDE_TEST) + 1
        items[:] = rest[:at] + quiet + rest[at:]


def pytest_collection_finish(session):
    """Start the scenario that may run beside the other stages now, if they run too: it would only wait for them."""
    from ansible_collections.llmops.vllm.tests.helpers import molecule_run

    ids = [item.nodeid for item in session.items]
    if molecule_run.BESIDE_TEST in ids and any(not i.startswith("tests/molecule/") for i in ids):
        molecule_run.start(molecule_run.BESIDE)
        _BESIDE.append("molecule " + molecule_run.BESIDE)


def pytest_sessionfinish(session):
    """A scenario started beside the others and not waited for (the session stopped early) is stopped with it."""
    from ansible_collections.llmops.vllm.tests.helpers import molecule_run

    molecule_run.stop_all()


def pytest_runtest_logreport(report):
    # A scenario's test reports its own time, from its start (which may precede the test) to its end.
    own = dict(report.user_properties).get("stage_seconds") if report.when == "call" else None
    _STAGE_SECONDS[_stage(report.nodeid)] += report.duration if own is None else own


def pytest_terminal_summary(terminalreporter):
    if not _STAGE_SECONDS:
        return
    terminalreporter.section("time per stage")
    rows = []
    prepare = os.environ.get("LLMOPS_PREPARE_SECONDS")
    if prepare and prepare.isdigit():
        rows.append(("set-up (scripts/lib.sh prepare_controller)", float(prepare)))
    order = ["lint", "unit", "integration"]
    rows += sorted(_STAGE_SECONDS.items(), key=lambda item: (order.index(item[0]) if item[0] in order else len(order), item[0]))
    for name, seconds in rows:
        label = name + (" (beside the stages above)" if name in _BESIDE else "")
        terminalreporter.write_line("%-45s %6.0f s  (%d min %02d s)%s" % (
            label, seconds, seconds // 60, seconds % 60, _against_budget(seconds, STAGE_BUDGET_MINUTES.get(name))))
    total = sum(seconds for _name, seconds in rows)
    wall = time.monotonic() - _SESSION_START + (float(prepare) if prepare and prepare.isdigit() else 0)
    # The suite's budget is the wall time: a stage that runs beside others adds to the sum, not to the wait.
    terminalreporter.write_line("%-45s %6.0f s  (%d min %02d s)" % (
        "the stages' own times, summed", total, total // 60, total % 60))
    terminalreporter.write_line("%-45s %6.0f s  (%d min %02d s)%s" % (
        "wall", wall, wall // 60, wall % 60,
        _against_budget(wall, WALL_BUDGET_MINUTES if len(rows) > 1 else None)))


def _against_budget(seconds: float, minutes: float | None) -> str:
    """``  budget 9 min, 1 min 14 s left`` or ``  budget 9 min, OVER by 1 min 14 s``; nothing without a budget."""
    if minutes is None:
        return ""
    left = minutes * 60 - seconds
    return "  budget %d min, %s %d min %02d s" % (minutes, "left" if left >= 0 else "OVER by", abs(left) // 60,
                                                  abs(left) % 60)
