from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.filter.dflash import (
    FilterModule,
    dflash_drafter_config,
    dflash_drafter_fields,
    dflash_layer_ids_for_vllm,
    dflash_target_layer_ids,
    reference_layer_ids,
    vllm_version_tuple,
)

READS_OUTPUT = "0.22.0"  # first vLLM that reads ids as trained


@pytest.mark.parametrize(
    ("layers", "count", "expected"),
    [
        # Published checkpoints (z-lab and speculators configs).
        (36, 5, [1, 9, 17, 25, 33]),
        (64, 5, [1, 16, 31, 46, 61]),
        (40, 8, [1, 6, 11, 16, 22, 27, 32, 37]),
        (48, 8, [1, 7, 14, 20, 26, 32, 39, 45]),
        # One draft layer takes the middle layer.
        (64, 1, [32]),
        (2, 1, [1]),
        # Too shallow for layers 1..n-3: spread over every layer.
        (2, 2, [0, 1]),
        (4, 3, [0, 2, 3]),
        (3, 3, [0, 1, 2]),
        # Just deep enough for the reference range.
        (6, 3, [1, 2, 3]),
    ],
)
def test_reference_spread(layers, count, expected):
    assert reference_layer_ids(layers, count) == expected
    assert dflash_target_layer_ids(layers, count, READS_OUTPUT) == expected


def test_ids_use_bankers_rounding():
    # 7 layers, 3 ids: the middle id is 1 + 3/2 = 2.5, which Python rounds to the even 2 (half-up would give 3).
    assert reference_layer_ids(7, 3) == [1, 2, 4]


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("0.20.2", [2, 17, 32, 47, 62]),
        ("0.20.1rc1", [2, 17, 32, 47, 62]),
        ("0.21.0", [2, 17, 32, 47, 62]),
        ("0.21.9.dev102+g1234", [2, 17, 32, 47, 62]),
        ("0.22.0", [1, 16, 31, 46, 61]),
        ("0.22.0rc1", [1, 16, 31, 46, 61]),
        ("0.32.0", [1, 16, 31, 46, 61]),
        ("v1.0", [1, 16, 31, 46, 61]),
    ],
)
def test_versions_before_0_22_get_the_next_layer(version, expected):
    assert dflash_target_layer_ids(64, 5, version) == expected


def test_default_version_is_the_old_reading():
    assert dflash_target_layer_ids(64, 5) == [2, 17, 32, 47, 62]


def test_old_vllm_cannot_read_the_last_layer():
    # The tiny spread needs layer 1 of 2; vLLM 0.20 would need index 2, which it never captures.
    with pytest.raises(AnsibleFilterError, match="last decoder layer"):
        dflash_target_layer_ids(2, 2, "0.20.2")
    assert dflash_target_layer_ids(5, 2, "0.20.2") == [2, 3]


@pytest.mark.parametrize(
    ("layers", "count", "message"),
    [
        (2, 3, "cannot pick 3 distinct layer ids from a target with 2"),
        (0, 1, "num_target_layers must be a positive integer"),
        (4, 0, "number of layer ids must be a positive integer"),
        (True, 1, "num_target_layers must be a positive integer"),
        ("36", 5, "num_target_layers must be a positive integer"),
    ],
)
def test_impossible_spreads_fail(layers, count, message):
    with pytest.raises(AnsibleFilterError, match=message):
        dflash_target_layer_ids(layers, count, READS_OUTPUT)


def test_bad_version_fails():
    with pytest.raises(AnsibleFilterError, match="not a vLLM version: 'latest'"):
        dflash_target_layer_ids(64, 5, "latest")


@pytest.mark.parametrize(
    ("version", "expected"),
    [("0.20.2", (0, 20, 2)), ("0.22", (0, 22, 0)), ("0.20.1rc1", (0, 20, 1)), ("v0.32.0+cpu", (0, 32, 0)), (0.22, (0, 22, 0))],
)
def test_version_tuple(version, expected):
    assert vllm_version_tuple(version) == expected


def test_checkpoint_ids_are_shifted_only_for_old_vllm():
    assert dflash_layer_ids_for_vllm([1, 16, 31, 46, 61], "0.20.2") == [2, 17, 32, 47, 62]
    assert dflash_layer_ids_for_vllm([1, 16, 31, 46, 61], "0.22.0") == [1, 16, 31, 46, 61]
    with pytest.raises(AnsibleFilterError, match="must be a list"):
        dflash_layer_ids_for_vllm("1,2", "0.22.0")


NATIVE = {
    "architectures": ["DFlashDraftModel"],
    "model_type": "qwen3",
    "num_hidden_layers": 5,
    "hidden_size": 5120,
    "vocab_size": 248320,
    "num_target_layers": 64,
    "dflash_config": {"mask_token_id": 248070, "target_layer_ids": [1, 16, 31, 46, 61]},
}

SPECULATORS = {
    "architectures": ["DFlashDraftModel"],
    "speculators_model_type": "dflash",
    "aux_hidden_state_layer_ids": [1, 6, 11, 16, 22, 27, 32, 37],
    "mask_token_id": 248077,
    "draft_vocab_size": 24576,
    "target_hidden_size": 2048,
    "transformer_layer_config": {"num_hidden_layers": 1, "hidden_size": 2048, "vocab_size": 248320},
}


def test_fields_of_the_native_format():
    assert dflash_drafter_fields(NATIVE) == {
        "format": "dflash",
        "architectures": ["DFlashDraftModel"],
        "num_hidden_layers": 5,
        "hidden_size": 5120,
        "vocab_size": 248320,
        "target_hidden_size": None,
        "draft_vocab_size": None,
        "mask_token_id": 248070,
        "target_layer_ids": [1, 16, 31, 46, 61],
    }


def test_fields_of_the_speculators_format():
    fields = dflash_drafter_fields(SPECULATORS)
    assert fields["format"] == "speculators"
    assert (fields["num_hidden_layers"], fields["hidden_size"], fields["vocab_size"]) == (1, 2048, 248320)
    assert (fields["target_hidden_size"], fields["draft_vocab_size"], fields["mask_token_id"]) == (2048, 24576, 248077)
    assert fields["target_layer_ids"] == [1, 6, 11, 16, 22, 27, 32, 37]


def test_fields_follow_vllm_precedence_for_layer_ids():
    config = {**NATIVE, "eagle_aux_hidden_state_layer_ids": [3, 4]}
    assert dflash_drafter_fields(config)["target_layer_ids"] == [3, 4]
    aliased = {**NATIVE, "dflash_config": {"layer_ids": [5, 6]}}
    assert dflash_drafter_fields(aliased)["target_layer_ids"] == [5, 6]
    assert dflash_drafter_fields({"dflash_config": {}})["target_layer_ids"] is None


def test_fields_reject_non_mappings():
    with pytest.raises(AnsibleFilterError, match="must be a mapping"):
        dflash_drafter_fields(["DFlashDraftModel"])


def test_native_config_gets_ids_mask_and_layer_count_without_touching_the_input():
    checkpoint = {"num_hidden_layers": 1, "dflash_config": {"mask_token_id": 3}}
    rendered = dflash_drafter_config(checkpoint, [0, 1], None, 2)
    assert rendered == {
        "architectures": ["DFlashDraftModel"],
        "num_hidden_layers": 1,
        "num_target_layers": 2,
        "dflash_config": {"mask_token_id": 3, "target_layer_ids": [0, 1]},
    }
    assert checkpoint == {"num_hidden_layers": 1, "dflash_config": {"mask_token_id": 3}}


def test_native_config_overrides_mask_and_every_id_key():
    checkpoint = {**NATIVE, "eagle_aux_hidden_state_layer_ids": [1, 2], "dflash_config": {"layer_ids": [1], "mask_token_id": 9}}
    rendered = dflash_drafter_config(checkpoint, [2, 17], 7, 64)
    assert rendered["dflash_config"] == {"layer_ids": [2, 17], "target_layer_ids": [2, 17], "mask_token_id": 7}
    assert rendered["eagle_aux_hidden_state_layer_ids"] == [2, 17]
    assert dflash_drafter_fields(rendered)["target_layer_ids"] == [2, 17]


def test_existing_architectures_are_kept_for_the_caller_to_check():
    rendered = dflash_drafter_config({**NATIVE, "architectures": ["DFlash2DraftModel"]}, [1], None, 64)
    assert rendered["architectures"] == ["DFlash2DraftModel"]


def test_speculators_config_keeps_its_own_keys():
    rendered = dflash_drafter_config(SPECULATORS, [2, 7], 5, 40)
    assert rendered["aux_hidden_state_layer_ids"] == [2, 7]
    assert rendered["mask_token_id"] == 5
    assert "dflash_config" not in rendered and "num_target_layers" not in rendered
    assert dflash_drafter_fields(rendered)["target_layer_ids"] == [2, 7]


def test_filters_are_registered():
    assert set(FilterModule().filters()) == {
        "dflash_target_layer_ids",
        "dflash_layer_ids_for_vllm",
        "dflash_drafter_fields",
        "dflash_drafter_config",
    }
