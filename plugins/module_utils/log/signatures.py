# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a vLLM start-up log can prove, as data: the reason vocabulary, milestones, and three layers of rules.

1. ``SIGNATURES``: exact texts vLLM (and the libraries under it) print for one failure, with a detail and
   a hint worded for it. Adding a failure a new release prints is one entry.
2. ``FAMILIES``: for a failure no signature knows, the reason its family implies, from the exception's
   class and the message's vocabulary (a driver that will not initialise is ``gpu_unavailable`` in any
   release's words). Families only explain a death; they never end a wait on their own.
3. ``GENERIC``: any other exception line names the root cause but no reason.

Where the texts come from: vLLM's source of 0.6.3, 0.7.3, 0.8.5, 0.9.2, 0.10.2, 0.11.0, 0.20.x, 0.33.0 and the
CPU build 0.32 (``tests/fixtures/corpus/source`` quotes each text with its release and file), and logs users
posted (``tests/fixtures/corpus/public``) for texts of releases or libraries not read (the token-budget message
of 0.20-0.26, Ray's placement-group warning, NCCL's and the C toolchain's own lines). A release changes its
wording: a signature matches what stays the same across the releases read, and the families catch the rest.
Every release's start-path texts (0.6.0 to 0.34.0) are enumerated in ``places``, which names the places whose
failures prove a reason their class and words do not (``RAISED_AT``); the tests replay all of them.
"""

from __future__ import annotations

import re

from ansible_collections.llmops.vllm.plugins.module_utils.log import places, vocabulary

READY = "ready"
TIMEOUT = "timeout"
REASONS = (
    READY, "missing_dependency", "out_of_memory", "config_error", "model_not_found", "port_in_use",
    "gpu_unavailable", "distributed_error", "engine_died", "process_exited", TIMEOUT,
)
FAILURE_REASONS = REASONS[1:]

# Priorities: a specific root cause beats a family's, which beats an unknown exception, which beats the
# reports of a death and the wrappers that re-raise it. Equal: the earlier line wins (the innermost cause
# of a chained traceback is printed first).
# A crash report ("Killed", "Segmentation fault") says how a process died; the other processes' reports of
# its death ("died unexpectedly") only that it did.
# LAYER: the second reading (module_utils/log/layers), when nothing narrower knew the line; LAYER_PLACED when a package
# outside vLLM raised it, which says more than a family guessed from the class alone.
ROOT, TYPED, FAMILY, LAYER_PLACED, FAMILY_CLASS, LAYER, GENERIC, CRASH, ENGINE_GONE, ENGINE_DEAD, CARRIER, WRAPPER = (
    100, 80, 75, 72, 70, 65, 60, 55, 50, 40, 20, 10)

NOISE = re.compile("|".join((
    r"Found ulimit of",                          # fd limit warning quoting an OSError
    r"retrying \d+ of \d+",                      # transient download retry
    r"Error retrieving file list",               # precedes the real ValidationError
    r"resource_tracker",                         # leaked semaphore/shared_memory at exit
    r"leaked (?:semaphore|shared_memory) objects",
    r"destroy_process_group\(\) was not called",
    r"warnings\.warn\(",
    r"Error in (?:preprocessing prompt|applying chat template)",   # a request's error, logged by the server
    r"Retrying with a new port",                 # vLLM picks another port for an internal socket and goes on
)))
SHUTDOWN_MARK = "API server: shutdown triggered"
# Output of a process other than the one that announced its shutdown: a new API server (its own pid),
# or the argparse usage/error lines a new `vllm serve` prints before any logging is set up.
NEW_PROCESS = re.compile(r"^(?:\(APIServer pid=(?P<pid>\d+)\)|usage: |[\w.-]+(?: serve)?: error: )", re.M)

MILESTONES = (
    ("api_server_up", ("vLLM server version", "non-default args", "\u2588")),
    ("engine_init", (" LLM engine (v",)),          # V0 "Initializing an LLM engine (v0.6.3)", V1 "a V1 LLM engine (v0.20.2)"
    ("weights_loaded", ("Loading weights took", "Model loading took")),
    ("kv_cache_sized", ("KV cache size", "Available KV cache memory", "for KV cache on node")),
    ("cuda_graphs_captured", ("Graph capturing finished",)),
    ("engine_ready", ("init engine (profile, create kv cache",)),
    ("server_starting", ("Starting vLLM server on", "Starting vLLM API server")),
    ("app_startup_complete", ("Application startup complete.", "Uvicorn running on")),
)
MILESTONE_ORDER = tuple(milestone[0] for milestone in MILESTONES) + ("http_ready",)


class Signature(object):
    """A failure a log line proves: regex, reason, how to word the detail and hint.

    ``detail`` and ``hint`` are format strings over the regex's named groups (or
    callables taking the match). ``certain`` signatures end a wait at once even
    while the process lives; the others only explain a death.
    """

    __slots__ = ("name", "reason", "needle", "needles", "regex", "detail", "hint", "priority", "certain")

    def __init__(self, name, reason, needle, pattern, detail=None, hint="", priority=ROOT, certain=True, flags=0):
        self.name, self.reason = name, reason
        # A substring every match holds (or a tuple of them), so that most lines skip the regex.
        self.needle, self.needles = (needle, None) if isinstance(needle, str) else ("", tuple(needle))
        self.regex = re.compile(pattern, flags)
        self.detail, self.hint, self.priority, self.certain = detail, hint, priority, certain

    def render(self, template, match):
        if template is None:
            return match.group(0).strip()
        if callable(template):
            return template(match)
        return template.format(**{k: (v or "") for k, v in match.groupdict().items()})


_OOM_HINT = ("free the GPU (another process? nvidia-smi), lower --max-model-len or --max-num-seqs, raise "
             "--tensor-parallel-size or quantize; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True helps with fragmentation")
_FLASH_ATTN_HINT = ("remove the partial flash-attn (pip uninstall flash-attn flash-attn-4) from the venv, or install a "
                    "complete flash-attn 2.x built for this torch/CUDA; vLLM ships its own FA kernels and does not need it")
_MODEL_HINT = ("check that the path exists on the host and holds config.json (the drafter is the 'model' key of "
               "--speculative-config), or that the Hugging Face repo id is right and cached when HF_HUB_OFFLINE=1")
_GATED_HINT = "accept the model's licence on the Hugging Face Hub and give the service HF_TOKEN, or pre-download it"
_NCCL_HINT = ("NCCL failed between the GPUs: try --disable-custom-all-reduce or NCCL_P2P_DISABLE=1, and rerun with "
              "NCCL_DEBUG=INFO for the cause")
_KILLED_HINT = ("a vLLM process died without a Python error: the kernel OOM killer may be the cause (check dmesg or "
                "journalctl -k for 'Killed process'); shrink the KV cache (--gpu-memory-utilization, --kv-cache-memory-bytes, "
                "VLLM_CPU_KVCACHE_SPACE) or raise the host/container memory limit")

_EXCEPTION_HINT = "the server raised {exc}: read root_cause_line and the traceback above it in log_tail"
_DISTRIBUTED_HINT_CCL = ("oneCCL could not set up the processes' communication: check that every GPU's device files "
                         "(/dev/dri) are in the container, the CCL_* and FI_* environment (the libfabric provider), and "
                         "CCL_ZE_IPC_EXCHANGE")
_PORT_HINT = "another process holds the port: stop the old server (ss -ltnp 'sport = :PORT' shows it) or pick another --port"

# Hints for outcomes the waiter decides without a log signature.
DEFAULT_HINTS = {
    "engine_died": _KILLED_HINT,
    "process_exited": "the server exited without a known error: read log_tail and the service journal "
                      "(journalctl -u UNIT); a stop or restart during the wait also ends it",
    "port_in_use": _PORT_HINT,
    "config_error": "fix the setting named in detail",
    TIMEOUT: "if the log still advances, raise timeout (weights, torch.compile and CUDA graph capture of a large "
             "model take minutes); otherwise look at log_tail for where the start-up stalled",
}


def _last_quoted(match):
    found = re.findall(r"'([^']*)'", match.group(0))
    return found[-1] if found else match.group(0).strip()


SIGNATURES = (
    # -- missing_dependency
    Signature("flash_attn_partial", "missing_dependency", "flash_attn",
              r"No module named '(?P<mod>flash_attn[\w.]*)'", "{mod}", _FLASH_ATTN_HINT),
    Signature("flash_attn_stray", "missing_dependency", "flash_attn",
              r"'flash_attn' is not a package|flash_attn\.ops\.triton\.rotary not found|flash_attn_2_cuda.*undefined symbol",
              None, _FLASH_ATTN_HINT),
    Signature("vllm_c_import", "missing_dependency", "Failed to import from vllm.",
              r"Failed to import from (?P<mod>vllm\._\w+)(?: with)? (?P<why>\w+Error\(.*)", "{mod}: {why}",
              "vLLM's compiled extension does not load: reinstall the vLLM wheel built for this torch, CUDA and "
              "Python (no mixed pip installs of torch), and check what the error names", TYPED, certain=False),
    Signature("libnuma", "missing_dependency", "libnuma",
              r"(?P<lib>libnuma\.so\.1): cannot open shared object file", "{lib}",
              "install the libnuma1 package (apt-get install libnuma1) on the host or into the image", certain=False),
    Signature("vllm_metadata", "missing_dependency", "PackageNotFoundError",
              r"PackageNotFoundError: No package metadata was found for (?P<pkg>\S+)", "{pkg} package metadata",
              "the installed distribution is not named as the CLI expects (vllm-cpu): start vLLM through a wrapper "
              "that aliases the version lookup, or with python -m vllm.entrypoints.openai.api_server"),
    Signature("module_missing", "missing_dependency", "No module named",
              r"ModuleNotFoundError: No module named '(?P<mod>[\w.]+)'", "{mod}",
              "install the Python package that provides '{mod}' into the vLLM venv", TYPED, certain=False),
    # a compiler's or linker's own diagnostic says more than the CalledProcessError that reports its exit
    Signature("build_failure", "missing_dependency", ("fatal error: ", "cannot find -l", "undefined reference"),
              r"fatal error: (?P<what>[^:]+: No such file or directory|.*)|cannot find -l(?P<lib>\S+)|"
              r"undefined reference to `(?P<sym>[^']+)'",
              lambda m: "building a compiled extension failed: " + (
                  m.group("what") or ("-l" + m.group("lib") if m.group("lib") else "undefined " + (m.group("sym") or ""))),
              "a JIT-compiled kernel (triton, torch.compile, flashinfer) needs a C compiler, the Python headers "
              "(python3-dev) and libcuda.so from the NVIDIA driver on the host", TYPED, certain=False),
    # The shell that runs a build step (ninja, cpp_extension, FlashInfer's JIT) could not find the compiler itself.
    Signature("tool_not_found", "missing_dependency", "not found",
              r"^(?:/(?:usr/)?bin/)?(?:ba|da|z)?sh: (?:\d+: )?(?:line \d+: )?(?P<tool>\S+): (?:command )?not found",
              "building a kernel failed: {tool} not found",
              "a kernel is built at start-up and '{tool}' is missing: install the CUDA toolkit of torch's CUDA (nvcc) "
              "and set CUDA_HOME, or use prebuilt kernels (FlashInfer's cubin/jit-cache wheels)", ROOT, certain=False),
    Signature("shared_library", "missing_dependency", "cannot open shared object file",
              r"(?P<lib>lib[\w.+-]*\.so[\w.]*): cannot open shared object file", "{lib}",
              "install the system package that provides {lib}", TYPED, certain=False),
    # vLLM's compiled kernels check each CUDA call (CUDACHECK in csrc/custom_all_reduce.cuh): "Failed: Cuda error %s:%d
    # '%s'" then exit(), printed before the Python errors its death causes (read in the _C libraries of 0.20.1 and
    # 0.33.0). The custom all-reduce is the GPUs' peer-to-peer path.
    Signature("custom_all_reduce", "distributed_error", "custom_all_reduce",
              r"Failed: (?:Cuda error )?(?P<file>\S*custom_all_reduce\S*):(?P<line>\d+) '(?P<err>[^']*)'",
              "vLLM's custom all-reduce failed between the GPUs: {err} ({file}:{line})",
              "the GPUs cannot map each other's memory (peer access, IPC): set --disable-custom-all-reduce, or "
              "NCCL_P2P_DISABLE=1", TYPED, certain=False),
    Signature("cudacheck", "engine_died", "Failed: ",
              r"Failed: (?:Cuda error )?(?P<file>\S+\.(?:cu|cuh|cpp|h)):(?P<line>\d+) '(?P<err>[^']*)'",
              "a CUDA call in vLLM's kernels failed: {err} ({file}:{line})",
              "a GPU kernel of vLLM failed: rerun with CUDA_LAUNCH_BLOCKING=1, and report it with the vLLM version",
              TYPED, certain=False),
    # Every model's load_weights looks a checkpoint tensor up by name (params_dict[name]: 363 places in 0.20.1's
    # model_executor/models, 107 in 0.33.0's): a bare KeyError of a tensor name is a checkpoint that does not fit.
    Signature("weights_key", "config_error", "KeyError",
              r"KeyError: '(?P<name>[\w.]+\.(?:weight|bias|qweight|qzeros|scales|g_idx|weight_scale\w*|input_scale|"
              r"k_scale|v_scale)\w*)'",
              "the checkpoint has the tensor {name}, which the model vLLM built for it does not",
              "the checkpoint does not fit the architecture vLLM built: a drafter, MTP or EAGLE head made for another "
              "target or release, or a checkpoint still in its training format; check its config.json and the method",
              TYPED, certain=False),
    # -- out_of_memory
    Signature("weights_oom", "out_of_memory", "not enough GPU memory",
              r"Failed to load model - not enough GPU memory",
              lambda m: "not enough GPU memory for the weights" + _alloc(m.string),
              "the weights do not fit: raise --tensor-parallel-size, quantize (--quantization), or free the GPU "
              "(another process holds memory: nvidia-smi)"),
    Signature("cuda_oom", "out_of_memory", "out of memory",
              r"CUDA out of memory\.(?: Tried to allocate (?P<amt>[\d.]+ [KMGT]?i?B))?",
              lambda m: "CUDA out of memory" + _alloc(m.string), _OOM_HINT),
    Signature("startup_free_memory", "out_of_memory", "on startup is less than desired GPU memory utilization",
              r"Free memory on device(?: (?P<dev>\S+))? \((?P<free>[\d.]+)/(?P<total>[\d.]+) GiB\) on startup is less "
              r"than desired GPU memory utilization \((?P<util>[\d.]+), (?P<want>[\d.]+) GiB\)",
              lambda m: "free %s of %s GiB%s < gpu_memory_utilization %s (%s GiB)" % (
                  m.group("free"), m.group("total"), " on " + m.group("dev") if m.group("dev") else "", m.group("util"),
                  m.group("want")),
              "another process holds GPU memory (an old server? check nvidia-smi and stop it) or lower "
              "--gpu-memory-utilization below the free share"),
    Signature("profiling_free_memory", "out_of_memory", "Error in memory profiling",
              r"Error in memory profiling\. Initial free memory (?P<before>[\d.]+) GiB, current free memory "
              r"(?P<now>[\d.]+) GiB", "free GPU memory fell from {before} to {now} GiB while vLLM profiled",
              "another process on the GPU allocated memory during start-up: give vLLM the GPU to itself"),
    Signature("v0_kv_cache_tokens", "out_of_memory", "that can be stored in KV cache",
              r"max seq len \((?P<len>\d+)\) is larger than the maximum number of tokens that can be stored in KV "
              r"cache \((?P<fit>\d+)\)", "max_model_len {len} > {fit} tokens that fit in the KV cache",
              "lower --max-model-len to at most {fit} or raise --gpu-memory-utilization"),
    Signature("no_cache_blocks", "out_of_memory", "No available memory for the cache blocks",
              r"No available memory for the cache blocks", "no memory left for the KV cache after the weights",
              "raise --gpu-memory-utilization, lower --max-model-len, or add GPUs (--tensor-parallel-size)"),
    Signature("kv_cache_too_small", "out_of_memory", "max seq len",
              r"To serve at least one request with the models?'s max seq len \((?P<len>\d+)\), \((?P<need>[\d.]+) GiB KV "
              r"cache is needed, which is larger than the available KV cache memory \((?P<have>[\d.]+) GiB\)",
              lambda m: "max_model_len %s needs %s GiB of KV cache, %s GiB available%s" % (
                  m.group("len"), m.group("need"), m.group("have"), _estimate(m.string)),
              "lower --max-model-len (to at most the estimated maximum) or raise --gpu-memory-utilization"),
    Signature("cpu_kv_space", "out_of_memory", "less than requested memory for kv",
              r"Available memory on node (?P<node>\d+) \((?P<avail>[\d./]+) GiB\).*less than requested memory for kv "
              r"\((?P<want>[\d.]+ GiB)\)",
              "KV cache of {want} requested, {avail} GiB available on node {node}",
              "lower VLLM_CPU_KVCACHE_SPACE or --kv-cache-memory-bytes (unset VLLM_CPU_KVCACHE_SPACE for the flag to count)"),
    Signature("oom_killer", "out_of_memory", "OOM killer",
              r"killed by the OOM killer|oom-kill|Out of memory: Killed process (?P<pid>\d+)",
              "the kernel's OOM killer ended a vLLM process",
              "give the host or container more memory, or shrink vLLM's share (--gpu-memory-utilization, swap space, "
              "VLLM_CPU_KVCACHE_SPACE, --max-num-seqs)", certain=False),
    Signature("dev_shm", "out_of_memory", "/dev/shm",
              r"Insufficient space in /dev/shm for shared-memory allocation: (?P<need>\d+ MiB) required, (?P<free>\d+ MiB) free",
              "/dev/shm has {free} free, {need} required",
              "enlarge /dev/shm: docker --shm-size 512m (molecule shm_size) or --ipc=host"),
    # -- config_error (token budget, parallel layout, drafter, parsers, flags)
    Signature("token_budget", "config_error", "does not allow any tokens to be scheduled",
              r"max_num_scheduled_tokens is set to (?P<n>-?\d+)[^.]*? which does not allow any tokens to be scheduled",
              "max_num_scheduled_tokens = {n}: the speculative tokens take the whole max_num_batched_tokens budget",
              "raise --max-num-batched-tokens or lower num_speculative_tokens/max_num_seqs "
              "(e.g. --max-num-batched-tokens 32768 for num_speculative_tokens 15)"),
    Signature("mamba_block_budget", "config_error", "In Mamba cache align mode",
              r"In Mamba cache align mode, block_size \((?P<b>\d+)\) must be <= max_num_batched_tokens \((?P<m>\d+)\)",
              "attention block {b} > max_num_batched_tokens {m}", "raise --max-num-batched-tokens to at least {b}"),
    Signature("max_model_len_derived", "config_error", "is greater than the derived max_model_len",
              r"User-specified max_model_len \((?P<want>\d+)\) is greater than the derived max_model_len "
              r"\((?P<why>[^)]*)\)", "max_model_len {want} > what the model allows ({why})",
              "lower --max-model-len to the model's context length, or set VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 if the model "
              "really supports more (RoPE scaling)"),
    Signature("batched_below_len", "config_error", "is smaller than max_model_len",
              r"max_num_batched_tokens \((?P<b>\d+)\) is smaller than max_model_len \((?P<l>\d+)\)",
              "max_num_batched_tokens {b} < max_model_len {l}",
              "raise --max-num-batched-tokens to at least --max-model-len, or keep chunked prefill enabled"),
    Signature("fc_weight_shape", "config_error", "Tried to load weights of size",
              r"Tried to load weights of size (?P<got>torch\.Size\(\[[^\]]*\]\)) ?to a parameter of size "
              r"(?P<want>torch\.Size\(\[[^\]]*\]\))",
              "checkpoint weight {got} != parameter {want}",
              "the drafter's dflash_config.target_layer_ids count x hidden size must match fc.weight "
              "(fix target_layer_ids in the drafter config.json)"),
    Signature("arch_unsupported", "config_error", "are not supported for now",
              r"Model architectures \[(?P<arch>[^\]]*)\] are not supported", "architectures [{arch}] are not supported",
              "name an architecture this vLLM registers; a DFlash drafter's config.json needs "
              "architectures ['DFlashDraftModel'] (the target model cannot serve as its own drafter)"),
    Signature("attention_backend_selected", "config_error", "is not valid for this configuration",
              r"Selected backend (?P<b>\w+) is not valid for this configuration\. Reason: (?P<why>.*)",
              "backend {b}: {why}",
              "DFlash needs non-causal attention: pass --attention-backend flash_attn (FLASH_ATTN or FLEX_ATTENTION)"),
    Signature("attention_backend_missing", "config_error", ("No valid attention backend", "non-causal support"),
              r"No valid attention backend found|does not have non-causal support, which is required for DFlash", None,
              "DFlash needs non-causal attention: pass --attention-backend flash_attn (FLASH_ATTN or FLEX_ATTENTION)"),
    Signature("cpu_attention", "config_error", "Unsupported CPU attention configuration",
              r"Unsupported CPU attention configuration: (?P<cfg>[^'\"]*)", "{cfg}",
              "the CPU attention backend supports head_dim 32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512: "
              "use a model with one of these"),
    Signature("parser", "config_error", "parser:",
              r"invalid (?P<kind>tool call|reasoning) parser: (?P<name>[^\s(']+)", "unknown {kind} parser '{name}'",
              "pick a parser this vLLM lists (e.g. --tool-call-parser qwen3_coder, --reasoning-parser qwen3)"),
    Signature("trust_remote_code", "config_error", ("If the model is a custom model", "requires you to execute the", "contains custom code"),
              r"Failed to load the model config\. If the model is a custom model|requires you to execute the "
              r"(?:configuration|tokenizer|modeling) file in that repo|contains custom code which must be executed",
              "the model's custom code needs remote code",
              "add --trust-remote-code, or fix model_type in the model's config.json"),
    Signature("dflash_target", "config_error", "dflash is only supported for",
              r"dflash is only supported for \[.*?\] models\. Got .*?model_type='(?P<t>[^']*)'",
              "target model_type '{t}' is not supported by DFlash", "use a supported target family (qwen, llama, ...)"),
    Signature("dflash_mask_token", "config_error", "For parallel drafting",
              r"For parallel drafting, the draft model config must have", "drafter config has no mask token",
              "add dflash_config.mask_token_id to the drafter's config.json"),
    Signature("dflash_v2_runner", "config_error", "require the V2 model runner",
              r"DFlash drafters with mixed sliding/full attention require the V2 model runner",
              "sliding-window drafter on the V1 runner", "set VLLM_USE_V2_MODEL_RUNNER=1"),
    Signature("spec_tp_key", "config_error", "speculative_config",
              r"'tensor_parallel_size' is not a valid argument in the speculative_config|"
              r"speculative_draft_tensor_parallel_size=\d+ cannot be other value than 1",
              None, "drop tensor_parallel_size/draft_tensor_parallel_size from --speculative-config for dflash"),
    Signature("argparse_json", "config_error", ": error: argument --speculative-config",
              r"^[\w.-]+(?: serve)?: error: argument (?P<arg>--speculative-config\S*): (?P<why>.*)",
              "{arg}: {why}", "--speculative-config must be valid JSON: quote every key and string value"),
    # argparse: "vllm: error: ...", "vllm serve: error: ...", "vllm-cpu-cli: error: ...", "api_server.py: error: ...";
    # not a compiler's
    # "collect2: error: ld returned 1" or "gcc: error: ...", which are build failures (FAMILIES).
    Signature("argparse", "config_error", ": error: ",
              r"^(?:vllm[\w.-]*(?: serve)?|[\w.-]+\.py|python3? -m [\w.]+): error: (?P<why>.+)", "{why}",
              "fix the vLLM command line: remove or rename the flags this version does not know (vllm serve --help)"),
    # -- model_not_found
    Signature("invalid_model_path", "model_not_found", "Invalid repository ID or local directory",
              r"Invalid repository ID or local directory specified: '(?P<path>[^']*)'", "{path}", _MODEL_HINT),
    Signature("hf_repo_id", "model_not_found", "HFValidationError",
              r"^(?:[\w.]+\.)?HFValidationError: .*", _last_quoted, _MODEL_HINT),
    Signature("hf_offline_cache", "model_not_found", "LocalEntryNotFoundError",
              r"^(?:[\w.]+\.)?LocalEntryNotFoundError: (?P<why>.*)", "{why}",
              "pre-download the model into HF_HOME on the host, or allow downloads (unset HF_HUB_OFFLINE)"),
    Signature("hf_repo_missing", "model_not_found", "RepositoryNotFoundError",
              r"^(?:[\w.]+\.)?RepositoryNotFoundError: (?P<why>.*)", "{why}", _MODEL_HINT),
    Signature("hf_gated", "model_not_found", ("ated repo", "is restricted", "401 Client Error"),
              r"GatedRepoError|Cannot access gated repo|Access to model .* is restricted|401 Client Error", None, _GATED_HINT),
    # -- NCCL's own warnings: they quote errno texts ("Address already in use") that are not vLLM's failure
    Signature("cuda_driver_old", "gpu_unavailable", "driver version is insufficient",
              r"CUDA driver version is insufficient for CUDA runtime version", "the NVIDIA driver is older than the "
              "CUDA runtime of this torch", "upgrade the NVIDIA driver, or install the vLLM/torch build for its CUDA"),
    # NCCL's "Last error:" names the CUDA failure behind "unhandled cuda error"
    Signature("nccl_cuda_failure", "distributed_error", "Cuda failure",
              r"Cuda failure '(?P<why>[^']*)'", "{why}", _NCCL_HINT, certain=False),
    Signature("nccl_warn", "distributed_error", "NCCL WARN", r"NCCL WARN (?P<why>.*)", "NCCL: {why}",
              _NCCL_HINT, ENGINE_DEAD, certain=False),
    # -- port_in_use
    Signature("address_in_use", "port_in_use", "ddress already in use",
              r"[Aa]ddress already in use(?: \(addr='(?P<addr>[^']*)'\))?",
              lambda m: "Address already in use" + (" (%s)" % m.group("addr") if m.group("addr") else ""),
              _PORT_HINT),
    # -- gpu_unavailable
    Signature("ray_placement_gpus", "gpu_unavailable", "placement group",
              r"The number of required GPUs exceeds the total number of available GPUs in the placement group",
              "the Ray placement group has fewer GPUs than tensor x pipeline parallel size",
              "add GPUs to the Ray cluster (ray status) or lower --tensor-parallel-size / --pipeline-parallel-size"),
    # Ray's autoscaler: no node type of the cluster has the GPUs asked for, so the placement group never forms.
    Signature("ray_no_gpu_node", "gpu_unavailable", "fulfill resource request",
              r"No available node types can fulfill resource request (?P<req>\{.*'GPU'.*\})",
              "no Ray node can provide {req}", "add GPU nodes to the Ray cluster (ray status) or lower "
              "--tensor-parallel-size / --pipeline-parallel-size"),
    Signature("world_size", "gpu_unavailable", "is larger than the number of available GPUs",
              r"World size \((?P<ws>\d+)\) is larger than the number of available GPUs \((?P<gpus>\d+)\)",
              "world size {ws} > {gpus} available GPU(s)",
              "expose at least tensor_parallel_size x pipeline_parallel_size GPUs (CUDA_VISIBLE_DEVICES, container "
              "device requests) or lower --tensor-parallel-size"),
    Signature("no_gpu", "gpu_unavailable", ("CUDA", "NVIDIA", "device type"),
              r"No CUDA GPUs are available|no CUDA-capable device is detected|Found no NVIDIA driver on your system|"
              r"CUDA driver initialization failed|Failed to infer device type",
              None, "check the NVIDIA driver (nvidia-smi), CUDA_VISIBLE_DEVICES and the container's GPU access"),
    # -- distributed_error
    Signature("nccl", "distributed_error", ("DistBackendError", "NCCL error"), r"DistBackendError|NCCL error(?: in: (?P<where>[^,]*))?", None, _NCCL_HINT,
              TYPED),
    Signature("gloo_netlink", "distributed_error", "Address family not supported by protocol",
              r"gloo.*Address family not supported by protocol", "gloo could not enumerate network interfaces",
              "allow AF_NETLINK in the unit's RestrictAddressFamilies= (gloo lists interfaces through netlink)"),
    Signature("gloo", "distributed_error", "gloo", r"\[enforce fail at [^\]]*gloo[^\]]*\] (?P<why>.*)", "{why}",
              "torch.distributed (gloo) failed: check the network sandboxing of the service"),
    # -- timeout (vLLM's own wait for the engine processes)
    Signature("engine_ready_timeout", TIMEOUT, "Timed out waiting for engine",
              r"Timed out waiting for engines? (?:core processes )?to (?:start|send ?initial message)"
              r"(?:.*?Waited (?P<s>\d+)s)?",
              lambda m: "vLLM gave up waiting for the engine core" + (" after %ss" % m.group("s") if m.group("s") else ""),
              "raise VLLM_ENGINE_READY_TIMEOUT_S (default 600) for slow weight loading, or load faster (local disk)"),
    # -- engine_died
    Signature("illegal_memory_access", "engine_died", "illegal memory access",
              r"CUDA error: an illegal memory access was encountered", "CUDA illegal memory access",
              "a known DFlash + CUDA graphs failure under load: retry with --enforce-eager (or turn prefix caching off "
              "for hybrid targets), then upgrade vLLM"),
    # reports of a death (more telling than the wrappers below)
    Signature("engine_core_exited", "engine_died", "exited unexpectedly",
              r"engine core exited unexpectedly", "the EngineCore process exited unexpectedly", _KILLED_HINT, ENGINE_GONE),
    Signature("engine_core_died", "engine_died", "died unexpectedly",
              r"Engine core proc(?:ess)? (?P<name>\S+) died unexpectedly", "engine core process {name} died", _KILLED_HINT,
              ENGINE_GONE),
    Signature("worker_died", "engine_died", "died",
              r"Worker (?:proc(?:ess)? )?(?P<name>\S+(?: pid \d+)?) died(?: unexpectedly)?(?:, shutting down executor)?,?"
              r"(?: \(?exit ?code:? (?P<code>[^),]*)\)?)?",
              lambda m: "worker %s died (exit code: %s)" % (m.group("name"), m.group("code") or "None"), _KILLED_HINT,
              ENGINE_GONE),
    Signature("peer_lost", "engine_died", ("BrokenPipeError", "ConnectionResetError", "EOFError", "CancelledError", "cancelled"),
              r"^(?:[\w.]+\.)?(?P<exc>BrokenPipeError|ConnectionResetError|EOFError|CancelledError)\b|"
              r"^RuntimeError: cancelled$",
              "a vLLM process lost its peer (another engine process died first)", _KILLED_HINT, ENGINE_DEAD,
              certain=False),
    # "!!!!!!! Segfault encountered !!!!!!!": the banner of the native stack printer that libraries under vLLM
    # (NCCL's and torch_xla's hosts, Transformer Engine) install as their SIGSEGV handler.
    Signature("crash", "engine_died",
              ("Segmentation fault", "Bus error", "Aborted", "Killed", "Fatal Python error", "Memory access fault",
               "Segfault encountered"),
              r"^(?:Segmentation fault|Bus error|Aborted|Killed)\b|Fatal Python error: (?P<what>[\w ]+)|"
              r"^(?P<gpu>Memory access fault by GPU)|^!+ (?P<banner>Segfault) encountered",
              lambda m: "a vLLM process crashed (%s)" % (m.group("what") or m.group("gpu") or m.group("banner")
                                                         or m.group(0).split()[0]),
              _KILLED_HINT, CRASH, certain=False),
    Signature("fatal_signal", "engine_died", "fatal signal from worker processes",
              r"[Gg]ot fatal signal from worker processes", "a worker process died (fatal signal)", _KILLED_HINT,
              ENGINE_GONE, certain=False),
    Signature("ray_worker_died", "engine_died", ("died", "Died", "RayActorError", "exited unexpectedly"),
              r"A worker died or was killed while executing|The actor died unexpectedly|ActorDiedError|RayActorError|"
              r"(?:actor|worker) (?:\S+ )?(?:died|exited) unexpectedly",
              "a Ray worker of vLLM died", _KILLED_HINT, ENGINE_GONE, certain=False),
    Signature("signal_report", "engine_died", "received",
              r"\*\*\* (?P<sig>SIG[A-Z]+) received|[Ss]ignal (?P<num>9|11|6|7) received",
              lambda m: "a vLLM process got %s" % (m.group("sig") or "signal " + m.group("num")), _KILLED_HINT,
              ENGINE_DEAD, certain=False),
    Signature("engine_dead", "engine_died", "EngineDeadError", r"EngineDeadError", "EngineDeadError: the engine died",
              "the engine died after start: see the root cause above it in the log", ENGINE_DEAD),
    # A settings class given a key it does not have: a dataclass's TypeError, or pydantic's message (vLLM 0.34.0 refuses
    # the speculative-config keys it removed this way); a wrapper built for another vLLM passes such keys too.
    Signature("unexpected_keyword", "config_error", ("unexpected keyword argument", "Unexpected keyword argument"),
              r"(?P<cls>\w+)\.__init__\(\) got an unexpected keyword argument '(?P<key>\w+)'|"
              r"^\s*Unexpected keyword argument(?: \[type=unexpected_keyword_argument)?",
              lambda m: "%s has no setting '%s'" % (m.group("cls"), m.group("key")) if m.group("cls")
              else "a settings class was given a key it does not have",
              "a key this vLLM release does not know (removed or renamed, or a wrapper built for another release): "
              "remove it or pin the release it belongs to", TYPED),
    # oneCCL, the collective library of Intel's GPUs: its logger's "|CCL_ERROR| file:line function: ..." (oneCCL
    # src/common/log/log.hpp LOG_ERROR) and its exceptions' "oneCCL: file:line function: EXCEPTION: ...". Its words
    # ("No such file or directory" of a device file) are no model's.
    Signature("collective_library", "distributed_error", ("CCL_ERROR|", "oneCCL: "),
              r"\|?CCL_ERROR\| ?(?P<what>.*)|oneCCL: (?P<exc>.*)", lambda m: "oneCCL: " + (m.group("what") or m.group("exc")),
              _DISTRIBUTED_HINT_CCL, TYPED, certain=False),
    # The container's entrypoint could not be started, so vLLM never ran: catatonit's "failed to exec pid1" (the init
    # of podman and ramalama containers), runc's and crun's executable not found.
    Signature("container_exec", "missing_dependency",
              ("failed to exec pid1", "executable file"),
              r"failed to exec pid1: (?P<why>.*)|exec: \\?\"(?P<cmd>[^\"\\]+)\\?\": executable file not found in \$PATH|"
              r"executable file `(?P<cmd2>[^`]+)` not found",
              None, "the container's command could not be started (vLLM never ran): check the image's entrypoint and "
              "command, and that the image was built for this host's architecture and runtime", TYPED),
    # Ray 2.52.0's GCS (gcs_server's own text): a node of the cluster stopped answering; the engine cannot go on.
    Signature("ray_node_dead", "distributed_error", "has been marked dead because the detector has missed",
              r"node (?:with node id: )?(?P<node>\w+)(?: and address: (?P<ip>[\w.:]+))?.* has been marked dead because "
              r"the detector has missed too many heartbeats",
              "the Ray node {ip} was marked dead (missed heartbeats)",
              "a node of the Ray cluster stopped answering the GCS: check that node's raylet log, its memory (the OOM "
              "killer) and the network between the nodes"),
    # -- wrappers: they point at a root cause printed earlier
    Signature("worker_failed", "engine_died", "Worker failed with error",
              r"Worker failed with error '(?P<err>.*?)'(?:, please check|$)", "{err}",
              "a worker raised during engine start-up: see the worker's traceback above", CARRIER),
    Signature("engine_init_failed", "engine_died", "Engine core initialization failed",
              r"Engine core initialization failed\. See root cause above\.(?: Failed core proc\(s\): (?P<procs>.*))?",
              "engine core initialization failed (failed procs: {procs})",
              "the engine died during start-up; its root cause is printed above this line", WRAPPER),
    Signature("engine_core_failed", "engine_died", "EngineCore failed to start", r"EngineCore failed to start",
              "EngineCore failed to start", "the engine died during start-up", WRAPPER),
    Signature("worker_proc_failed", "engine_died", "WorkerProc",
              r"WorkerProc (?:failed to start|hit an exception|initialization failed)", None,
              "a worker died during start-up", WRAPPER),
    Signature("v0_engine_failed", "engine_died", "failed to start",
              r"Engine process failed to start|API server process failed to start|Engine core proc \S+ failed to start"
              r"|Process \S+ failed to start", None, "the engine died during start-up", WRAPPER),
    Signature("rpc_failed", "engine_died", ("collective_rpc", "Error executing method"),
              r"Call to collective_rpc method failed|Error executing method '?\w+'?\. This might cause deadlock",
              None, "a worker raised: see its traceback above", WRAPPER),
)


# What the layers under vLLM print (module_utils/log/vocabulary: the CUDA runtime's errors, NCCL's results, errno, the
# statuses systemd gives a unit that failed before exec), each table read from the layer's own library. After vLLM's
# own signatures: they only explain a death, and a library's error outranks a family's guess from common words.
# The container runtime's line goes first: it quotes the library it could not load, which is not vLLM's to install.
def _vocabulary_signatures(first):
    out = []
    for name, reason, needle, pattern, hint, layer in vocabulary.patterns():
        if (name == "container_toolkit") != first:
            continue
        priority = FAMILY if name.startswith("errno_") else TYPED
        out.append(Signature(name, reason, needle, pattern, lambda m, layer=layer: "%s (%s)" % (m.group(0).strip(), layer),
                             hint, priority, certain=False))
    return tuple(out)


# Where vLLM raised a failure (module_utils/log/places), from a traceback's innermost frame, or from the texts every
# release raises there when a log kept only the exception's line: it outranks the class and words of a family.
_RAISED_HINTS = {
    "model_not_found": _MODEL_HINT,
    "out_of_memory": "vLLM found too little memory for what it was asked to hold: " + _OOM_HINT,
    "distributed_error": "the engine's processes could not reach each other: check NCCL and gloo (NCCL_DEBUG=INFO), the "
                         "interface (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME, VLLM_HOST_IP) and the shared memory",
    "missing_dependency": ("a kernel is built at start-up (torch's extension builder, FlashInfer's JIT, Triton) and its "
                           "toolchain is missing: install the CUDA toolkit of torch's CUDA (nvcc, CUDA_HOME), gcc, g++ "
                           "and ninja, or use prebuilt kernels (FlashInfer's cubin/jit-cache wheels)"),
}
RAISED_AT = dict((reason, Signature("raised_at_" + reason, reason, "", r".+", None, hint, TYPED, certain=False))
                 for reason, hint in _RAISED_HINTS.items())


def _place_signatures():
    return tuple(Signature(name, reason, needles, pattern,
                           lambda m, source=source: "%s (%s)" % (m.group(0).strip(), source),
                           _RAISED_HINTS[reason], TYPED, certain=False)
                 for name, reason, needles, pattern, source in places.patterns())


_SUPERVISOR_HINTS = {
    "timeout": "the supervisor ended a start that was not ready in the time it allows: give the start more time (the "
               "probe's or unit's start timeout; weights, torch.compile and CUDA graphs of a large model take minutes), "
               "or read what the log shows the server was doing",
    "out_of_memory": "the container's memory limit was reached (OOMKilled): raise the pod's memory limit, or lower what "
                     "vLLM holds in host memory (--swap-space, --cpu-offload-gb, the CPU KV cache)",
    "gpu_unavailable": "no node has the accelerators the pod requests: check the device plugin, the nodes' allocatable "
                       "GPUs and the pod's resources.limits",
}


def _supervisor_signatures():
    """What supervisors print when they end a start (vocabulary.SUPERVISORS): certain, and below every failure the
    server's own log explains (a probe that kills a server whose engine already failed says less than the engine)."""
    return tuple(Signature("supervisor_%d" % number, reason, needle, pattern,
                           lambda m, source=source: "%s (%s)" % (m.group(0).strip(), source), _SUPERVISOR_HINTS[reason],
                           CARRIER, certain=ends)
                 for number, (reason, ends, needle, pattern, source) in enumerate(vocabulary.SUPERVISORS))


SIGNATURES = _vocabulary_signatures(True) + SIGNATURES + _place_signatures() + _vocabulary_signatures(False)

# A pydantic ValidationError spans lines: header, field, message. Its class and
# field make the detail; an inner message a specific signature knows wins.
VALIDATION = Signature(
    "validation_error", "config_error", "validation error for",
    r"ValidationError: (?P<count>\d+) validation errors? for (?P<cls>\w+)", "{cls}", None, TYPED)
VALIDATION_MSG = re.compile(r"\s+(?:Value error, )?(?P<text>.*?)(?: \[type=(?P<type>\w+)[^\]]*\])?\s*$")
VALIDATION_HINTS = {
    "unexpected_keyword_argument": "remove '{field}': {cls} in this vLLM version does not accept it "
                                   "(e.g. attention_backend inside --speculative-config needs 0.21+)",
    "int_parsing": "'{field}' must be an integer: write it unquoted in the JSON",
    "int_type": "'{field}' must be an integer: write it unquoted in the JSON",
    "greater_than": "'{field}' is out of range: {text}",
    "literal_error": "'{field}' must be one of the listed values",
    "missing": "add the required '{field}' to the {cls} settings",
}

# Any other exception line: it names the root cause when nothing more specific does.
# "ray.exceptions.RayTaskError(ValueError): ..." names the worker's exception in brackets.
GENERIC = Signature(
    "exception", None, "",
    r"^(?:(?:[A-Za-z_]\w*\.)*(?P<exc>[A-Z]\w*(?:Error|Exception|Exit|Interrupt))|(?:[a-z_]\w*\.)+(?P<qexc>[A-Z]\w+))"
    r"(?:\((?P<inner>[A-Z]\w*)\))?(?:: ?(?P<text>.*))?$",
    None, _EXCEPTION_HINT, GENERIC, certain=False)
# pydantic's message line, also when its "N validation error for XConfig" header is not in the log.
VALUE_ERROR = Signature(
    "value_error", "config_error", "Value error, ", r"^\s*Value error, (?P<text>.*?)(?: \[type=\w+[^\]]*\]?)?\s*$",
    "{text}", "vLLM rejected its settings: change the flag or config value root_cause_line names", TYPED)
# Lines with no exception class that still report a failure: compilers, linkers, the C runtime.
BARE_FAILURE = re.compile(
    r"(?:\S*\bld(?:\.\w+)?: |collect2: |\S*(?:gcc|g\+\+|nvcc|cc1\w*|c\+\+|clang)(?:-[\d.]+)?: |error: |fatal error: |"
    r"\S+\.(?:c|cc|cpp|cu|cuh|h|hpp)(?::\d+)+: (?:fatal )?error: |CUDA error: |terminate called|"
    r"\S+\.cc:\d+: Unhandled exception|what\(\): |Error: |"
    r"(?:\[rank\d+\]:)?\[E(?:\d{3,4} \d\d:\d\d:\d\d[.\d]*(?: \d+)?)? ?\S*\.(?:cpp|cc|h):\d+\])")


class Family(object):
    """A failure family: the reason it implies, recognised by exception class or by the message's words.

    ``classes`` are exception class names (without module); ``vocabulary`` is searched in the message.
    A family rule applies to exception lines and ERROR/CRITICAL records that no signature knows.
    """

    __slots__ = ("reason", "classes", "vocabulary", "hint", "by_words", "by_class")

    def __init__(self, reason, classes, vocabulary, hint):
        self.reason, self.classes, self.hint = reason, frozenset(classes), hint
        self.vocabulary = re.compile(vocabulary)
        # The evidence each way of recognising the family leaves (detail: the line's own words).
        self.by_words = Signature("family_" + reason, reason, "", r".+", None, hint, FAMILY, certain=False)
        self.by_class = Signature("family_" + reason + "_class", reason, "", r".+", None, hint, FAMILY_CLASS,
                                  certain=False)


_DEPENDENCY_HINT = ("install or repair what the line names in the vLLM venv (its torch, CUDA and Python must match the "
                    "vLLM wheel); a compiled extension that fails to build needs a compiler, Python headers and libcuda "
                    "from the NVIDIA driver")
_GPU_HINT = ("check the NVIDIA driver (nvidia-smi), CUDA_VISIBLE_DEVICES, the container's GPU access (--gpus, device "
             "cgroup) and that the driver supports the CUDA of this torch; expose tensor x pipeline parallel GPUs")
_DISTRIBUTED_HINT = ("the vLLM processes could not talk to each other: check NCCL/gloo (NCCL_DEBUG=INFO), the network "
                     "interface (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME, VLLM_HOST_IP), shared memory and the Ray cluster")
_CONFIG_HINT = "vLLM rejected its settings: change the flag or config value root_cause_line names"

# Order matters: the first family whose vocabulary matches wins, so the narrow families come first
# ("cannot open shared object file: libcuda.so" is a missing dependency before it is a GPU problem).
FAMILIES = (
    Family("port_in_use", ("EADDRINUSE",), r"[Aa]ddress already in use|EADDRINUSE|port \d+ is (?:already )?in use|"
           r"error while attempting to bind on address", _PORT_HINT),
    Family("missing_dependency",
           ("ImportError", "ModuleNotFoundError", "PackageNotFoundError", "DistributionNotFound"),
           r"No module named|undefined symbol|cannot open shared object|cannot find -l\S+|DLL load failed|"
           r"GLIBC\w*_[\d.]+'? not found|(?:Python|cuda\w*|\w+)\.h: No such file|fatal error: \S+\.h|"
           r"command '[^']*(?:gcc|g\+\+|nvcc|cc|c\+\+|ninja)' failed|ld returned \d+ exit status|"
           r"returned non-zero exit status|Failed to (?:import|load) (?:from |python )?(?:vllm\._|the |'?[\w.]+'? module)|"
           # a kernel's toolchain: the PTX assembler refusing the GPU, a build tool the JIT builders did not find
           r"ptxas\b.*\berror|ptxas fatal|\b(?:nvcc|ninja|ptxas|gcc|g\+\+|clang|cmake)\b[^.]{0,40}\bnot found|"
           r"failed to JIT-compile|"
           r"(?:is|are) not installed|[Pp]lease install|requires? (?:the )?\S+ (?:package|library) to be installed|"
           r"could not be imported|cannot import name|partially initialized module|incompatible with this version of",
           _DEPENDENCY_HINT),
    Family("gpu_unavailable", ("NVMLError", "NVMLError_DriverNotLoaded", "NVMLError_LibraryNotFound", "CudaError"),
           r"No CUDA GPUs|no CUDA-capable device|CUDA driver|NVIDIA driver|GPU driver library|[Dd]river version is insufficient|"
           r"cudaGetDeviceCount|Found no NVIDIA|nvmlInit|NVML|cuInit|CUDA initialization|CUDA unknown error|"
           r"CUDA error: (?:unknown error|initialization error|invalid device ordinal|no kernel image|"
           r"CUDA-capable device|system not yet initialized|forward compatibility|operation not supported|"
           r"out of devices|all CUDA-capable devices are busy)|"
           r"torch\.cuda\.is_available\(\)|not compiled with CUDA|Failed to infer device type|device_type|"
           r"No (?:available )?(?:accelerator|GPU|CUDA) device|no GPUs? (?:found|available)|Current node has no GPU|"
           r"not enough GPUs|number of (?:available )?GPUs|GPU(?:s)? (?:is|are) not available|"
           r"(?:placement group|bundle).*GPU|GPU.*placement group|CUDA_VISIBLE_DEVICES|ROCm|HIP error|"
           r"metadata\.google\.internal|libtpu|TPU (?:is )?not (?:found|available)|UnspecifiedPlatform",
           _GPU_HINT),
    Family("out_of_memory", ("OutOfMemoryError", "MemoryError"),
           r"[Oo]ut of memory|OutOfMemory|[Nn]ot enough (?:\w+ )?memory|[Ii]nsufficient (?:\w+ )?memory|"
           r"Cannot allocate memory|ENOMEM|KV cache (?:is needed|memory)|(?:stored|fit) in (?:the )?KV cache|"
           r"cache blocks|less than desired GPU memory|memory profiling|/dev/shm|shared memory|"
           r"CUBLAS_STATUS_ALLOC_FAILED|exceeds? (?:the )?(?:available|free|total) (?:\w+ )?memory|"
           r"OUT_OF_(?:DEVICE_|HOST_)?(?:MEMORY|RESOURCES)|[Aa]llocation [Ff]ail(?:ure|ed)|[Ff]ailed to allocate",
           _OOM_HINT),
    Family("model_not_found",
           ("FileNotFoundError", "HfHubHTTPError") + vocabulary.HF_HUB_MODEL_ERRORS,
           r"does not appear to have (?:a )?files? named|is not a local folder|not a valid model identifier|"
           r"Repository Not Found|[Rr]epo(?:sitory)? (?:id )?not found|Can't load (?:the )?(?:tokenizer|config|model)|"
           r"[Gg]ated repo|40[134] Client Error|Unauthorized|Invalid repository ID|No such file or directory|"
           r"Cannot find any (?:of the )?model weights|[Nn]o (?:model )?weights? (?:files? )?found|"
           r"couldn't connect to 'https://huggingface\.co'|outgoing traffic has been disabled|"
           r"Incorrect path_or_model_id|not found in the (?:local )?cache|[Nn]ot a directory|"
           r"(?:[Nn]o|missing|find|named|locate|open) (?:\S+ )?config\.json|config\.json(?: file)? (?:not found|is missing)|"
           r"No supported config format|Could not detect config format|no config file found|"
           r"config file at .* is not a valid JSON|"
           r"offline mode is enabled|HF_HUB_OFFLINE|No adapter found|adapter_config\.json",
           _MODEL_HINT),
    Family("distributed_error", ("DistBackendError", "DistNetworkError", "DistStoreError", "DistError"),
           r"NCCL|nccl|[Gg]loo|c10d|TCPStore|ProcessGroup|torch\.distributed|[Rr]endezvous|init_process_group|"
           r"distributed_init|[Cc]onnection refused|connect\(\) timed out|Socket Timeout|Broken pipe.*(?:rank|store)|"
           r"Ray (?:cluster|GCS)|GCS|Could not (?:connect to|find any running) Ray|ray\.init",
           _DISTRIBUTED_HINT),
    Family("config_error",
           ("ValidationError", "NotImplementedError", "ArgumentError", "ArgumentTypeError", "ValueError",
            "AssertionError", "TypeError", "JSONDecodeError", "ConfigError"),
           r"not supported|only supported|[Uu]nsupported|must be|should be|cannot be|can't be|can only be|"
           r"is not a valid|[Ii]nvalid|not recogni[sz]ed|[Uu]nrecognized|[Uu]nknown (?:\w+ )?(?:argument|option|model|"
           r"architecture|method|parser|value|key)|\b[Ee]xpected\b|exceeds|(?:greater|larger|smaller|less) than|"
           r"[Pp]lease (?:set|use|pass|specify|choose)|trust_remote_code|max_model_len|max_num_batched_tokens|"
           r"does not match|[Mm]ismatch|[Ii]ncompatible|not compatible|no longer supported|not allowed|"
           r"not implemented|speculative|quantization|does not support|doesn't support|is required|requires",
           _CONFIG_HINT),
)


# Lines vLLM logs at INFO that still explain a failure; the quiet lines are never parsed, so these are found
# by their words in the whole block.
# (and the supervisors' lines, which `kubectl describe` indents like code a traceback quotes)
QUIET_SIGNATURES = _supervisor_signatures() + (
    Signature("no_platform", "gpu_unavailable", "No platform detected",
              r"No platform detected, vLLM is running on UnspecifiedPlatform",
              "vLLM detected no accelerator platform (no GPU, driver or device library visible to it)", _GPU_HINT,
              FAMILY, certain=False),
)

_CONFIG = FAMILIES[-1]
FAMILY_HINTS = dict((family.reason, family.hint) for family in FAMILIES)


def family_of(exc, text):
    """(family, the signature to record) for an exception class (or None) and its message; (None, None).

    A narrow family's words come first, then the exception's class, then the words of configuration errors,
    which are the commonest words of all ("ImportError: X requires installation of Y" is a missing dependency).
    """
    for family in FAMILIES[:-1]:
        if family.vocabulary.search(text):
            return family, family.by_words
    if exc:
        for family in FAMILIES:
            if exc in family.classes:
                return family, family.by_class
    if _CONFIG.vocabulary.search(text):
        return _CONFIG, _CONFIG.by_words
    return None, None


def _estimate(text):
    m = re.search(r"estimated maximum model length is (\d+)", text)
    return " (about %s tokens fit)" % m.group(1) if m else ""


def _alloc(text):
    m = re.search(r"Tried to allocate ([\d.]+ [KMGT]?i?B)\. GPU (\d+) has a total capacity of ([\d.]+ [KMGT]?i?B) of "
                  r"which ([\d.]+ [KMGT]?i?B) is free", text)
    if not m:
        return ""
    return " (tried to allocate %s; GPU %s has %s, %s free)" % m.groups()


def user_signature(index, spec):
    """Build a signature from a ``fail_patterns`` entry: a regex, or {pattern, reason, hint}."""
    if isinstance(spec, dict):
        pattern, reason, hint = spec.get("pattern"), spec.get("reason") or "config_error", spec.get("hint")
    else:
        pattern, reason, hint = spec, "config_error", None
    if not isinstance(pattern, str) or not pattern:
        raise ValueError("fail_patterns[%d] needs a non-empty regex 'pattern'" % index)
    if reason not in FAILURE_REASONS:
        raise ValueError("fail_patterns[%d]: reason must be one of %s" % (index, ", ".join(FAILURE_REASONS)))
    try:
        return Signature("fail_patterns[%d]" % index, reason, "", pattern, None,
                         hint or "this line matched fail_patterns[%d] (%s)" % (index, pattern), flags=re.M)
    except re.error as e:
        raise ValueError("fail_patterns[%d] is not a valid regex: %s" % (index, e))
