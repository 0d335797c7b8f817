"""Run Ansible the way a user does (the ansible / ansible-playbook CLIs) and read results back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    # Modules on localhost run with the interpreter running the tests, not whatever discovery finds.
    env = dict(os.environ, ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json",
               ANSIBLE_NOCOLOR="1", ANSIBLE_DEPRECATION_WARNINGS="0", ANSIBLE_LOCALHOST_WARNING="0",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="0", ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    env.update(extra or {})
    return env


def run_module(module: str, args: dict, timeout: float = 900, env: dict[str, str] | None = None,
               check: bool = False) -> dict:
    """Run one module on localhost through the `ansible` CLI and return its result dict."""
    cmd = ["ansible", "localhost", "-c", "local", "-m", module, "-a", json.dumps(args)]
    if check:
        cmd.append("--check")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env(env), check=False)
    try:
        out = json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise AssertionError(f"ansible printed no JSON (rc={proc.returncode}):\n{proc.stdout}\n{proc.stderr}") from exc
    return out["plays"][0]["tasks"][0]["hosts"]["localhost"]


def run_playbook(playbook: list[dict], workdir: Path, extra_vars: dict | None = None, timeout: float = 1800,
                 check: bool = False, env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    """Write a playbook into workdir, run it on localhost, return the process and the parsed JSON."""
    path = workdir / "playbook.yml"
    path.write_text(yaml.safe_dump(playbook, sort_keys=False))
    cmd = ["ansible-playbook", "-i", "localhost,", "-c", "local", str(path)]
    if extra_vars:
        vars_file = workdir / "extra-vars.json"
        vars_file.write_text(json.dumps(extra_vars))
        cmd += ["-e", f"@{vars_file}"]
    if check:
        cmd.append("--check")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env(env), check=False)
    try:
        parsed = json.loads(proc.stdout)
    except json.JSONDecodeError:
        parsed = {}
    return proc, parsed


def stats(parsed: dict, host: str = "localhost") -> dict:
    """The PLAY RECAP counters of one host (ok, changed, failures, ...)."""
    return parsed.get("stats", {}).get(host, {})


def failure_messages(parsed: dict) -> list[str]:
    """The msg of every failed task result, in order."""
    msgs = []
    for play in parsed.get("plays", []):
        for task in play["tasks"]:
            for res in task["hosts"].values():
                if res.get("failed"):
                    msgs.append(str(res.get("msg", "")))
    return msgs
