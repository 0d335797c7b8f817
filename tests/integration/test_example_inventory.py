"""The example inventory renders exactly the hand-written Qwen3.6-27B + DFlash command.

The vllm_server role computes its argv from the inventory's variables on the
controller (connection local, no host is touched), and the rendered unit's
ExecStart splits back into that argv the way systemd splits it.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from ansible_collections.llmops.vllm.plugins.filter.vllm_args import argv_lines
from ansible_collections.llmops.vllm.plugins.module_utils.probe import liveness
from ansible_collections.llmops.vllm.tests.helpers.ansible_cli import run_playbook

MODELS = "/srv/models"


@pytest.fixture(scope="module")
def rendered(repo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rendered")
    run = run_playbook(
        repo_root / "tests" / "integration" / "playbooks" / "render_server.yml",
        inventory=repo_root / "inventories" / "example",
        # an extra var beats any connection the inventory may set: no host is touched
        extra_vars={"ansible_connection": "local", "render_dir": str(out),
                    "unit_template": str(repo_root / "roles" / "vllm_server" / "templates" / "vllm.service.j2")},
        timeout=300,
    )
    assert run.rc == 0, run.report()
    return out


def exec_start_words(unit_text: str) -> list[str]:
    """ExecStart= as systemd reads it: continuation lines joined, words split, %% and $$ collapsed."""
    logical = re.sub(r"\\\n", " ", unit_text)
    (line,) = [entry for entry in logical.splitlines() if entry.startswith("ExecStart=")]
    return [w.replace("%%", "%").replace("$$", "$") for w in shlex.split(line[len("ExecStart="):])]


# The command typed by hand on vLLM 0.20 (the drafter then was the checkpoint with a hand-edited config.json).
HAND_WRITTEN = [
    "serve", f"{MODELS}/Qwen3.6-27B", "--host", "127.0.0.1", "--port", "8000", "--tensor-parallel-size", "2",
    "--max-model-len", "32768", "--max-num-batched-tokens", "32768", "--reasoning-parser", "qwen3",
    "--tool-call-parser", "qwen3_coder", "--language-model-only", "--trust-remote-code",
    "--speculative-config", '{"method":"dflash","model":"DRAFTER","num_speculative_tokens":15}',
]


def test_argv_is_the_hand_written_command(rendered: Path):
    data = json.loads((rendered / "gpu-node-1.json").read_text())
    drafter = data["speculative_model"]
    # The drafter vLLM gets is the rendered drafter directory, not the checkpoint itself.
    assert drafter == "/opt/vllm/drafter"
    hand_written = [word.replace("DRAFTER", drafter) for word in HAND_WRITTEN]
    # Named flags first, then vllm_server_args in the inventory's order: the same flags and values, item for item
    # within each flag, with --max-num-batched-tokens ahead of --max-model-len, and three flags more: in-flight
    # requests finish (for up to 120 s) when the server is stopped, instead of being aborted, no prefix caching
    # (a known crash of hybrid targets with 15 draft tokens, docs/runtime-hazards.md), and the GPU memory share the
    # command always carries (vLLM's default up to 0.33; 0.34 would otherwise take the whole GPU).
    assert data["argv"] == [
        "serve", f"{MODELS}/Qwen3.6-27B",
        "--host", "127.0.0.1",
        "--port", "8000",
        "--tensor-parallel-size", "2",
        "--max-num-batched-tokens", "32768",
        "--shutdown-timeout", "120",
        "--max-model-len", "32768",
        "--reasoning-parser", "qwen3",
        "--tool-call-parser", "qwen3_coder",
        "--language-model-only",
        "--trust-remote-code",
        "--no-enable-prefix-caching",
        "--gpu-memory-utilization", "0.92",
        "--speculative-config",
        '{"method":"dflash","model":"%s","num_speculative_tokens":15}' % drafter,
    ]
    assert sorted(map(tuple, argv_lines(data["argv"]))) == sorted([*map(tuple, argv_lines(hand_written)),
                                                                   ("--shutdown-timeout", "120"),
                                                                   ("--no-enable-prefix-caching",),
                                                                   ("--gpu-memory-utilization", "0.92")])
    assert json.loads(data["argv"][-1]) == {"method": "dflash", "model": drafter, "num_speculative_tokens": 15}


def test_every_host_gets_the_same_command(rendered: Path):
    first = json.loads((rendered / "gpu-node-1.json").read_text())
    second = json.loads((rendered / "gpu-node-2.json").read_text())
    assert first == second


def test_exec_start_splits_back_into_the_argv(rendered: Path):
    data = json.loads((rendered / "gpu-node-1.json").read_text())
    unit = (rendered / "gpu-node-1.service").read_text()
    assert data["executable"] == "/opt/vllm/venvs/vllm-0.20.2/bin/vllm"
    assert exec_start_words(unit) == [data["executable"], *data["argv"]]
    # One line per flag and its values, each but the last continued with " \".
    exec_lines = unit[unit.index("ExecStart="):].split("\n")[: len(argv_lines(data["argv"])) + 1]
    assert all(line.endswith(" \\") for line in exec_lines[:-1]) and not exec_lines[-1].endswith("\\")


def test_unit_keeps_secrets_out_and_the_gpus_in(rendered: Path):
    unit = (rendered / "gpu-node-1.service").read_text()
    assert "VLLM_API_KEY" not in unit.replace("# Secrets (VLLM_API_KEY, HF_TOKEN)", "")
    assert "EnvironmentFile=/etc/vllm/vllm.env" in unit
    assert "PrivateDevices=no" in unit and "DevicePolicy=closed" in unit
    assert "DeviceAllow=char-nvidia* rw" in unit
    # internal sockets (gloo, the NCCL bootstrap) stay on loopback on a single host
    assert "Environment=VLLM_HOST_IP=127.0.0.1" in unit
    assert "Environment=GLOO_SOCKET_IFNAME=lo" in unit and "Environment=NCCL_SOCKET_IFNAME=lo" in unit
    assert "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK" in unit
    assert "ProtectSystem=strict" in unit and "PrivateTmp=yes" in unit
    assert "StandardOutput=append:/var/log/vllm/vllm.log" in unit


def test_systemd_accepts_the_unit(rendered: Path, tmp_path: Path):
    """systemd-analyze verify parses the unit; the executable is swapped for a stub that exists."""
    data = json.loads((rendered / "gpu-node-1.json").read_text())
    stub = tmp_path / "vllm"
    stub.write_text("#!/bin/sh\n")
    stub.chmod(0o755)
    unit = tmp_path / "vllm.service"
    unit.write_text((rendered / "gpu-node-1.service").read_text().replace(data["executable"], str(stub)))
    proc = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit)], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ExecStart" not in proc.stderr


def test_the_service_restarts_after_any_exit_within_a_start_limit(rendered: Path):
    unit = (rendered / "gpu-node-1.service").read_text()
    assert "Restart=always" in unit and "StartLimitBurst=3" in unit and "StartLimitIntervalSec=300" in unit
    assert "After=network-online.target nvidia-persistenced.service" in unit


def test_systemd_accepts_the_watchdog_and_log_rotation_units(rendered: Path, tmp_path: Path):
    names = ["vllm-watchdog.service", "vllm-watchdog.timer", "vllm-logrotate.service", "vllm-logrotate.timer"]
    for name in names:
        # The logrotate binary may be absent where the tests run: a stub that exists stands in.
        text = (rendered / ("gpu-node-1-" + name)).read_text().replace("/usr/sbin/logrotate", "/bin/true")
        (tmp_path / name).write_text(text)
    proc = subprocess.run(["systemd-analyze", "verify", "--man=no", *[str(tmp_path / n) for n in names]],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    watchdog = (rendered / "gpu-node-1-vllm-watchdog.service").read_text()
    argv = exec_start_words(watchdog)
    # The front door's health check sends the same request (module_utils/probe/liveness).
    probe = liveness.request(f"{MODELS}/Qwen3.6-27B")
    assert argv[argv.index("--url") + 1] == "http://127.0.0.1:8000"
    assert (argv[argv.index("--path") + 1], argv[argv.index("--body") + 1]) == (probe["path"], probe["body"])
    assert "EnvironmentFile=-/etc/vllm/vllm.env" in watchdog
    rotation = (rendered / "gpu-node-1-vllm-logrotate.conf").read_text()
    assert "/var/log/vllm/vllm.log {" in rotation and "copytruncate" in rotation and "maxsize 100M" in rotation


def exposure(unit: Path) -> float:
    """systemd-analyze security's overall exposure of a unit file (offline: no unit is loaded)."""
    proc = subprocess.run(["systemd-analyze", "security", "--offline=true", "--no-pager", str(unit)],
                          capture_output=True, text=True, timeout=60, check=False)
    match = re.search(r"Overall exposure level for \S+: ([0-9.]+)", proc.stdout + proc.stderr)
    assert match, proc.stdout + proc.stderr
    return float(match.group(1))


@pytest.mark.parametrize("name", ["vllm.service", "vllm-watchdog.service", "vllm-logrotate.service"])
def test_every_unit_is_sandboxed_to_an_exposure_of_2_at_most(rendered: Path, tmp_path: Path, name: str):
    source = rendered / ("gpu-node-1.service" if name == "vllm.service" else "gpu-node-1-" + name)
    unit = tmp_path / name
    unit.write_text(source.read_text())
    assert exposure(unit) <= 2.0


def test_root_helpers_write_only_root_owned_directories(rendered: Path):
    unit = (rendered / "gpu-node-1.service").read_text()
    # The service never writes its log directory: systemd opens the log for it.
    assert "ReadWritePaths=/var/lib/vllm /var/cache/vllm" in unit
    watchdog = (rendered / "gpu-node-1-vllm-watchdog.service").read_text()
    assert "--state /var/lib/llmops-vllm/vllm/watchdog.json" in watchdog
    assert "ReadWritePaths=/var/lib/llmops-vllm/vllm -/var/lib/prometheus/node-exporter" in watchdog
    rotation = (rendered / "gpu-node-1-vllm-logrotate.service").read_text()
    assert "--state /var/lib/llmops-vllm/vllm/logrotate.state" in rotation and "PrivateNetwork=yes" in rotation
    assert " su " not in (rendered / "gpu-node-1-vllm-logrotate.conf").read_text()


def test_the_offline_and_no_usage_defaults_stay_when_the_env_is_set(repo_root: Path, tmp_path: Path):
    run = run_playbook(
        repo_root / "tests" / "integration" / "playbooks" / "render_server.yml",
        inventory=repo_root / "inventories" / "example",
        extra_vars={"ansible_connection": "local", "render_dir": str(tmp_path),
                    "vllm_server_env": {"VLLM_LOGGING_LEVEL": "DEBUG"},
                    "unit_template": str(repo_root / "roles" / "vllm_server" / "templates" / "vllm.service.j2")},
        timeout=300,
    )
    assert run.rc == 0, run.report()
    unit = (tmp_path / "gpu-node-1.service").read_text()
    for line in ("Environment=HF_HUB_OFFLINE=1", "Environment=VLLM_NO_USAGE_STATS=1", "Environment=DO_NOT_TRACK=1",
                 "Environment=VLLM_LOGGING_LEVEL=DEBUG"):
        assert line in unit


def test_logrotate_reads_the_rendered_rotation_as_meant(rendered: Path, tmp_path: Path):
    """logrotate itself, in debug mode (nothing rotated): one log, its size and count, no script anywhere."""
    conf = tmp_path / "vllm.logrotate"
    conf.write_text((rendered / "gpu-node-1-vllm-logrotate.conf").read_text())
    proc = subprocess.run(["logrotate", "-d", "--state", str(tmp_path / "state"), str(conf)],
                          capture_output=True, text=True, timeout=60, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "Handling 1 logs" in out and "rotating pattern: /var/log/vllm/vllm.log  after 1 days (5 rotations)" in out
    assert "log files >= 104857600 are rotated earlier" in out
    assert "error" not in out.lower() and "script" not in out.lower(), out


@pytest.fixture(scope="module")
def readme_rendered(repo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README's ten-line inventory, as a user saves it, with one flag layered on its second host."""
    readme = (repo_root / "README.md").read_text()
    block = re.search(r"```yaml\n(# hosts\.yml.*?)```", readme, re.S).group(1)
    inventory = tmp_path_factory.mktemp("readme-inventory")
    (inventory / "hosts.yml").write_text(block)
    (inventory / "host_vars").mkdir()
    (inventory / "host_vars" / "gpu-node-2.yml").write_text("vllm_server_args_host:\n  max-model-len: 16384\n")
    out = tmp_path_factory.mktemp("readme-rendered")
    run = run_playbook(
        repo_root / "tests" / "integration" / "playbooks" / "render_server.yml",
        inventory=inventory,
        extra_vars={"ansible_connection": "local", "render_dir": str(out),
                    "unit_template": str(repo_root / "roles" / "vllm_server" / "templates" / "vllm.service.j2")},
        timeout=300,
    )
    assert run.rc == 0, run.report()
    return out


def test_the_readme_inventory_gives_the_example_command(rendered: Path, readme_rendered: Path):
    example = json.loads((rendered / "gpu-node-1.json").read_text())
    assert json.loads((readme_rendered / "gpu-node-1.json").read_text()) == example


def test_a_host_layer_changes_one_flag_of_one_host(rendered: Path, readme_rendered: Path):
    argv = json.loads((rendered / "gpu-node-1.json").read_text())["argv"]
    layered = json.loads((readme_rendered / "gpu-node-2.json").read_text())["argv"]
    at = argv.index("--max-model-len") + 1
    assert layered == argv[:at] + ["16384"] + argv[at + 1:]


@pytest.fixture(scope="module")
def group_rendered(repo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """docs/serving-groups.md's inventory as a user copies it: two single hosts and a group of two."""
    page = (repo_root / "docs" / "serving-groups.md").read_text()
    block = re.search(r"```yaml\n(all:.*?)```", page, re.S).group(1)
    inventory = tmp_path_factory.mktemp("group-inventory")
    (inventory / "hosts.yml").write_text(block)
    out = tmp_path_factory.mktemp("group-rendered")
    run = run_playbook(
        repo_root / "tests" / "integration" / "playbooks" / "render_server.yml",
        inventory=inventory,
        extra_vars={"ansible_connection": "local", "render_dir": str(out), "vault_vllm_api_key": "k" * 32,
                    "unit_template": str(repo_root / "roles" / "vllm_server" / "templates" / "vllm.service.j2")},
        timeout=300,
    )
    assert run.rc == 0, run.report()
    return out


def test_a_serving_groups_ranks_get_their_words_and_its_head_is_watched_by_the_others(group_rendered: Path):
    single, head, rank = (json.loads((group_rendered / (host + ".json")).read_text())["argv"]
                          for host in ("gpu-node-1", "gpu-small-1", "gpu-small-2"))
    words = ["--nnodes", "2", "--master-addr", "10.0.1.21", "--master-port", "29501",
             "--distributed-executor-backend", "mp"]
    assert not {word for word in words if word.startswith("--")} & set(single)
    assert head[:len(head) - 10] == rank[:len(rank) - 11]   # the shared command, then the rank's words
    assert head[-10:] == words[:2] + ["--node-rank", "0"] + words[2:]
    assert rank[-11:] == words[:2] + ["--node-rank", "1"] + words[2:] + ["--headless"]
    unit = (group_rendered / "gpu-small-2.service").read_text()
    assert "Environment=VLLM_HOST_IP=10.0.1.22" in unit and "Environment=NCCL_SOCKET_IFNAME=eth1" in unit
    # The headless rank's watchdog probes the group through the head's API, and its "starting" is bounded.
    watchdog = exec_start_words((group_rendered / "gpu-small-2-vllm-watchdog.service").read_text())
    assert watchdog[watchdog.index("--url") + 1] == "http://gpu-small-1:8000" and "--started-after" in watchdog
    head_watchdog = exec_start_words((group_rendered / "gpu-small-1-vllm-watchdog.service").read_text())
    assert head_watchdog[head_watchdog.index("--url") + 1] == "http://127.0.0.1:8000"
    assert "--started-after" not in head_watchdog
