"""Each molecule scenario as one test, so the whole suite closes with one summary.

A scenario the session started already, beside the other stages (tests/helpers/molecule_run.py), is waited for here;
the others start here. The stage time of a scenario is its own, from its start to its end (tests/conftest.py).
"""

from __future__ import annotations

import pytest

from ansible_collections.llmops.vllm.tests.helpers import molecule_run
from ansible_collections.llmops.vllm.tests.helpers.ansible_cli import REPO

SCENARIOS = sorted(p.parent.name for p in (REPO / "molecule").glob("*/molecule.yml"))


@pytest.mark.docker
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_molecule_scenario(scenario, record_property):
    rc, text, seconds = molecule_run.start(scenario).wait()
    record_property("stage_seconds", seconds)
    assert rc == 0, text[-12000:]
