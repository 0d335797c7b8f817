"""The second reading of a failure's line (module_utils/log/layers): its class, the package that raised it, its layer;
and the two ways a line hides what it says: an error quoting another, a log quoted in a reply."""

from __future__ import annotations

import builtins

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.log import layers
from ansible_collections.llmops.vllm.plugins.module_utils.log.grammar import nested
from ansible_collections.llmops.vllm.plugins.module_utils.log.signatures import FAILURE_REASONS
from ansible_collections.llmops.vllm.tests.helpers.log_replay import replay

SITE = "/opt/vllm/lib/python3.12/site-packages/"


def test_every_table_names_known_reasons():
    rows = list(layers.BUILTIN) + [(c, r) for _s, _m, c, r in layers.LIBRARY_CLASSES] + list(layers.STATUS)
    rows += [(name, reason) for name, _path, reason, _settings, _hint in layers.LAYERS]
    assert [row for row in rows if row[1] not in FAILURE_REASONS] == []


def test_builtin_classes_exist_in_this_python():
    """A name here that Python does not have would silently never match."""
    assert [cls for cls, _reason in layers.BUILTIN if not isinstance(getattr(builtins, cls, None), type)] == []


@pytest.mark.parametrize("cls, reason", [
    ("ConnectionRefusedError", "distributed_error"),    # through ConnectionError
    ("ConnectionAbortedError", "distributed_error"),
    ("BrokenPipeError", "engine_died"),                 # its own row: the peer died first
    ("ModuleNotFoundError", "missing_dependency"),      # through ImportError
    ("FileNotFoundError", "model_not_found"),
    ("RecursionError", "engine_died"),
    ("ValueError", None),                               # proves nothing alone: its layer decides
    ("KeyError", None),
    ("NoSuchClassError", None),
    ("ActorDiedError", "engine_died"),                  # ray.exceptions
    ("OutOfResources", "out_of_memory"),                # triton.runtime.errors
    ("CompilationError", "engine_died"),                # triton.compiler.errors: a kernel's source, not a toolchain
])
def test_class_reason(cls, reason):
    assert layers.class_reason(cls) == reason


@pytest.mark.parametrize("path, layer", [
    (SITE + "flashinfer/jit/core.py", "FlashInfer JIT"),
    (SITE + "torch/utils/cpp_extension.py", "torch extension builder"),
    (SITE + "torch/_inductor/codecache.py", "torch.compile"),
    (SITE + "vllm/config/speculative.py", "vLLM configuration"),
    (SITE + "vllm/model_executor/model_loader/weight_utils.py", "vLLM model loader"),
    (SITE + "vllm/v1/engine/core.py", "vLLM"),
    ("/usr/lib/python3.12/json/decoder.py", None),
    ("jaxlib/xla_extension/", "XLA/TPU runtime"),       # a qualified class's module, as a path
])
def test_layer_of(path, layer):
    found = layers.layer_of(path)
    assert (found[0] if found else None) == layer


@pytest.mark.parametrize("cls, text, where, line, reason, layer, known", [
    ("KeyError", "'model.layers.0.mlp'", (SITE + "vllm/model_executor/model_loader/default_loader.py", "load_weights"),
     "KeyError: 'model.layers.0.mlp'", "model_not_found", "vLLM model loader", False),
    ("XlaRuntimeError", "RESOURCE_EXHAUSTED: Error allocating device buffer", None,
     "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Error allocating device buffer", "out_of_memory",
     "XLA/TPU runtime", True),
    ("RuntimeError", "Ninja build failed", (SITE + "flashinfer/jit/cpp_ext.py", "run_ninja"),
     "RuntimeError: Ninja build failed", "missing_dependency", "FlashInfer JIT", False),
    # no frame, no qualified class: Python's own layer, and the process died of it
    ("KeyError", "'rope_type'", None, "KeyError: 'rope_type'", "engine_died", "Python", False),
])
def test_read(cls, text, where, line, reason, layer, known):
    reading = layers.read(cls, text, where, line)
    assert (reading.reason, reading.layer, reading.known) == (reason, layer, known)


def _traceback(path, function, last):
    return ["(EngineCore_DP0 pid=7) ERROR 11-20 10:00:16 [core.py:708] EngineCore failed to start.",
            "(EngineCore_DP0 pid=7) ERROR 11-20 10:00:16 [core.py:708] Traceback (most recent call last):",
            '(EngineCore_DP0 pid=7) ERROR 11-20 10:00:16 [core.py:708]   File "%s%s", line 3, in %s' % (
                SITE, path, function),
            "(EngineCore_DP0 pid=7) ERROR 11-20 10:00:16 [core.py:708]     raise x",
            "(EngineCore_DP0 pid=7) ERROR 11-20 10:00:16 [core.py:708] " + last,
            "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. "
            "Failed core proc(s): {}"]


def test_an_unknown_error_names_its_layer_and_line_never_a_bare_exit():
    reason, ev, watch = replay(_traceback("torch/_inductor/codecache.py", "compile", "AssertionError: slot 3 > 2"),
                               True)
    assert reason == "engine_died" and ev.line.raw.endswith("AssertionError: slot 3 > 2")
    assert watch.explain("process_exited")[1] == "not recognised, raised in torch.compile: AssertionError: slot 3 > 2"
    log = ["Traceback (most recent call last):", '  File "/srv/app.py", line 3, in main', "    x()",
           "KeyError: 'rope_type'"]
    reason, _ev, _watch = replay(log, True)
    assert reason == "engine_died"      # not process_exited: the log shows the Python error that ended it


@pytest.mark.parametrize("text, inner", [
    ("RuntimeError: Worker failed with error 'No available memory for the cache blocks.', please check the stack "
     "trace above for the root cause", "No available memory for the cache blocks."),
    ("ray.exceptions.RayTaskError(ValueError): ray::RayWorkerWrapper.execute_method() (pid=1) ValueError: bad dtype",
     "ValueError: bad dtype"),
    ("TypeError: [address=0.0.0.0:1, pid=2] AsyncEngineArgs.__init__() got an unexpected keyword argument 'x'", None),
    ("RuntimeError: Failed to load model: OSError: gated repo", "OSError: gated repo"),
    ("ValueError: plain message", None),
])
def test_nested(text, inner):
    assert nested(text) == inner


def test_a_wrapper_never_wins_over_the_error_it_quotes():
    log = ["(APIServer pid=1) INFO 11-20 10:00:01 [api_server.py:1880] vLLM API server version 0.20.2",
           "(EngineCore_DP0 pid=7) ERROR 11-20 10:00:16 [core.py:708] RuntimeError: Worker failed with error "
           "'The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in KV "
           "cache (12000). Try increasing `gpu_memory_utilization`', please check the stack trace above for the root "
           "cause"]
    assert replay(log, True)[0] == "out_of_memory"


def test_a_quoted_log_reads_as_the_log():
    log = _traceback("vllm/config/speculative.py", "_verify_args", "ValueError: num_speculative_tokens must be > 0")
    bare, quoted = replay(log, True), replay(["> " + line for line in log], True)
    assert bare[0] == quoted[0] == "config_error"
    assert quoted[1].line.raw == bare[1].line.raw


def test_a_list_of_possible_causes_is_no_evidence():
    line = ("(raylet) A worker died or was killed while executing a task by an unexpected system error. Worker exit "
            "type: SYSTEM_ERROR Some common causes include: (1) the process was killed by the OOM killer due to high "
            "memory usage, (2) ray stop --force was called")
    assert replay([line], True)[0] == "engine_died"


def test_torch_logging_records_are_read_with_their_level():
    """torch's own formatter ("[rank0]:E0701 14:28:21.083000 911603 path.py:539] [0/0] ..."): an E is an ERROR."""
    log = ["[rank0]:E0701 14:28:21.083000 911603 torch/_inductor/runtime/triton_heuristics.py:539] [0/0] ptxas "
           "/tmp/t.ptx, line 6; error   : PTX .version 8.4 does not support .target sm_120a",
           "ERROR 07-01 14:28:21 [core.py:515] EngineCore failed to start."]
    reason, ev, _watch = replay(log, True)
    assert reason == "missing_dependency" and "sm_120a" in ev.line.raw
    warning = "[rank0]:W0701 14:28:20.000000 911603 torch/_dynamo/convert_frame.py:1] [0/0] ptxas error: recompiling"
    assert replay([warning], True)[0] == "process_exited"    # a warning explains nothing by its words alone


def test_onecc_records_and_exceptions_are_a_distributed_failure():
    log = ["2024:08:21-10:41:21:( 8320) |CCL_ERROR| atl_ofi_helper.cpp:907 atl_ofi_get_prov_list: can't create "
           "providers for name shm", "failed to initialize ATL"]
    assert replay(log, True)[0] == "distributed_error"
    line = ("RuntimeError: oneCCL: ze_fd_manager.cpp:214 fill_device_fds: EXCEPTION: open failed: fd: -1, errno: No "
            "such file or directory")
    assert replay([line], True)[0] == "distributed_error"    # not a model's missing file


@pytest.mark.parametrize("line, reason", [
    ("ERROR (catatonit:2): failed to exec pid1: No such file or directory", "missing_dependency"),
    ('Error: exec: "vllm": executable file not found in $PATH', "missing_dependency"),
])
def test_a_container_whose_command_never_ran(line, reason):
    assert replay([line], True)[0] == reason


def test_a_probe_failure_explains_but_only_the_kubelets_kill_ends_the_start():
    readiness = '  Warning  Unhealthy  5s  kubelet  Readiness probe failed: Get "http://10.0.0.5:8000/health"'
    liveness = '  Warning  Unhealthy  9s  kubelet  Liveness probe failed: Get "http://10.0.0.5:8000/health"'
    kill = "  Normal   Killing    9s  kubelet  Container vllm failed liveness probe, will be restarted"
    watch = replay([readiness, liveness], False)[2]
    assert watch.fatal is None                             # failureThreshold not reached: still starting
    assert watch.explain("process_exited")[0] == "timeout"  # but if it died now, that is why
    reason, ev, watch = replay([readiness, liveness, kill], False)
    assert reason == "timeout" and "will be restarted" in watch.fatal.line.raw
    assert "Liveness probe failed" in ev.line.raw          # the line that says why it was killed
