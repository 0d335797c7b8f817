# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What vLLM's log says: line grammar, startup milestones and failure signatures.

``LogWatch`` reads blocks of lines (as ``log_follower`` delivers them) and keeps
what matters: the milestones seen, the evidence each failure signature left,
the first *certain* failure, whether a shutdown was requested, and a bounded
tail. ``LogWatch.finding()`` picks the root cause: the most specific evidence,
earliest first, so the wrappers vLLM prints after the real error
("Engine core initialization failed. See root cause above") never win over it.

The signature table is data: adding a failure a new vLLM prints is one entry.
"""

from __future__ import annotations

import re
from collections import deque

READY = "ready"
TIMEOUT = "timeout"
REASONS = (
    READY, "missing_dependency", "out_of_memory", "config_error", "model_not_found", "port_in_use",
    "gpu_unavailable", "distributed_error", "engine_died", "process_exited", TIMEOUT,
)
FAILURE_REASONS = REASONS[1:]

# Priorities: a specific root cause beats an unknown exception, which beats the
# reports of a death and the wrappers that re-raise it. Equal: the earlier line wins.
ROOT, TYPED, GENERIC, ENGINE_GONE, ENGINE_DEAD, CARRIER, WRAPPER = 100, 80, 60, 50, 40, 20, 10

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_PREFIX = re.compile(r"\((?P<proc>[A-Za-z][\w.-]*)(?: \w+=\w+)*? pid=(?P<pid>\d+)\) ?")
_VLLM = re.compile(
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<ts>\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)? "
    r"\[(?P<src>[^\]]*)\] ?(?P<msg>.*)")
_UVICORN = re.compile(r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL|TRACE):\s+(?P<msg>.*)")

# Lines at INFO or DEBUG level never prove a failure. They start with one of
# these, or with a process prefix learned from an earlier INFO/DEBUG line.
_QUIET = ("INFO", "DEBUG")
_MAX_QUIET = 256
# Traceback frames and source lines quote code, not errors.
_FRAME = re.compile(r"\s*(?:File \"|\^+\s*$|Traceback \(most recent call last\))|\s{4}")
NOISE = re.compile("|".join((
    r"Found ulimit of",                          # fd limit warning quoting an OSError
    r"retrying \d+ of \d+",                      # transient download retry
    r"Error retrieving file list",               # precedes the real ValidationError
    r"resource_tracker",                         # leaked semaphore/shared_memory at exit
    r"leaked (?:semaphore|shared_memory) objects",
    r"destroy_process_group\(\) was not called",
    r"warnings\.warn\(",
)))
SHUTDOWN_MARK = "API server: shutdown triggered"
# Output of a process other than the one that announced its shutdown: a new API server (its own pid),
# or the argparse usage/error lines a new `vllm serve` prints before any logging is set up.
_NEW_PROCESS = re.compile(r"^(?:\(APIServer pid=(?P<pid>\d+)\)|usage: |[\w.-]+(?: serve)?: error: )", re.M)

MILESTONES = (
    ("api_server_up", ("vLLM server version", "non-default args", "\u2588")),
    ("engine_init", ("Initializing a V1 LLM engine",)),
    ("weights_loaded", ("Loading weights took", "Model loading took")),
    ("kv_cache_sized", ("KV cache size", "Available KV cache memory", "for KV cache on node")),
    ("cuda_graphs_captured", ("Graph capturing finished",)),
    ("engine_ready", ("init engine (profile, create kv cache",)),
    ("server_starting", ("Starting vLLM server on", "Starting vLLM API server")),
    ("app_startup_complete", ("Application startup complete.",)),
)
MILESTONE_ORDER = tuple(milestone[0] for milestone in MILESTONES) + ("http_ready",)


class LogLine(object):
    """One log line split into process prefix, level, timestamp, source and message."""

    __slots__ = ("raw", "proc", "pid", "level", "ts", "src", "msg")

    def __init__(self, raw, proc, pid, level, ts, src, msg):
        self.raw, self.proc, self.pid, self.level, self.ts, self.src, self.msg = raw, proc, pid, level, ts, src, msg


def parse_line(raw):
    """Parse a vLLM, uvicorn or bare (traceback, stderr) line."""
    raw = _ANSI.sub("", raw).rstrip("\r\n")
    rest, proc, pid = raw, None, None
    m = _PREFIX.match(raw)
    if m:
        proc, pid, rest = m.group("proc"), int(m.group("pid")), raw[m.end():]
    m = _VLLM.match(rest)
    if m:
        return LogLine(raw, proc, pid, m.group("level"), m.group("ts"), m.group("src"), m.group("msg"))
    m = _UVICORN.match(rest)
    if m:
        return LogLine(raw, proc, pid, m.group("level"), None, "uvicorn", m.group("msg"))
    return LogLine(raw, proc, pid, None, None, None, rest)


class Signature(object):
    """A failure a log line proves: regex, reason, how to word the detail and hint.

    ``detail`` and ``hint`` are format strings over the regex's named groups (or
    callables taking the match). ``certain`` signatures end a wait at once even
    while the process lives; the others only explain a death.
    """

    __slots__ = ("name", "reason", "needle", "regex", "detail", "hint", "priority", "certain")

    def __init__(self, name, reason, needle, pattern, detail=None, hint="", priority=ROOT, certain=True, flags=0):
        self.name, self.reason, self.needle = name, reason, needle
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
    Signature("shared_library", "missing_dependency", "cannot open shared object file",
              r"(?P<lib>lib[\w.+-]*\.so[\w.]*): cannot open shared object file", "{lib}",
              "install the system package that provides {lib}", TYPED, certain=False),
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
              r"Free memory on device (?P<dev>\S+) \((?P<free>[\d.]+)/(?P<total>[\d.]+) GiB\) on startup is less than "
              r"desired GPU memory utilization \((?P<util>[\d.]+), (?P<want>[\d.]+) GiB\)",
              "free {free} of {total} GiB on {dev} < gpu_memory_utilization {util} ({want} GiB)",
              "another process holds GPU memory (an old server? check nvidia-smi and stop it) or lower "
              "--gpu-memory-utilization below the free share"),
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
    Signature("dev_shm", "out_of_memory", "/dev/shm",
              r"Insufficient space in /dev/shm for shared-memory allocation: (?P<need>\d+ MiB) required, (?P<free>\d+ MiB) free",
              "/dev/shm has {free} free, {need} required",
              "enlarge /dev/shm: docker --shm-size 512m (molecule shm_size) or --ipc=host"),
    # -- config_error (token budget, parallel layout, drafter, parsers, flags)
    Signature("token_budget", "config_error", "does not allow any tokens to be scheduled",
              r"max_num_scheduled_tokens is set to (?P<n>-?\d+) based on the speculative decoding settings, which does "
              r"not allow any tokens to be scheduled",
              "max_num_scheduled_tokens = {n} (max_num_batched_tokens - (num_speculative_tokens - 1) * max_num_seqs)",
              "raise --max-num-batched-tokens or lower num_speculative_tokens/max_num_seqs "
              "(e.g. --max-num-batched-tokens 32768 for num_speculative_tokens 15)"),
    Signature("mamba_block_budget", "config_error", "In Mamba cache align mode",
              r"In Mamba cache align mode, block_size \((?P<b>\d+)\) must be <= max_num_batched_tokens \((?P<m>\d+)\)",
              "attention block {b} > max_num_batched_tokens {m}", "raise --max-num-batched-tokens to at least {b}"),
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
    Signature("attention_backend_missing", "config_error", "",
              r"No valid attention backend found|does not have non-causal support, which is required for DFlash", None,
              "DFlash needs non-causal attention: pass --attention-backend flash_attn (FLASH_ATTN or FLEX_ATTENTION)"),
    Signature("cpu_attention", "config_error", "Unsupported CPU attention configuration",
              r"Unsupported CPU attention configuration: (?P<cfg>[^'\"]*)", "{cfg}",
              "the CPU attention backend supports head_dim 32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512: "
              "use a model with one of these"),
    Signature("parser", "config_error", "parser:",
              r"invalid (?P<kind>tool call|reasoning) parser: (?P<name>[^\s(']+)", "unknown {kind} parser '{name}'",
              "pick a parser this vLLM lists (e.g. --tool-call-parser qwen3_coder, --reasoning-parser qwen3)"),
    Signature("trust_remote_code", "config_error", "trust_remote_code",
              r"Failed to load the model config\. If the model is a custom model", "custom model config needs remote code",
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
    Signature("argparse", "config_error", ": error: ",
              r"^(?![\w.]*(?:Error|Exception|Warning):)[\w.-]+(?: \w+)?: error: (?P<why>.+)", "{why}",
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
    Signature("hf_gated", "model_not_found", "",
              r"GatedRepoError|Cannot access gated repo|Access to model .* is restricted|401 Client Error", None, _GATED_HINT),
    # -- port_in_use
    Signature("address_in_use", "port_in_use", "ddress already in use",
              r"[Aa]ddress already in use(?: \(addr='(?P<addr>[^']*)'\))?",
              lambda m: "Address already in use" + (" (%s)" % m.group("addr") if m.group("addr") else ""),
              _PORT_HINT),
    # -- gpu_unavailable
    Signature("world_size", "gpu_unavailable", "is larger than the number of available GPUs",
              r"World size \((?P<ws>\d+)\) is larger than the number of available GPUs \((?P<gpus>\d+)\)",
              "world size {ws} > {gpus} available GPU(s)",
              "expose at least tensor_parallel_size x pipeline_parallel_size GPUs (CUDA_VISIBLE_DEVICES, container "
              "device requests) or lower --tensor-parallel-size"),
    Signature("no_gpu", "gpu_unavailable", "",
              r"No CUDA GPUs are available|no CUDA-capable device is detected|Found no NVIDIA driver on your system|"
              r"CUDA driver initialization failed|Failed to infer device type",
              None, "check the NVIDIA driver (nvidia-smi), CUDA_VISIBLE_DEVICES and the container's GPU access"),
    # -- distributed_error
    Signature("nccl", "distributed_error", "", r"DistBackendError|NCCL error(?: in: (?P<where>[^,]*))?", None, _NCCL_HINT),
    Signature("nccl_warn", "distributed_error", "NCCL WARN", r"NCCL WARN .*Cuda failure '(?P<why>[^']*)'", "{why}",
              _NCCL_HINT, certain=False),
    Signature("gloo_netlink", "distributed_error", "Address family not supported by protocol",
              r"gloo.*Address family not supported by protocol", "gloo could not enumerate network interfaces",
              "allow AF_NETLINK in the unit's RestrictAddressFamilies= (gloo lists interfaces through netlink)"),
    Signature("gloo", "distributed_error", "gloo", r"\[enforce fail at [^\]]*gloo[^\]]*\] (?P<why>.*)", "{why}",
              "torch.distributed (gloo) failed: check the network sandboxing of the service"),
    # -- timeout (vLLM's own wait for the engine processes)
    Signature("engine_ready_timeout", TIMEOUT, "Timed out waiting for engine core processes to start",
              r"Timed out waiting for engine core processes to start\.(?:.*?Waited (?P<s>\d+)s)?",
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
              r"Engine core process (?P<name>\S+) died unexpectedly", "engine core process {name} died", _KILLED_HINT,
              ENGINE_GONE),
    Signature("worker_died", "engine_died", "died unexpectedly",
              r"Worker proc (?P<name>\S+) died unexpectedly(?:, shutting down executor)?(?: \(exit code: (?P<code>[^)]*)\))?",
              lambda m: "worker %s died (exit code: %s)" % (m.group("name"), m.group("code") or "None"), _KILLED_HINT,
              ENGINE_GONE),
    Signature("peer_lost", "engine_died", "",
              r"^(?:[\w.]+\.)?(?P<exc>BrokenPipeError|ConnectionResetError|EOFError|CancelledError)\b|"
              r"^RuntimeError: cancelled$",
              "a vLLM process lost its peer (another engine process died first)", _KILLED_HINT, ENGINE_DEAD,
              certain=False),
    Signature("engine_dead", "engine_died", "EngineDeadError", r"EngineDeadError", "EngineDeadError: the engine died",
              "the engine died after start: see the root cause above it in the log", ENGINE_DEAD),
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
)

# A pydantic ValidationError spans lines: header, field, message. Its class and
# field make the detail; an inner message a specific signature knows wins.
VALIDATION = Signature(
    "validation_error", "config_error", "validation error for",
    r"ValidationError: (?P<count>\d+) validation errors? for (?P<cls>\w+)", "{cls}", None, TYPED)
_VALIDATION_MSG = re.compile(r"\s+(?:Value error, )?(?P<text>.*?)(?: \[type=(?P<type>\w+)[^\]]*\])?\s*$")
_VALIDATION_HINTS = {
    "unexpected_keyword_argument": "remove '{field}': {cls} in this vLLM version does not accept it "
                                   "(e.g. attention_backend inside --speculative-config needs 0.21+)",
    "int_parsing": "'{field}' must be an integer: write it unquoted in the JSON",
    "int_type": "'{field}' must be an integer: write it unquoted in the JSON",
    "greater_than": "'{field}' is out of range: {text}",
    "literal_error": "'{field}' must be one of the listed values",
    "missing": "add the required '{field}' to the {cls} settings",
}

# Any other exception line: it names the root cause when nothing more specific does.
GENERIC = Signature(
    "exception", None, "",
    r"^(?:[A-Za-z_]\w*\.)*(?P<exc>[A-Z]\w*(?:Error|Exception))(?:: (?P<text>.*))?$", None,
    "see the exception in root_cause_line", GENERIC, certain=False)


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


class Evidence(object):
    """A signature's first match: the line, where it was (for ordering) and when it was seen."""

    __slots__ = ("signature", "match", "line", "order", "seen_at", "config_class", "field", "text", "kind")

    def __init__(self, signature, match, line, order, seen_at):
        self.signature, self.match, self.line, self.order, self.seen_at = signature, match, line, order, seen_at
        self.config_class = self.field = self.text = self.kind = None

    @property
    def reason(self):
        return self.signature.reason

    @property
    def priority(self):
        return self.signature.priority

    @property
    def detail(self):
        if self.signature is VALIDATION:
            where = self.config_class + ("." + self.field if self.field else "")
            return "%s: %s" % (where, self.text) if self.text else where
        text = self.signature.render(self.signature.detail, self.match)
        return "%s: %s" % (self.config_class, text) if self.config_class else text

    @property
    def hint(self):
        if self.signature is VALIDATION:
            template = _VALIDATION_HINTS.get(self.kind, "fix the {cls} settings as the detail says")
            return template.format(field=self.field or "", cls=self.config_class, text=self.text or "")
        return self.signature.render(self.signature.hint, self.match)


class Sighting(object):
    """When a milestone was first seen: the engine's clock, the line's own timestamp, and if read as backlog."""

    __slots__ = ("seen_at", "ts", "backlog")

    def __init__(self, seen_at, ts=None, backlog=False):
        self.seen_at, self.ts, self.backlog = seen_at, ts, backlog


class LogWatch(object):
    """Everything a wait needs to know from the log read so far, in bounded memory."""

    def __init__(self, fail_patterns=(), ready_patterns=(), tail_lines=40, seen=()):
        self.user_signatures = [user_signature(i, spec) for i, spec in enumerate(fail_patterns or ())]
        self.ready_regexes = []
        for i, pattern in enumerate(ready_patterns or ()):
            try:
                self.ready_regexes.append(re.compile(pattern, re.M))
            except re.error as e:
                raise ValueError("ready_patterns[%d] is not a valid regex: %s" % (i, e))
        self.tail = deque(maxlen=max(0, tail_lines))
        self.milestones = dict((name, Sighting(None)) for name in seen)
        self.evidence = {}
        self.fatal = None
        self.shutdown = False
        self._shutdown_pid = None
        self.ready_pattern_seen = "ready_pattern" in self.milestones
        self._block = 0
        self._quiet = _QUIET
        self._validation = None
        self._validation_lines = 0

    @property
    def log_ready(self):
        """The log (since the offset) says the HTTP server is up."""
        return "app_startup_complete" in self.milestones or self.ready_pattern_seen

    def last_milestone(self):
        seen = [name for name in MILESTONE_ORDER if name in self.milestones]
        return seen[-1] if seen else None

    def feed(self, block, now=None, backlog=False):
        """Take a block of complete lines (joined by newlines).

        The work is a few C-speed passes over the block (milestone needles,
        quiet-prefix filter); only lines above INFO level, and bare lines such as
        tracebacks, are parsed one by one.
        """
        self._block += 1
        if self.tail.maxlen:
            self.tail.extend(block.rsplit("\n", self.tail.maxlen)[-self.tail.maxlen:])
        self._spot_milestones(block, now, backlog)
        self._scan_outside_shutdowns(block, now)
        if not self.ready_pattern_seen:
            for regex in self.ready_regexes:
                if regex.search(block):
                    self.ready_pattern_seen = True
                    self.milestones.setdefault("ready_pattern", Sighting(now, None, backlog))
                    break

    def _scan_outside_shutdowns(self, block, now):
        """Scan for failures, except in what a process prints after its shutdown was requested.

        After ``shutdown triggered`` the errors of the stopping server (EngineDeadError...) are noise, until
        another process speaks: a restart writes the old server's shutdown and the new server's start
        into the same log, and the new server's failure must still count.
        """
        while block:
            if self.shutdown:
                block = self._after_shutdown(block)
                if not block:
                    return
            mark = block.find(SHUTDOWN_MARK)
            if mark < 0:
                self._scan(block, now)
                return
            self._scan(block[:block.rfind("\n", 0, mark) + 1], now)
            self.shutdown = True
            self._shutdown_pid = parse_line(_line_at(block, mark)).pid
            end = block.find("\n", mark)
            block = block[end + 1:] if end >= 0 else ""

    def _after_shutdown(self, block):
        """The part of ``block`` from the first line of another process on (clearing the shutdown), or ''."""
        for m in _NEW_PROCESS.finditer(block):
            pid = m.group("pid")
            if pid is not None and (self._shutdown_pid is None or int(pid) == self._shutdown_pid):
                continue
            self.shutdown = False
            return block[m.start():]
        return ""

    def finding(self):
        """The root-cause evidence: highest priority, then earliest; None when the log shows no failure."""
        best = None
        for ev in self.evidence.values():
            if best is None or (ev.priority, _neg(ev.order)) > (best.priority, _neg(best.order)):
                best = ev
        return best

    def engine_death_seen(self):
        return any(ev.reason == "engine_died" for ev in self.evidence.values())

    def _spot_milestones(self, block, now, backlog):
        for name, needles in MILESTONES:
            if name in self.milestones:
                continue
            for needle in needles:
                pos = block.find(needle)
                if pos >= 0:
                    line = parse_line(_line_at(block, pos))
                    self.milestones[name] = Sighting(now, line.ts, backlog)
                    break

    def _scan(self, text, now):
        quiet = self._quiet
        lines = text.split("\n")
        for index, raw in [(i, l) for i, l in enumerate(lines) if l and not l.startswith(quiet)]:
            self._examine(raw, index, now)
        for sig in self.user_signatures:
            if sig.name not in self.evidence:
                m = sig.regex.search(text)
                if m:
                    self._record(sig, m, parse_line(_line_at(text, m.start())), text.count("\n", 0, m.start()), now)

    def _examine(self, raw, pos, now):
        line = parse_line(raw)
        if line.level in _QUIET:
            if line.proc is not None and len(self._quiet) < _MAX_QUIET:
                prefix = raw[:raw.index(line.level)]
                self._quiet += (prefix + "INFO", prefix + "DEBUG")
            return
        msg = line.msg
        context = None
        if self._validation is not None:
            consumed, context = self._continue_validation(line)
            if consumed:
                return
        if not msg.strip() or _FRAME.match(msg) or NOISE.search(msg):
            return
        for sig in SIGNATURES:
            if sig.needle in msg:
                m = sig.regex.search(msg)
                if m:
                    ev = self._record(sig, m, line, pos, now)
                    if ev is not None:
                        ev.config_class = context
                    return
        m = VALIDATION.regex.search(msg)
        if m:
            ev = self._record(VALIDATION, m, line, pos, now)
            if ev is not None:
                ev.config_class = m.group("cls")
                self._validation, self._validation_lines = ev, 0
            return
        m = GENERIC.regex.match(msg)
        if m:
            self._record(GENERIC, m, line, pos, now)

    def _continue_validation(self, line):
        """Fill the pending ValidationError's field and message.

        Returns (consumed, config_class): the field line is consumed; the message
        line is not (a specific signature may know it) but carries the class.
        """
        ev = self._validation
        self._validation_lines += 1
        if self._validation_lines > 4 or (line.proc != ev.line.proc and line.proc is not None):
            self._validation = None
            return False, None
        msg = line.msg.rstrip()
        if not msg.strip():
            return True, None
        if msg[0] not in " \t":
            if ev.field is None and re.match(r"^[\w.\[\]-]+$", msg):
                ev.field = msg
                return True, None
            self._validation = None
            return False, None
        m = _VALIDATION_MSG.match(msg)
        ev.text, ev.kind = m.group("text"), m.group("type")
        if msg.lstrip().startswith("Value error,"):
            ev.kind = ev.kind or "value_error"
        self._validation = None
        return False, ev.config_class

    def _record(self, sig, match, line, pos, now):
        if self.shutdown or sig.name in self.evidence:
            return None
        ev = Evidence(sig, match, line, (self._block, pos), now)
        self.evidence[sig.name] = ev
        if sig.certain and self.fatal is None:
            self.fatal = ev
        return ev


def _neg(order):
    return (-order[0], -order[1])


def _line_at(block, pos):
    start = block.rfind("\n", 0, pos) + 1
    end = block.find("\n", pos)
    return block[start:] if end < 0 else block[start:end]


def classify_lines(lines, fail_patterns=(), ready_patterns=()):
    """Replay a whole log (an iterable of lines) through a fresh LogWatch."""
    watch = LogWatch(fail_patterns, ready_patterns)
    watch.feed("\n".join(line.rstrip("\n") for line in lines))
    return watch
