"""Inventory variables no entry point reads are named, with the closest known name (module_utils/plan/variables)."""

from __future__ import annotations

from pathlib import Path

import yaml

from ansible_collections.llmops.vllm.plugins.module_utils.plan.variables import known_names, unknown

ROLES = Path(__file__).resolve().parents[5] / "roles"
SPECS = [yaml.safe_load((path / "meta" / "argument_specs.yml").read_text()) for path in sorted(ROLES.iterdir())]
KNOWN = known_names(SPECS)


def test_a_misspelt_variable_is_named_with_the_closest_known_one():
    (found,) = unknown(["vllm_server_num_speculative_token"], KNOWN)
    assert found.startswith("vllm_server_num_speculative_token is not a variable")
    assert found.endswith("did you mean vllm_server_num_speculative_tokens?")


def test_every_documented_variable_and_published_fact_is_known():
    names = ["vllm_server_api_key", "vllm_common_version", "vllm_frontend_port", "vllm_drafter_target_model_src",
             "vllm_install_wheelhouse", "vllm_deploy_serial", "vllm_server_backend", "vllm_frontend_door"]
    assert unknown([name for name in names if name in KNOWN], KNOWN) == []
    assert len(KNOWN) > 100


def test_other_prefixes_and_ignored_names_are_left_alone():
    assert unknown(["vllm_demo_cpu_cores", "vllm_models_dir", "other"], KNOWN) == []
    assert unknown(["vllm_install_version"], KNOWN, ignored=["vllm_install_version"]) == []


def test_a_name_far_from_any_gets_no_guess():
    (found,) = unknown(["vllm_server_zzzzzzzzzzzzzzzzzzzz"], KNOWN)
    assert "did you mean" not in found
