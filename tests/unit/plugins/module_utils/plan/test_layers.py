"""The named layers of vllm_server_args (module_utils/plan/layers) and the unknown-variable check that lets them by."""

from ansible_collections.llmops.vllm.plugins.module_utils.plan import layers, variables


def test_a_host_layer_changes_one_flag_and_keeps_the_rest_in_place():
    base = {"max-model-len": 32768, "reasoning-parser": "qwen3", "language-model-only": True}
    merged, problems = layers.merge(base, {"vllm_server_args_host": {"max_model_len": 16384}})
    assert problems == []
    assert list(merged.items()) == [("max_model_len", 16384), ("reasoning-parser", "qwen3"), ("language-model-only", True)]


def test_layers_apply_in_name_order_and_null_takes_a_flag_out():
    merged, problems = layers.merge({"enforce-eager": True}, {
        "vllm_server_args_50_host": {"--max-model-len": 8192, "enforce-eager": None},
        "vllm_server_args_10_group": {"max-model-len": 4096, "dtype": "bfloat16"},
    })
    assert problems == []
    assert merged == {"enforce-eager": None, "--max-model-len": 8192, "dtype": "bfloat16"}


def test_a_layer_that_is_not_a_mapping_is_named():
    merged, problems = layers.merge({}, {"vllm_server_args_host": ["--enforce-eager"], "vllm_server_args_x": None})
    assert problems == ["vllm_server_args_host must be a mapping of vLLM CLI names to values, merged over "
                        "vllm_server_args, got list."]
    assert merged == {}


def test_a_base_that_is_not_a_mapping_is_named():
    assert layers.merge("--enforce-eager", {})[1] == [
        "vllm_server_args must be a mapping of vLLM CLI names to values, got str."]


def test_layer_names_are_not_unknown_variables_but_misspelt_ones_still_are():
    known = {"vllm_server_args"}
    assert variables.unknown(["vllm_server_args_host", "vllm_server_args_10_a100"], known) == []
    assert variables.unknown(["vllm_server_argz"], known) == [
        "vllm_server_argz is not a variable of this collection, so it would be ignored; did you mean vllm_server_args?"]
