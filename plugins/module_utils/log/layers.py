# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The second reading of a failure's line: what its class, the package that raised it and that layer say.

The first reading (``signatures``, ``places``, the families) knows a line by its words. A log nobody has seen often
ends in a line no table maps: ``KeyError: 'model.layers.0.mlp'`` raised in a model loader, ``RuntimeError: Ninja
build failed`` raised in FlashInfer's JIT, ``XlaRuntimeError: RESOURCE_EXHAUSTED: ...``. The line still says which
layer failed, and usually why:

* its class, through Python's own hierarchy, read from the interpreter that runs this module (``BUILTIN``: every
  subclass inherits its ancestor's reason, ``ConnectionRefusedError`` that of ``ConnectionError``), and through the
  classes of the libraries under vLLM, each read from that library's source (``LIBRARY_CLASSES``);
* the status code that opens an XLA/PJRT message (``STATUS``: absl's canonical codes, as grpcio 1.85 enumerates
  them in ``grpc.StatusCode``; libtpu, PJRT, jax and torch_xla print them);
* the layer of the package that raised it (``LAYERS``): the innermost frame's file, or the module the class is
  qualified with (``jaxlib.xla_extension.XlaRuntimeError``), and what that layer fails of when nothing narrower is
  known. A line still not understood says so, names the layer and the line, and carries that layer's hint.
"""

from __future__ import annotations

import builtins
import re

# Python's classes that prove a reason whatever their words and wherever they were raised; their subclasses inherit it
# (read from the running interpreter's hierarchy, so a class added in a later Python is placed by its ancestors).
# ValueError, TypeError, KeyError, AttributeError, RuntimeError, OSError prove nothing alone: their layer decides.
BUILTIN = (
    ("MemoryError", "out_of_memory"),
    ("ImportError", "missing_dependency"),                  # and ModuleNotFoundError
    ("FileNotFoundError", "model_not_found"),
    ("NotADirectoryError", "model_not_found"),
    ("IsADirectoryError", "model_not_found"),
    # A pipe or connection the peer closed: the peer (another engine process) died first (signatures' peer_lost).
    ("BrokenPipeError", "engine_died"),
    ("ConnectionResetError", "engine_died"),
    ("ConnectionError", "distributed_error"),               # refused, aborted
    ("TimeoutError", "timeout"),
    ("NotImplementedError", "config_error"),
    ("ChildProcessError", "engine_died"),
    ("ProcessLookupError", "engine_died"),
    ("RecursionError", "engine_died"),
    ("SystemError", "engine_died"),
)
_BUILTIN = dict(BUILTIN)

# The classes of the libraries under vLLM that prove a reason, each read from the library's source: (library and
# release, module, class, reason). A log names them qualified ("ray.exceptions.ActorDiedError: ...") or bare.
LIBRARY_CLASSES = (
    # ray 2.52.0, ray/exceptions.py: the task's and actor's failures (RayTaskError(X) is read as X before this).
    ("ray 2.52.0", "ray.exceptions", "OutOfMemoryError", "out_of_memory"),
    ("ray 2.52.0", "ray.exceptions", "ObjectStoreFullError", "out_of_memory"),
    ("ray 2.52.0", "ray.exceptions", "GetTimeoutError", "timeout"),
    ("ray 2.52.0", "ray.exceptions", "RayChannelTimeoutError", "timeout"),
    ("ray 2.52.0", "ray.exceptions", "RuntimeEnvSetupError", "missing_dependency"),
    ("ray 2.52.0", "ray.exceptions", "ActorUnschedulableError", "gpu_unavailable"),
    ("ray 2.52.0", "ray.exceptions", "TaskUnschedulableError", "gpu_unavailable"),
    ("ray 2.52.0", "ray.exceptions", "ActorPlacementGroupRemoved", "gpu_unavailable"),
    ("ray 2.52.0", "ray.exceptions", "TaskPlacementGroupRemoved", "gpu_unavailable"),
    ("ray 2.52.0", "ray.exceptions", "RayActorError", "engine_died"),
    ("ray 2.52.0", "ray.exceptions", "ActorDiedError", "engine_died"),
    ("ray 2.52.0", "ray.exceptions", "ActorUnavailableError", "engine_died"),
    ("ray 2.52.0", "ray.exceptions", "WorkerCrashedError", "engine_died"),
    ("ray 2.52.0", "ray.exceptions", "LocalRayletDiedError", "engine_died"),
    ("ray 2.52.0", "ray.exceptions", "NodeDiedError", "engine_died"),
    ("ray 2.52.0", "ray.exceptions", "OwnerDiedError", "engine_died"),
    ("ray 2.52.0", "ray.exceptions", "RaySystemError", "distributed_error"),
    ("ray 2.52.0", "ray.exceptions", "RpcError", "distributed_error"),
    ("ray 2.52.0", "ray.exceptions", "AuthenticationError", "distributed_error"),
    ("ray 2.52.0", "ray.exceptions", "RayChannelError", "distributed_error"),
    # triton 3.5.1, triton/runtime/errors.py and triton/backends/nvidia/compiler.py: a kernel that does not fit the
    # GPU's shared memory or registers, and the bundled ptxas that refused the GPU's architecture.
    ("triton 3.5.1", "triton.runtime.errors", "OutOfResources", "out_of_memory"),
    ("triton 3.5.1", "triton.runtime.errors", "PTXASError", "missing_dependency"),
    # triton/compiler/errors.py: CompilationError and its subclasses are the front end's errors in a kernel's source
    # ("at 22:25: ..."): a kernel vLLM ships that this Triton cannot compile, not a missing toolchain.
    ("triton 3.5.1", "triton.compiler.errors", "CompilationError", "engine_died"),
    ("triton 3.5.1", "triton.compiler.errors", "CompileTimeAssertionFailure", "engine_died"),
    ("triton 3.5.1", "triton.compiler.errors", "UnsupportedLanguageConstruct", "engine_died"),
    # subprocess, as torch's extension builder and the JIT builders run their compiler: the compiler failed.
    ("Python 3", "subprocess", "CalledProcessError", "missing_dependency"),
)
_LIBRARY = dict((cls, reason) for _source, _module, cls, reason in LIBRARY_CLASSES)

# absl's canonical status codes (grpcio 1.85.4 grpc.StatusCode), as XLA, PJRT and libtpu open their messages with them.
STATUS = (
    ("CANCELLED", "engine_died"),
    ("UNKNOWN", "engine_died"),
    ("INVALID_ARGUMENT", "config_error"),
    ("DEADLINE_EXCEEDED", "distributed_error"),     # a peer or the coordination service did not answer in time
    ("NOT_FOUND", "gpu_unavailable"),               # the device, its topology or its runtime library
    ("ALREADY_EXISTS", "gpu_unavailable"),          # the TPU is held by another process
    ("PERMISSION_DENIED", "gpu_unavailable"),       # /dev/accel*, /dev/vfio
    ("RESOURCE_EXHAUSTED", "out_of_memory"),        # HBM or host memory
    ("FAILED_PRECONDITION", "gpu_unavailable"),     # "TPU is already in use", a runtime that is not initialised
    ("ABORTED", "engine_died"),
    ("OUT_OF_RANGE", "config_error"),
    ("UNIMPLEMENTED", "config_error"),
    ("INTERNAL", "engine_died"),
    ("UNAVAILABLE", "distributed_error"),
    ("DATA_LOSS", "engine_died"),
    ("UNAUTHENTICATED", "gpu_unavailable"),
)
_STATUS = dict(STATUS)

# The interpreter's own words for a failed operation (CPython 3.12's Objects/abstract.c, Python/ceval.c,
# Objects/object.c, Objects/moduleobject.c, Objects/typeobject.c): no settings check wrote them. A call or an operand
# that does not fit is a bug in the code that ran, or two packages of versions that do not fit each other; a module
# without the attribute the caller names is a package of another release than the caller was written for.
INTERPRETER = (
    ("TypeError", r"unsupported operand type\(s\) for", "engine_died"),
    ("TypeError", r"missing \d+ required (?:positional|keyword-only) arguments?", "engine_died"),
    ("TypeError", r"takes (?:from )?\d+ (?:to \d+ )?positional arguments? but \d+ (?:were|was) given", "engine_died"),
    ("TypeError", r"object is not (?:callable|subscriptable|iterable)|object cannot be interpreted as", "engine_died"),
    ("TypeError", r"got multiple values for argument", "engine_died"),
    ("TypeError", r"can't multiply sequence|can only concatenate", "engine_died"),
    ("AttributeError", r"^'\w+' object has no attribute", "engine_died"),
    ("AttributeError", r"^(?:partially initialized )?module '[\w.]+' has no attribute", "missing_dependency"),
    ("AttributeError", r"^class must define a '_type_' attribute", "missing_dependency"),
)
_INTERPRETER = tuple((cls, re.compile(words), reason) for cls, words, reason in INTERPRETER)
_STATUS_AT = re.compile(r"^(?:\w+ )?(%s)(?:: |$)" % "|".join(code for code, _reason in STATUS))

_MODEL = ("check that the model's path exists on the host and holds config.json and weights of the architecture and "
          "quantization it names, or that the hub is reachable (HF_TOKEN for a gated model)")
_GPU = ("check the accelerator: its driver and runtime library, that no other process holds it, that the service sees "
        "it (CUDA_VISIBLE_DEVICES, the container's device access), and that this build supports its architecture")
_DISTRIBUTED = ("the processes could not talk to each other: check the network interface (NCCL_SOCKET_IFNAME, "
                "GLOO_SOCKET_IFNAME, VLLM_HOST_IP), the ports between the hosts, shared memory and the Ray cluster")
_BUILD = ("a kernel or extension is built at start-up: install the CUDA toolkit of torch's CUDA (nvcc, CUDA_HOME), gcc, "
          "g++, ninja and the Python headers in the serving host, or use a wheel with prebuilt kernels")

# "{exc}{qexc}": the class, as the exception line's match names it (signatures.GENERIC).
_UNKNOWN = ("a vLLM process raised {exc}{qexc}, which no rule of this collection knows: read root_cause_line and the "
            "traceback above it in log_tail, and report it with the vLLM release")

_BUG = ("the code that ran failed in a way no settings check foresaw: a bug in that release, or packages of releases "
        "that do not fit each other (vLLM, torch, transformers, a fork or plugin): try the release the model's page names, "
        "and report it with root_cause_line")

# (layer, package path (after site-packages), reason when nothing narrower is known, whether the layer checks settings,
# hint): the first that matches. A layer that checks a model's or the server's settings raises ValueError and the like
# for what it refuses (vLLM's own, and Hugging Face's configs: a rope_scaling or remote code they refuse); there a
# family's guess from the class is as good as the layer's. Elsewhere (a kernel builder, a compiler, a runtime) the
# layer says more than the class.
LAYERS = (
    ("FlashInfer JIT", r"flashinfer/", "missing_dependency", False,
     "FlashInfer builds its kernels on first use: it needs the CUDA toolkit of torch's CUDA (nvcc, CUDA_HOME), ninja "
     "and a GPU architecture it supports; install the flashinfer-cubin/jit-cache wheels of the same release, or pick "
     "another attention backend or sampler (VLLM_USE_FLASHINFER_SAMPLER=0)"),
    ("Triton compiler", r"triton/", "missing_dependency", False,
     "Triton compiles kernels at start-up with its bundled ptxas and the driver's libcuda: the GPU architecture must be "
     "one this Triton knows (upgrade torch and triton together), the driver new enough, and a C compiler present"),
    ("torch extension builder", r"torch/utils/cpp_extension\.py", "missing_dependency", False, _BUILD),
    ("torch.compile", r"torch/_(?:inductor|dynamo)/", "engine_died", False,
     "torch.compile failed while vLLM compiled the model: start with --enforce-eager (or -O0) to skip it, and check "
     "that gcc and the Python headers are installed"),
    ("torch.distributed", r"torch/distributed/", "distributed_error", False, _DISTRIBUTED),
    ("torch CUDA", r"torch/cuda/", "gpu_unavailable", False, _GPU),
    ("XLA/TPU runtime", r"(?:torch_xla|jax|jaxlib|libtpu|tpu_inference)/|vllm/(?:platforms/tpu|(?:v1/)?worker/tpu)",
     "gpu_unavailable", False,
     "the TPU runtime (libtpu through PJRT) failed: check that no other process holds the TPU (/dev/accel*, "
     "/dev/vfio), that libtpu matches jax/torch_xla, and the TPU_* environment"),
    ("Ray", r"ray/", "distributed_error", False,
     "Ray failed under vLLM: check `ray status` (every node joined, with its GPUs), that each node runs the same Ray and "
     "vLLM, the ports between the nodes, and the raylet's log (/tmp/ray/session_latest/logs)"),
    # transformers' auto classes look a model's type up in their tables: a type this release does not have.
    ("transformers auto classes", r"transformers/models/auto/", "config_error", True,
     "this transformers does not know the model's type (model_type in config.json): upgrade transformers (with a vLLM "
     "that supports it), or check the model_type the checkpoint declares"),
    ("Hugging Face", r"(?:huggingface_hub|transformers|tokenizers|safetensors)/", "model_not_found", True, _MODEL),
    ("vLLM configuration",
     r"vllm/(?:config/|config\.py|engine/arg_utils\.py|entrypoints/openai/cli_args\.py|entrypoints/cli/|"
     r"utils/argparse_utils\.py)", "config_error", True,
     "vLLM rejected its settings: change the flag or config value root_cause_line names"),
    ("vLLM platform", r"vllm/platforms/", "gpu_unavailable", True, _GPU),
    ("vLLM distributed", r"vllm/distributed/", "distributed_error", True, _DISTRIBUTED),
    ("vLLM model loader", r"vllm/(?:model_executor/model_loader/|transformers_utils/)", "model_not_found", True, _MODEL),
    ("vLLM", r"vllm/", "engine_died", True, _UNKNOWN),
)
_LAYERS = tuple((name, re.compile(path), reason, hint) for name, path, reason, _settings, hint in LAYERS)
# Python's own layer (no package named) is read like one that checks settings.
_SETTINGS = frozenset(name for name, _path, _reason, settings, _hint in LAYERS if settings) | {"Python"}
# A frame's file under an environment's packages, or a path that names a package by itself.
_PACKAGE = re.compile(r"(?:site|dist)-packages/(.+)$")
_QUALIFIED = re.compile(r"^((?:[A-Za-z_]\w*\.)+)[A-Z]\w*")


class Reading(object):
    """What the second reading says of a line: the reason, the layer and how it knew (or that it did not)."""

    __slots__ = ("reason", "layer", "how", "hint", "known", "outranks_class")

    def __init__(self, reason, layer, how, hint, known, outranks_class=False):
        self.reason, self.layer, self.how, self.hint, self.known = reason, layer, how, hint, known
        self.outranks_class = outranks_class

    @property
    def placed(self):
        """Says more than a family's guess from the class alone: the interpreter's own words, or a layer that checks no
        settings of its own (a kernel builder, a compiler, a runtime), whose ValueError is no settings check."""
        return self.outranks_class or self.layer not in _SETTINGS


def class_reason(cls):
    """The reason an exception class proves by itself (a builtin through its ancestors, or a library's); None."""
    if cls in _LIBRARY:
        return _LIBRARY[cls]
    klass = getattr(builtins, cls or "", None)
    if isinstance(klass, type) and issubclass(klass, BaseException):
        for ancestor in klass.__mro__:
            if ancestor.__name__ in _BUILTIN:
                return _BUILTIN[ancestor.__name__]
    return None


def layer_of(path):
    """(layer, reason, hint) of a file (a frame's path, or a module path such as 'jaxlib/xla_extension/'); None."""
    if not path:
        return None
    m = _PACKAGE.search(path)
    rel = m.group(1) if m else path.lstrip("/")
    for name, regex, reason, hint in _LAYERS:
        if regex.match(rel):
            return name, reason, hint
    return None


def read(cls, text, where=None, line=""):
    """The second reading of an exception line whose class is ``cls`` and message ``text``, raised in ``where``
    ((path, function) of the innermost frame, or None); ``line`` is the whole line (for a qualified class)."""
    layer = layer_of(where[0]) if where else None
    if layer is None:
        m = _QUALIFIED.match(line or "")
        if m and not m.group(1).startswith(("builtins.", "__main__.")):
            layer = layer_of(m.group(1).replace(".", "/"))
    name, default, hint = layer or ("Python", "engine_died", _UNKNOWN)
    reason = class_reason(cls)
    if reason is not None:
        return Reading(reason, name, "its class %s" % cls, hint, True)
    for klass, words, reason in _INTERPRETER:
        if cls == klass and words.search(text or ""):
            return Reading(reason, name, "the interpreter's own words", _BUG if reason == "engine_died" else hint, True,
                           outranks_class=True)
    m = _STATUS_AT.match(text or "")
    if m is not None:
        return Reading(_STATUS[m.group(1)], name, "status %s" % m.group(1), hint, True)
    return Reading(default, name, None, hint, False)
