"""The DFlash filters are module_utils/plan/dflash behind AnsibleFilterError; the cases live in its tests."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.filter.dflash import FilterModule
from ansible_collections.llmops.vllm.plugins.module_utils.plan import dflash

FILTERS = FilterModule().filters()
DOCS = Path(dflash.__file__).resolve().parents[2] / "filter"


def test_filters_are_registered_with_a_doc_each():
    assert set(FILTERS) == {
        "dflash_target_layer_ids",
        "dflash_layer_ids_for_vllm",
        "dflash_drafter_fields",
        "dflash_drafter_config",
        "dflash_plan",
    }
    for name in FILTERS:
        assert yaml.safe_load((DOCS / f"{name}.yml").read_text())["DOCUMENTATION"]["name"] == name


def test_the_filters_return_what_module_utils_returns():
    assert FILTERS["dflash_target_layer_ids"](64, 5, "0.22.0") == [1, 16, 31, 46, 61]
    assert FILTERS["dflash_layer_ids_for_vllm"]([1, 16], "0.20.2") == [2, 17]
    assert FILTERS["dflash_drafter_fields"]({"dflash_config": {"mask_token_id": 3}})["mask_token_id"] == 3
    assert FILTERS["dflash_drafter_config"]({}, [0, 1], 3, 2)["dflash_config"] == {"target_layer_ids": [0, 1], "mask_token_id": 3}


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("dflash_target_layer_ids", (2, 2, "0.20.2"), "dflash_target_layer_ids: vLLM 0.20.2 cannot feed the drafter"),
        ("dflash_target_layer_ids", (64, 5, "latest"), "dflash_target_layer_ids: not a vLLM version: 'latest'"),
        ("dflash_layer_ids_for_vllm", ("1,2", "0.22.0"), "dflash_layer_ids_for_vllm: layer ids must be a list"),
        ("dflash_drafter_fields", (["DFlashDraftModel"],), "dflash_drafter_fields: a drafter config must be a mapping"),
    ],
)
def test_errors_become_filter_errors_naming_the_filter(name, args, message):
    with pytest.raises(AnsibleFilterError, match=message):
        FILTERS[name](*args)


def test_the_plan_filter_takes_the_reads_and_the_settings_by_name():
    target = {"config": {"num_hidden_layers": 2, "hidden_size": 64, "vocab_size": 384}, "files": ["config.json"]}
    checkpoint = {"config": {"num_hidden_layers": 1, "hidden_size": 64, "vocab_size": 384, "dflash_config": {"mask_token_id": 3}},
                  "files": ["config.json", "model.safetensors"], "tensors": {"fc.weight": {"shape": [64, 128]}}}
    result = FILTERS["dflash_plan"](target, checkpoint, vllm_version="0.32.0", config_overrides={"block_size": 4})
    assert (result["problems"], result["layer_ids"], result["links"]) == ([], [0, 1], ["model.safetensors"])
    assert result["config"]["block_size"] == 4
    assert FILTERS["dflash_plan"]({"msg": "gone"}, checkpoint, target_var="vllm_drafter_target_model_src")["problems"] == [
        "vllm_drafter_target_model_src: gone. Point it at the target model directory, the one holding the model's config.json."
    ]
