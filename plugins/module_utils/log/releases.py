# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where vLLM raises a start-up failure, and the reason that place proves, read from every release's source.

tests/fixtures/corpus/vocabulary/vllm_texts.py enumerates each ``raise`` and ``logger.error`` text of the modules a
``vllm serve`` runs before it serves, in every release from 0.6.0 to 0.34.0 (65 source distributions, and the wheels
of 0.15.0 and 0.15.1, which have none): 7,507 texts, with the file and function of each. Most say their reason in
their own class and words, which the families read (``signatures.FAMILIES``). Some do not: a ``ValueError`` raised where vLLM sizes the KV cache against
the memory it found is an out-of-memory failure whatever its words ("... is less than the engine's budget after
excluding external processes" in 0.33), and a ``RuntimeError`` of vLLM's communicators a failure between processes.
``WHERE`` names those places. A traceback shows the place in its innermost frame, in any release, worded as it
will be; ``TEXTS`` are the texts the releases raise there, for a log that kept only the exception's line.
"""

from __future__ import annotations

import re

# (reason, file, function, classes, words it must have, words it must not have): vLLM raised it there.
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
)

_RULES = tuple((reason, re.compile(path + r"$"), re.compile(r"(?:%s)$" % function), frozenset(classes),
                re.compile(words) if words else None, re.compile(unless) if unless else None)
               for reason, path, function, classes, words, unless in WHERE)
_VLLM_PATH = re.compile(r"(?:^|/)(vllm/[\w/]+\.py)$")


def raised_reason(where, cls, text):
    """The reason a failure of class ``cls`` proves, raised in ``where`` ("<path>/vllm/<file>.py:<function>" or a
    (path, function) pair); None where the place proves nothing of its own."""
    if isinstance(where, str):
        where = where.rsplit(":", 1)
    path, function = where
    m = _VLLM_PATH.search(path or "")
    if m is None:
        return None
    for reason, path_re, function_re, classes, words, unless in _RULES:
        if (cls in classes and path_re.match(m.group(1)) and function_re.match(function or "")
                and (words is None or words.search(text or "")) and (unless is None or not unless.search(text or ""))):
            return reason
    return None


# (reason, class, template, where, first release, last release) of each text the releases raise in a WHERE place,
# {} where vLLM formats a value: written by vllm_texts.py --where from the enumeration.
TEXTS = (
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
     'External launcher initialized the default process group without a CPU (gloo) backend. vLLM requires '
     "both CPU and device backends. Pass backend='cpu:gloo,cuda:nccl' to torch.distributed.init_process_gr"
     'oup().',
     'vllm/distributed/parallel_state.py:_validate_default_pg_for_split_group', '0.23.0', '0.34.0'),
    ('distributed_error', 'RuntimeError',
     'Failed to broadcast barrier_id',
     'vllm/distributed/utils.py:barrier', '0.9.0', '0.34.0'),
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
     'failed to load the NCCL library for unique-id rendezvous',
     'vllm/distributed/device_communicators/pynccl.py:from_unique_id_bytes', '0.30.0', '0.34.0'),
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
        first = min((row[4] for row in rows), key=_version)
        last = max((row[5] for row in rows), key=_version)
        out.append(("raised_" + reason, reason, tuple(sorted({_needle(row[2]) for row in rows})),
                    "(?:%s).*" % "|".join(_regex(row[2]) for row in rows),
                    "vLLM %s to %s, where it sizes memory or connects its processes" % (first, last)))
    return out


def _version(release):
    return [int(part) if part.isdigit() else -1 for part in re.split(r"[.]", release.replace("post", "."))]
