"""The layers' own failure words (module_utils/log/vocabulary) in the log watcher: each table read from the layer."""

from __future__ import annotations

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.log import vocabulary
from ansible_collections.llmops.vllm.plugins.module_utils.log.watch import classify_lines

WORKER = "(Worker_TP1 pid=4302) ERROR 11-20 10:00:15 [multiproc_executor.py:671] "


def test_every_named_error_is_in_its_layers_table():
    cuda = {name for _code, name, _text in vocabulary.CUDA_RUNTIME}
    assert len(cuda) > 100 and vocabulary.CUDA_RUNTIME_VERSION >= 12000
    for names in vocabulary._CUDA_REASONS.values():
        assert set(names) <= cuda, set(names) - cuda
    assert [name for _code, name, _text in vocabulary.NCCL][:2] == ["ncclUnhandledCudaError", "ncclSystemError"]
    errnos = dict(vocabulary.errno_table())
    assert all(name in errnos for names in vocabulary._ERRNO_REASONS.values() for name in names)
    assert vocabulary.systemd_exit(226) == ("NAMESPACE", "config_error") and vocabulary.systemd_exit(1) is None
    hip = dict(vocabulary.HIP_RUNTIME)
    assert len(hip) > 70 and all(name in hip for names in vocabulary._HIP_REASONS.values() for name in names)
    assert len(vocabulary.LOADER) > 60 and vocabulary.loader_reason("cannot open shared object file") == "missing_dependency"


@pytest.mark.parametrize("line, reason", [
    # the driver's words for an allocation: memory, not the driver (a family would read "CUDA driver")
    ("RuntimeError: CUDA driver error: out of memory", "out_of_memory"),
    ("torch.AcceleratorError: CUDA error: peer access is not supported between these two devices", "distributed_error"),
    ("RuntimeError: CUDA error: device-side assert triggered", "engine_died"),
    ("RuntimeError: CUDA error: no kernel image is available for execution on the device", "gpu_unavailable"),
    ("RuntimeError: NCCL error: invalid usage (run with NCCL_DEBUG=WARN for details)", "distributed_error"),
    ("zmq.error.ZMQError: Cannot assign requested address (addr='tcp://10.0.0.2:5570')", "distributed_error"),
    ("OSError: [Errno 101] Network is unreachable", "distributed_error"),
    # torch's c10d socket, from libtorch's own strings: no class or errno says it
    ("RuntimeError: The client socket has failed to connect to any network address of (10.0.0.2, 29500).",
     "distributed_error"),
    # HIP's strings, as torch's ROCm build prints them (a family reads "HIP error" as the GPU's)
    ("RuntimeError: HIP error: out of memory", "out_of_memory"),
    ("RuntimeError: HIP error: peer access is not supported between these two devices", "distributed_error"),
    ("RuntimeError: HIP error: hipErrorNoBinaryForGpu: Unable to find code object for all current devices!",
     "gpu_unavailable"),
    # the dynamic loader: a library too new for this glibc, one built for another CPU, a static TLS shortage (a
    # library loaded too late, not memory: errno's "Cannot allocate memory" must not take it)
    ("ImportError: /lib/x86_64-linux-gnu/libstdc++.so.6: version `CXXABI_1.3.15' not found (required by "
     "/opt/vllm/lib/python3.12/site-packages/vllm/_C.abi3.so)", "missing_dependency"),
    ("OSError: /opt/vllm/lib/libcudart.so.12: wrong ELF class: ELFCLASS32", "missing_dependency"),
    ("ImportError: /usr/lib/aarch64-linux-gnu/libgomp.so.1: cannot allocate memory in static TLS block",
     "missing_dependency"),
    ("OSError: /opt/vllm/lib/libfoo.so: cannot create shared object descriptor", "out_of_memory"),
    # huggingface_hub's model-lookup errors, by class: their words name no lookup
    ("huggingface_hub.errors.CachedRepoTreeNotFoundError: No cached tree listing found for 'Qwen/Qwen3-8B' (revision "
     "'main', repo_type 'model'): the revision is not cached", "model_not_found"),
    ("huggingface_hub.errors.IncompleteSnapshotError: The cached snapshot for 'z-lab/Qwen3-8B-DFlash' (revision "
     "'main', commit abc) is incomplete: 2 file(s) are missing", "model_not_found"),
])
def test_a_layers_error_gives_its_reason(line, reason):
    found = classify_lines([WORKER + "Traceback (most recent call last):", WORKER + line]).finding()
    assert found is not None and found.reason == reason, found and (found.reason, found.detail)


def test_a_journal_line_of_a_unit_that_failed_before_exec():
    found = classify_lines(["Nov 20 10:00:15 gpu-1 systemd[1]: vllm.service: Main process exited, code=exited, "
                            "status=217/USER"]).finding()
    assert found.reason == "config_error" and "systemd" in found.detail


def test_a_client_retrying_a_refused_connection_proves_nothing():
    assert classify_lines(["Server check failed: [Errno 111] Connection refused, retrying..."]).finding() is None


@pytest.mark.parametrize("line, reason", [
    # a checkpoint tensor that load_weights looks up and the model does not have (a drafter for another target)
    ("KeyError: 'model.layers.61.mtp_block.self_attn.kv_a_proj_with_mqa.weight'", "config_error"),
    # vLLM's CUDACHECK, printed before the Python errors the exit causes
    ("Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:364 'invalid argument'", "distributed_error"),
    ("nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: cannot open shared object "
     "file: no such file or directory: unknown", "gpu_unavailable"),
    ("[ 8659.726062] NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.", "engine_died"),
])
def test_vllms_own_kernel_and_loader_texts_and_the_host_layers(line, reason):
    found = classify_lines([line, "RuntimeError: Engine core initialization failed. See root cause above."]).finding()
    assert found is not None and found.reason == reason, found and (found.reason, found.detail)


def test_c10d_warns_of_each_address_before_the_failure_that_is_the_root():
    found = classify_lines([
        WORKER + "[W socket.cpp:663] [c10d] The client socket has failed to connect to [gpu-2]:29500 (errno: 110 - "
                 "Connection timed out).",
        WORKER + "Traceback (most recent call last):",
        WORKER + "torch.distributed.DistNetworkError: The client socket has failed to connect to any network address "
                 "of (10.0.0.2, 29500)."]).finding()
    assert found.reason == "distributed_error" and "any network address" in found.root_line.raw, found.root_line.raw
