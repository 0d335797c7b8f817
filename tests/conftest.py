"""Make this checkout importable as ``ansible_collections.llmops.vllm``.

The repository root is the collection root, so a symlink farm in a temporary
directory gives Python (and Ansible, through ANSIBLE_COLLECTIONS_PATH) the
``ansible_collections/<namespace>/<name>`` shape without copying anything.
"""

from __future__ import annotations

import os
import sys
import tempfile
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
    """An HttpStub (tests/fixtures/http_stub.py) on a free loopback port with no routes yet; closed after the test."""
    from ansible_collections.llmops.vllm.tests.fixtures.http_stub import HttpStub   # importable once the farm is on sys.path

    with HttpStub() as stub:
        yield stub
