"""The DFlash layer-id facts, the two config formats, and every check the drafter role makes, each way."""

from __future__ import annotations

import copy

import pytest
from ansible.plugins.filter.core import combine

from ansible_collections.llmops.vllm.plugins.module_utils.plan.dflash import (
    DFlashError,
    dflash_drafter_config,
    dflash_drafter_fields,
    dflash_layer_ids_for_vllm,
    dflash_target_layer_ids,
    merge_recursive,
    path_problems,
    plan,
    reference_layer_ids,
    vllm_version_tuple,
)
from ansible_collections.llmops.vllm.tests.fixtures.models.tiny_checkpoints import (
    MASK_TOKEN_ID,
    TARGET_SIZES,
    drafter_config,
    target_config,
)

READS_OUTPUT = "0.22.0"  # first vLLM that reads ids as trained
HIDDEN = TARGET_SIZES["hidden_size"]
VOCAB = TARGET_SIZES["vocab_size"]


# The layer-id spread and the vLLM versions.


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
    with pytest.raises(DFlashError, match="last decoder layer"):
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
    with pytest.raises(DFlashError, match=message):
        dflash_target_layer_ids(layers, count, READS_OUTPUT)


def test_errors_are_value_errors():
    with pytest.raises(ValueError, match="not a vLLM version: 'latest'"):
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
    with pytest.raises(DFlashError, match="must be a list"):
        dflash_layer_ids_for_vllm("1,2", "0.22.0")


# The two drafter config formats.


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


def test_fields_reject_non_mappings_and_ignore_malformed_sections():
    with pytest.raises(DFlashError, match="must be a mapping"):
        dflash_drafter_fields(["DFlashDraftModel"])
    fields = dflash_drafter_fields({"dflash_config": [1], "transformer_layer_config": "x"})
    assert fields["num_hidden_layers"] is None and fields["target_layer_ids"] is None


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


# Overrides merge as Ansible's combine(recursive=true) does.


@pytest.mark.parametrize(
    ("base", "overrides"),
    [
        ({"a": 1, "d": {"x": 1, "y": {"z": 1}}}, {"d": {"y": {"w": 2}}, "b": 2}),
        ({"d": {"x": 1}}, {"d": 5}),  # a scalar replaces a mapping
        ({"d": 5}, {"d": {"x": 1}}),  # and a mapping a scalar
        ({"l": [1, 2], "d": {"l": [1]}}, {"l": [3], "d": {"l": []}}),  # lists are replaced, not merged
        ({"a": 1, "d": {"x": 1}}, {"a": None, "d": {"x": None}}),  # None writes null, it removes nothing
        ({}, {"a": {"b": 1}}),
        ({"a": {"b": 1}}, {}),
    ],
)
def test_overrides_merge_as_ansible_combine_recursive(base, overrides):
    untouched = copy.deepcopy((base, overrides))
    assert merge_recursive(base, overrides) == combine(base, overrides, recursive=True)
    assert (base, overrides) == untouched


# The plan: the tiny target and drafter of the integration tests, as vllm_model_info returns them.


PATHS = {
    "vllm_drafter_target_model_dir": "/srv/models/tiny-qwen3",
    "vllm_drafter_dir": "/srv/models/tiny-qwen3-dflash",
    "vllm_common_drafter_dir": "/opt/vllm/drafters/tiny-qwen3-dflash",
}
KNOWN_VARIABLES = {
    "vllm_drafter_target_model_dir", "vllm_drafter_target_model_src", "vllm_drafter_dir", "vllm_drafter_src", "vllm_common_drafter_dir",
    "vllm_drafter_target_layer_ids", "vllm_drafter_mask_token_id", "vllm_common_version", "vllm_drafter_config_overrides",
}


def target_read(config=None, **changes):
    """The target's vllm_model_info result (read_weights=false); a change of None removes the key."""
    config = dict(target_config() if config is None else config)
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    return {"changed": False, "config": config, "files": ["config.json", "model.safetensors", "tokenizer_config.json"],
            "weight_files": [], "tensors": {}, "missing_tensors": []}


def checkpoint_read(config=None, fc_width=2 * HIDDEN, files=("config.json", "model.safetensors"), **changes):
    """The drafter's vllm_model_info result with fc.weight asked for; fc_width 0 means weights not in safetensors."""
    config = dict(drafter_config(target_config()) if config is None else config)
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    tensors = {"fc.weight": {"dtype": "F32", "shape": [HIDDEN, fc_width], "file": "model.safetensors"}} if fc_width else {}
    return {"changed": False, "config": config, "files": list(files), "weight_files": ["model.safetensors"] if fc_width else [],
            "tensors": tensors, "missing_tensors": [] if fc_width else ["fc.weight"]}


def run(target=None, checkpoint=None, **settings):
    settings.setdefault("paths", PATHS)
    settings.setdefault("vllm_version", "0.32.0")
    result = plan(target_read() if target is None else target, checkpoint_read() if checkpoint is None else checkpoint, **settings)
    for problem in result["problems"]:
        assert problem.split(":")[0].split(" ")[0].split(".")[0] in KNOWN_VARIABLES, problem
    return result


def only_problem(result):
    assert len(result["problems"]) == 1, result["problems"]
    return result["problems"][0]


def test_the_tiny_pair_passes_with_ids_from_the_fc_width():
    result = run()

    assert result["problems"] == []
    # Two ids from fc.weight's width (2 x 64) on a 2-layer target, as vLLM >= 0.22 reads them.
    assert (result["layer_ids"], result["origin"]) == ([0, 1], "computed for vLLM 0.32.0")
    config = result["config"]
    assert config["dflash_config"] == {"mask_token_id": MASK_TOKEN_ID, "target_layer_ids": [0, 1]}
    assert config["num_target_layers"] == 2
    original = drafter_config(target_config())
    assert {key: value for key, value in config.items() if key not in ("dflash_config", "num_target_layers")} == {
        key: value for key, value in original.items() if key != "dflash_config"
    }
    assert result["fields"]["target_layer_ids"] == [0, 1] and result["fields"]["format"] == "dflash"
    assert result["links"] == ["model.safetensors"]


def test_links_are_every_checkpoint_file_but_its_config():
    files = ["config.json", "model-00001-of-00002.safetensors", "model.safetensors.index.json", "tokenizer.json"]
    assert run(checkpoint=checkpoint_read(files=files))["links"] == files[1:]


def test_the_inputs_are_left_alone():
    target, checkpoint = target_read(), checkpoint_read()
    overrides = {"dflash_config": {"block_size": 4}}
    untouched = copy.deepcopy((target, checkpoint, overrides))
    result = run(target, checkpoint, config_overrides=overrides)
    result["config"]["dflash_config"]["block_size"] = 8
    assert (target, checkpoint, overrides) == untouched


# Paths.


@pytest.mark.parametrize("var", sorted(PATHS))
@pytest.mark.parametrize("value", ["", "models/x", "~/x"])
def test_every_path_must_be_absolute(var, value):
    problems = path_problems({**PATHS, var: value})
    assert problems == [f"{var} must be the absolute path of a directory on the host, got '{value}'."]


@pytest.mark.parametrize(
    ("model_var", "render_dir"),
    [
        ("vllm_drafter_dir", "/srv/models/tiny-qwen3-dflash/vllm"),
        ("vllm_drafter_dir", "/srv/models/tiny-qwen3-dflash"),
        ("vllm_drafter_dir", "/srv/models/tiny-qwen3-dflash/"),
        ("vllm_drafter_dir", "/srv/models//tiny-qwen3-dflash/./vllm"),
        ("vllm_drafter_target_model_dir", "/srv/models/tiny-qwen3/drafter"),
    ],
)
def test_the_render_dir_must_lie_outside_the_model_dirs(model_var, render_dir):
    problem = only_problem(run(paths={**PATHS, "vllm_common_drafter_dir": render_dir}))
    assert problem == (
        f"vllm_common_drafter_dir ({render_dir}) lies inside {model_var} ({PATHS[model_var]}), "
        "whose config.json must stay as it is. Choose a directory of its own."
    )


@pytest.mark.parametrize("render_dir", ["/srv/models/tiny-qwen3-dflash-vllm", "/opt/vllm/drafters/x"])
def test_a_render_dir_beside_the_models_is_fine(render_dir):
    assert run(paths={**PATHS, "vllm_common_drafter_dir": render_dir})["problems"] == []


@pytest.mark.parametrize("render_dir", ["/srv/models", "/srv", "/srv/models/"])
def test_a_render_dir_holding_the_models_is_refused(render_dir):
    # The role removes what it did not render there: the models, and an operator's links beside them, would go.
    problems = run(paths={**PATHS, "vllm_common_drafter_dir": render_dir})["problems"]
    assert problems and all(p.startswith("vllm_common_drafter_dir (%s) holds " % render_dir) for p in problems)


def test_a_relative_path_is_not_also_compared():
    assert path_problems({**PATHS, "vllm_drafter_dir": ""}) == [
        "vllm_drafter_dir must be the absolute path of a directory on the host, got ''."]
    assert path_problems({**PATHS, "vllm_common_drafter_dir": "tiny-qwen3-dflash"}) == [
        "vllm_common_drafter_dir must be the absolute path of a directory on the host, got 'tiny-qwen3-dflash'."]


def test_path_problems_do_not_hide_the_others():
    result = run(paths={**PATHS, "vllm_common_drafter_dir": "render"}, mask_token_id=VOCAB)
    assert [problem.split(" ")[0] for problem in result["problems"]] == ["vllm_common_drafter_dir", "vllm_drafter_mask_token_id:"]


def test_no_paths_no_path_checks():
    assert plan(target_read(), checkpoint_read(), vllm_version="0.32.0")["problems"] == []


# The two reads.


def test_an_unreadable_target_names_its_variable_and_ends_the_checks():
    failed = {"failed": True, "msg": "model directory /srv/models/absent does not exist"}
    result = run(failed, mask_token_id=VOCAB)
    assert result["problems"] == [
        "vllm_drafter_target_model_dir: model directory /srv/models/absent does not exist. "
        "Point it at the target model directory, the one holding the model's config.json."
    ]
    assert result["config"] is None and result["links"] == []


def test_an_unreadable_checkpoint_names_its_variable():
    problem = only_problem(run(checkpoint={"failed": True, "msg": "/srv/d has no config.json"}))
    assert problem == (
        "vllm_drafter_dir: /srv/d has no config.json. "
        "Point it at the DFlash drafter checkpoint directory, the one holding its config.json and weights."
    )


def test_both_unreadable_reads_are_reported_from_the_controller_variables():
    result = run({"failed": True, "msg": "a"}, {"failed": True}, target_var="vllm_drafter_target_model_src", checkpoint_var="vllm_drafter_src")
    assert [problem.split(".")[0] for problem in result["problems"]] == ["vllm_drafter_target_model_src: a", "vllm_drafter_src: not readable"]


def test_a_read_may_be_given_as_its_message():
    assert run("cannot read it").get("problems")[0].startswith("vllm_drafter_target_model_dir: cannot read it. Point it at")


def test_a_refused_path_is_not_reported_twice():
    # vllm_drafter_dir "" (unset): its read fails too, and says nothing more.
    result = run(checkpoint={"failed": True, "msg": "model directory  does not exist"}, paths={**PATHS, "vllm_drafter_dir": ""})
    assert result["problems"] == ["vllm_drafter_dir must be the absolute path of a directory on the host, got ''."]


def test_a_refused_path_read_from_the_controller_is_still_reported():
    result = run(checkpoint={"failed": True, "msg": "gone"}, checkpoint_var="vllm_drafter_src", paths={**PATHS, "vllm_drafter_dir": ""})
    assert len(result["problems"]) == 2 and result["problems"][1].startswith("vllm_drafter_src: gone.")


# The target's sizes.


def test_multimodal_targets_give_their_sizes_in_text_config():
    multimodal = {"architectures": ["Qwen3_5ForConditionalGeneration"], "vision_config": {"hidden_size": 1152}, "text_config": target_config()}
    result = run(target_read(multimodal))
    assert result["problems"] == [] and result["config"]["num_target_layers"] == 2
    # The top-level sizes of such a config are not the language model's.
    narrow = target_read({**multimodal, "hidden_size": 64, "text_config": {**target_config(), "hidden_size": 96}})
    assert "not a multiple of the target's hidden size 96" in only_problem(run(narrow))


@pytest.mark.parametrize("size", ["num_hidden_layers", "hidden_size", "vocab_size"])
@pytest.mark.parametrize(("value", "shown"), [(None, "nothing"), (0, "0"), (-2, "-2"), ("64", "64"), (True, "True"), (64.0, "64.0")])
def test_the_target_must_give_positive_integer_sizes(size, value, shown):
    problem = only_problem(run(target_read(**{size: value}), mask_token_id=VOCAB))
    assert problem == (
        f"vllm_drafter_target_model_dir: the target config.json has no positive integer {size} (got {shown}). "
        "Point it at the target model the drafter was trained for."
    )


def test_every_missing_size_is_listed():
    result = run(target_read({"model_type": "qwen3"}), target_var="vllm_drafter_target_model_src")
    assert len(result["problems"]) == 3 and all(p.startswith("vllm_drafter_target_model_src: ") for p in result["problems"])


# The fc width against the target's hidden size.


def test_the_fc_must_read_whole_target_hidden_states():
    # The drafter's fc takes 128 inputs: not a whole number of 96-wide states.
    problem = only_problem(run(target_read(hidden_size=96)))
    assert problem == (
        "vllm_drafter_dir: the drafter's fc.weight takes 128 inputs, not a multiple of the target's hidden size 96 "
        "(vllm_drafter_target_model_dir). This drafter was trained for another target model."
    )


def test_the_fc_tensor_is_named_as_given():
    checkpoint = checkpoint_read()
    checkpoint["tensors"] = {"model.fc.weight": checkpoint["tensors"]["fc.weight"]}
    assert run(target_read(hidden_size=96), checkpoint, fc_tensor="model.fc.weight")["problems"][0].startswith(
        "vllm_drafter_dir: the drafter's model.fc.weight takes 128 inputs")


# Where the layer ids come from.


@pytest.mark.parametrize(
    ("version", "expected"),
    [("0.20.2", [2, 5]), ("0.21.9", [2, 5]), ("0.22.0rc1", [1, 4]), ("0.22.0", [1, 4]), ("0.32.0", [1, 4])],
)
def test_checkpoint_ids_are_converted_for_the_vllm_version(version, expected):
    deep = target_read(num_hidden_layers=8)
    trained = checkpoint_read(dflash_config={"mask_token_id": MASK_TOKEN_ID, "target_layer_ids": [1, 4]})
    result = run(deep, trained, vllm_version=version)
    assert result["problems"] == []
    assert (result["layer_ids"], result["origin"]) == (expected, f"from the checkpoint, for vLLM {version}")
    assert result["config"]["dflash_config"]["target_layer_ids"] == expected
    assert result["config"]["num_target_layers"] == 8
    assert trained["config"]["dflash_config"]["target_layer_ids"] == [1, 4]


@pytest.mark.parametrize(("version", "expected"), [("0.20.2", [2, 6]), ("0.21.0", [2, 6]), ("0.22.0", [1, 5])])
def test_computed_ids_are_converted_for_the_vllm_version(version, expected):
    result = run(target_read(num_hidden_layers=8), vllm_version=version)
    assert (result["problems"], result["layer_ids"], result["origin"]) == ([], expected, f"computed for vLLM {version}")


@pytest.mark.parametrize("version", ["0.20.2", "0.32.0", "latest"])
def test_set_ids_are_written_as_they_are(version):
    result = run(target_read(num_hidden_layers=8), target_layer_ids=[3, 6], vllm_version=version)
    assert (result["problems"], result["layer_ids"], result["origin"]) == ([], [3, 6], "as set")
    assert result["config"]["dflash_config"]["target_layer_ids"] == [3, 6]


@pytest.mark.parametrize(("draft_layers", "expected"), [(1, [1]), (2, [0, 1])])
def test_without_readable_weights_one_id_per_draft_layer(draft_layers, expected):
    result = run(checkpoint=checkpoint_read(fc_width=0, num_hidden_layers=draft_layers, files=["config.json", "pytorch_model.bin"]))
    assert (result["problems"], result["layer_ids"]) == ([], expected)
    assert result["links"] == ["pytorch_model.bin"]


@pytest.mark.parametrize(
    ("checkpoint", "reads"),
    [
        (checkpoint_read(fc_width=3 * HIDDEN), "3"),  # the fc takes more target layers than there are
        (checkpoint_read(fc_width=0, num_hidden_layers=3), "3"),  # one id per draft layer, more than the target has
        (checkpoint_read(fc_width=0, num_hidden_layers=None), "None"),
        (checkpoint_read(fc_width=0, num_hidden_layers=0), "0"),
    ],
)
def test_ids_that_cannot_be_computed_end_the_checks(checkpoint, reads):
    problem = only_problem(run(checkpoint=checkpoint, mask_token_id=VOCAB))
    assert problem == (
        f"vllm_drafter_target_layer_ids: the drafter reads {reads} target layers but the target at vllm_drafter_target_model_dir "
        "has 2, so no ids can be computed. Set vllm_drafter_target_layer_ids, or check the two models belong together."
    )


def test_the_count_is_not_needed_when_the_ids_are_given():
    wide = checkpoint_read(fc_width=0, num_hidden_layers=3)
    assert run(checkpoint=wide, target_layer_ids=[0, 1])["problems"] == []
    assert run(checkpoint=checkpoint_read(fc_width=0, num_hidden_layers=3, dflash_config={"mask_token_id": 3, "target_layer_ids": [0, 1]}))[
        "problems"] == []


def test_old_vllm_cannot_be_given_the_last_layer():
    problem = only_problem(run(vllm_version="0.20.2"))
    assert problem.startswith("vllm_drafter_target_layer_ids: vLLM 0.20.2 cannot feed the drafter the output of the last decoder layer (1)")


@pytest.mark.parametrize("checkpoint", [checkpoint_read(), checkpoint_read(dflash_config={"mask_token_id": 3, "target_layer_ids": [0]})])
def test_a_bad_version_is_named_when_it_is_needed(checkpoint):
    problem = only_problem(run(checkpoint=checkpoint, vllm_version="latest"))
    assert problem == "vllm_common_version: not a vLLM version: 'latest' (expected something like 0.20.2 or 0.22.0rc1)."


def test_set_ids_must_be_a_list():
    assert only_problem(run(target_layer_ids="0,1")) == "vllm_drafter_target_layer_ids must be a list of target layer ids, got '0,1'."
    assert run(target_layer_ids=[])["origin"] == "computed for vLLM 0.32.0"
    assert run(target_layer_ids=None)["origin"] == "computed for vLLM 0.32.0"


def test_checkpoint_ids_must_be_a_list():
    problem = only_problem(run(checkpoint=checkpoint_read(dflash_config={"mask_token_id": 3, "target_layer_ids": "0,1"})))
    assert problem.startswith("vllm_drafter_target_layer_ids: the checkpoint's target layer ids '0,1' are not a list.")


def test_checkpoint_ids_that_are_not_integers_are_named_by_the_range_check():
    trained = checkpoint_read(dflash_config={"mask_token_id": 3, "target_layer_ids": [0, "1"]})
    problem = only_problem(run(checkpoint=trained, vllm_version="0.20.2"))
    assert problem.startswith("vllm_drafter_target_layer_ids: the ids [1, '1'] (from the checkpoint, for vLLM 0.20.2) must be")


# The speculators format.


def speculators_read(**changes):
    config = {
        "architectures": ["DFlashDraftModel"],
        "speculators_model_type": "dflash",
        "aux_hidden_state_layer_ids": [0, 1],
        "mask_token_id": MASK_TOKEN_ID,
        "transformer_layer_config": {"num_hidden_layers": 1, "hidden_size": HIDDEN, "vocab_size": VOCAB},
    }
    config.update(changes)
    return checkpoint_read(config)


def test_a_speculators_drafter_gets_its_ids_and_mask_where_it_keeps_them():
    result = run(checkpoint=speculators_read(), mask_token_id=2)
    assert (result["problems"], result["origin"]) == ([], "from the checkpoint, for vLLM 0.32.0")
    assert (result["config"]["aux_hidden_state_layer_ids"], result["config"]["mask_token_id"]) == ([0, 1], 2)
    assert "dflash_config" not in result["config"] and result["fields"]["format"] == "speculators"


def test_a_speculators_drafter_is_checked_by_its_layer_config():
    assert run(checkpoint=speculators_read(draft_vocab_size=128, transformer_layer_config={
        "num_hidden_layers": 1, "hidden_size": HIDDEN, "vocab_size": 512}))["problems"] == []
    problem = only_problem(run(checkpoint=speculators_read(target_hidden_size=2 * HIDDEN)))
    assert problem.startswith("vllm_drafter_dir: the drafter expects target hidden states of size 128, but the target at")


# The checks on the config vLLM will get.


def test_only_dflash_drafters_run():
    problem = only_problem(run(checkpoint=checkpoint_read(architectures=["DFlash2DraftModel"])))
    assert problem == (
        "vllm_drafter_dir: architectures is ['DFlash2DraftModel'], but vLLM runs only ['DFlashDraftModel'] drafters with method dflash. "
        "Use a DFlash checkpoint, or set vllm_drafter_config_overrides.architectures if the checkpoint merely misnames it."
    )
    assert run(checkpoint=checkpoint_read(architectures=None))["config"]["architectures"] == ["DFlashDraftModel"]


def test_overrides_can_fix_a_misnamed_architecture():
    checkpoint = checkpoint_read(architectures=["DFlash2DraftModel"])
    assert run(checkpoint=checkpoint, config_overrides={"architectures": ["DFlashDraftModel"]})["problems"] == []


@pytest.mark.parametrize(
    "ids",
    [[1, 0], [0, 2], [-1, 0], [0, 0], [0, "1"], [True, 1], [0.0, 1]],
)
def test_set_ids_must_be_distinct_ascending_layers_of_the_target(ids):
    problems = run(target_layer_ids=ids)["problems"]
    assert problems[0] == (
        f"vllm_drafter_target_layer_ids: the ids {ids} (as set) must be distinct integers in ascending order, "
        "each from 0 to 1 for this 2-layer target."
    )


@pytest.mark.parametrize("ids", [[], "0,1", {"0": 1}, 3])
def test_overridden_ids_are_checked_too(ids):
    overrides = {"dflash_config": {"target_layer_ids": ids}}
    assert run(config_overrides=overrides)["problems"][0].startswith(f"vllm_drafter_target_layer_ids: the ids {ids} (computed for vLLM 0.32.0)")


@pytest.mark.parametrize("overrides, named", [
    ({"architectures": ["Eagle3DraftModel"]}, "vllm_drafter_config_overrides.architectures: architectures is"),
    ({"target_hidden_size": 128}, "vllm_drafter_config_overrides.target_hidden_size: the drafter expects"),
    ({"vocab_size": 512}, "vllm_drafter_config_overrides.vocab_size: the drafter's vocab_size 512"),
])
def test_a_value_the_overrides_set_is_blamed_on_the_overrides_not_the_checkpoint(overrides, named):
    problem = only_problem(run(config_overrides=overrides))
    assert problem.startswith(named) and "vllm_drafter_dir" not in problem
    assert "trained for another target" not in problem


def test_the_drafter_must_read_the_target_hidden_size():
    problem = only_problem(run(checkpoint=checkpoint_read(target_hidden_size=128)))
    assert problem == (
        "vllm_drafter_dir: the drafter expects target hidden states of size 128, but the target at vllm_drafter_target_model_dir "
        "has hidden_size 64. The drafter was trained for another target model."
    )
    # Without target_hidden_size the drafter's own hidden size is the target's.
    assert only_problem(run(checkpoint=checkpoint_read(hidden_size=32))).startswith("vllm_drafter_dir: the drafter expects target hidden states of size 32")
    assert run(checkpoint=checkpoint_read(hidden_size=32, target_hidden_size=HIDDEN))["problems"] == []


def test_the_drafter_must_share_the_target_vocabulary_unless_it_has_its_own():
    problem = only_problem(run(checkpoint=checkpoint_read(vocab_size=512), checkpoint_var="vllm_drafter_src"))
    assert problem == (
        "vllm_drafter_src: the drafter's vocab_size 512 differs from the target's 384 (vllm_drafter_target_model_dir) "
        "and it sets no draft_vocab_size. The drafter was trained for another target model."
    )
    assert run(checkpoint=checkpoint_read(vocab_size=512, draft_vocab_size=128))["problems"] == []


@pytest.mark.parametrize(
    ("checkpoint_mask", "mask", "sets"),
    [(None, None, "sets no mask token"), (3, VOCAB, f"sets mask token {VOCAB}"), (3, -1, "sets mask token -1"),
     (VOCAB + 1, None, f"sets mask token {VOCAB + 1}"), (3, True, "sets mask token True"), (3, "3", "sets mask token 3")],
)
def test_the_mask_token_must_lie_in_the_target_vocabulary(checkpoint_mask, mask, sets):
    dflash = {} if checkpoint_mask is None else {"mask_token_id": checkpoint_mask}
    problem = only_problem(run(checkpoint=checkpoint_read(dflash_config=dflash), mask_token_id=mask))
    assert problem == (
        f"vllm_drafter_mask_token_id: the drafter config {sets}, and vLLM needs one below the target's vocab_size {VOCAB}. "
        "Set vllm_drafter_mask_token_id to the mask token id the drafter was trained with."
    )


@pytest.mark.parametrize(("checkpoint_mask", "mask", "written"), [(3, None, 3), (3, 0, 0), (None, VOCAB - 1, VOCAB - 1)])
def test_a_mask_token_is_kept_or_set(checkpoint_mask, mask, written):
    dflash = {} if checkpoint_mask is None else {"mask_token_id": checkpoint_mask}
    result = run(checkpoint=checkpoint_read(dflash_config=dflash), mask_token_id=mask)
    assert (result["problems"], result["config"]["dflash_config"]["mask_token_id"]) == ([], written)


def test_the_ids_must_match_the_fc_width():
    problem = only_problem(run(target_layer_ids=[0]))
    assert problem == (
        "vllm_drafter_target_layer_ids: 1 ids [0] (as set) make vLLM build an fc layer taking 64 inputs, but the checkpoint's "
        "fc.weight takes 128, so loading would fail. Give 2 ids."
    )
    # Without readable weights there is no width to match.
    assert run(checkpoint=checkpoint_read(fc_width=0), target_layer_ids=[0])["problems"] == []


def test_every_problem_with_the_rendered_config_is_listed():
    checkpoint = checkpoint_read(architectures=["DFlash2DraftModel"], vocab_size=512, target_hidden_size=128)
    result = run(checkpoint=checkpoint, target_layer_ids=[1, 0, 1], mask_token_id=VOCAB)
    assert [problem.split(" ")[:3] for problem in result["problems"]] == [
        ["vllm_drafter_dir:", "architectures", "is"],
        ["vllm_drafter_target_layer_ids:", "the", "ids"],
        ["vllm_drafter_dir:", "the", "drafter"],
        ["vllm_drafter_dir:", "the", "drafter's"],
        ["vllm_drafter_mask_token_id:", "the", "drafter"],
        ["vllm_drafter_target_layer_ids:", "3", "ids"],
    ]


# Overrides.


def test_overrides_merge_recursively_into_the_rendered_config():
    overrides = {"max_position_embeddings": 256, "dflash_config": {"block_size": 4}, "layer_types": ["sliding_attention"]}
    result = run(config_overrides=overrides)
    assert result["problems"] == []
    config = result["config"]
    assert config["max_position_embeddings"] == 256 and config["layer_types"] == ["sliding_attention"]
    # The computed ids and the mask stay.
    assert config["dflash_config"] == {"block_size": 4, "mask_token_id": MASK_TOKEN_ID, "target_layer_ids": [0, 1]}
    assert result["layer_ids"] == [0, 1]


def test_overrides_are_checked_like_the_rest():
    result = run(config_overrides={"dflash_config": {"mask_token_id": VOCAB, "target_layer_ids": [0]}, "vocab_size": 512})
    assert [problem.split(":")[0] for problem in result["problems"]] == [
        "vllm_drafter_config_overrides.vocab_size", "vllm_drafter_mask_token_id", "vllm_drafter_target_layer_ids"]


def test_overrides_must_be_a_mapping():
    problem = only_problem(run(config_overrides=["max_position_embeddings"]))
    assert problem == "vllm_drafter_config_overrides must be a mapping of config.json keys, got ['max_position_embeddings']."
    assert run(config_overrides=None)["problems"] == [] and run(config_overrides={})["problems"] == []
