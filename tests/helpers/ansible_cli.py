"""Run Ansible from the tests the way a user does (the ansible-playbook CLI), and read the results back.

Every run targets this machine (connection local, modules on the interpreter
running the tests) with the settings of tests/ansible.cfg. The stdout callback
is the default one, so ``AnsibleRun.stdout`` reads like a user's terminal; the
task_results callback (tests/callback_plugins) records each task's result and
when the controller got it, for ``AnsibleRun.tasks``.

    run = run_playbook(REPO / "tests/integration/playbooks/preflight.yml", inventory=path, extra_vars={...})
    assert run.rc == 0, run.report()
    result = run_module("llmops.vllm.vllm_wait", {"pid": 1, "timeout": 5}).result()
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

TESTS = Path(__file__).resolve().parents[1]
CONFIG = TESTS / "ansible.cfg"
REPO = TESTS.parent

# The venv's own when its bin/ is not on PATH (pytest started as venv/bin/python -m pytest).
ANSIBLE_PLAYBOOK = shutil.which("ansible-playbook") or os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
# ansible-playbook's exit status when a task failed on some host.
RC_HOST_FAILED = 2


def ansible_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment every Ansible process the tests start shares, molecule's and ansible-lint's included.

    ANSIBLE_COLLECTIONS_PATH is inherited: tests/conftest.py puts this checkout
    first on it, so llmops.vllm is the working tree as it is now.
    """
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    env.update(extra or {})
    return env


@dataclass(frozen=True)
class TaskResult:
    task: str
    host: str
    outcome: str     # ok, failed, skipped or unreachable
    at: float        # wall-clock time the controller got the result
    result: dict


@dataclass(frozen=True, repr=False)
class AnsibleRun:
    rc: int
    stdout: str
    stderr: str
    tasks: tuple[TaskResult, ...]

    def __repr__(self) -> str:
        # short, for pytest's "where" lines; report() has the output
        return f"AnsibleRun(rc={self.rc}, {len(self.tasks)} task results)"

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def report(self, chars: int = 6000) -> str:
        """The end of the output, for an assertion message."""
        return f"rc={self.rc}\n{self.stdout[-chars:]}\n{self.stderr[-chars // 2:]}"

    def task(self, name: str | None = None, host: str = "localhost") -> TaskResult:
        """The last result of the task called ``name`` (of any task when None) on ``host``."""
        for entry in reversed(self.tasks):
            if entry.host == host and name in (None, entry.task):
                return entry
        raise AssertionError(f"no result of task {name!r} on {host}:\n{self.report()}")

    def result(self, name: str | None = None, host: str = "localhost") -> dict:
        """What that task returned, as the controller got it."""
        return self.task(name, host).result


class PlaybookProcess:
    """An ansible-playbook still running; ``wait`` gives its AnsibleRun."""

    def __init__(self, cmd: list[str], env: dict[str, str], workdir: Path):
        self._workdir = workdir
        self._results = workdir / "task-results.jsonl"
        env = dict(env, TASK_RESULTS_FILE=str(self._results))
        self._proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)

    def poll(self) -> int | None:
        return self._proc.poll()

    def wait(self, timeout: float = 900) -> AnsibleRun:
        try:
            stdout, stderr = self._proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            stdout, stderr = self._proc.communicate()
            raise AssertionError(f"ansible-playbook ran past {timeout} s:\n{stdout[-6000:]}\n{stderr[-3000:]}") from None
        try:
            lines = self._results.read_text().splitlines() if self._results.exists() else []
            tasks = tuple(TaskResult(**json.loads(line)) for line in lines)
        finally:
            self.close()
        return AnsibleRun(self._proc.returncode, stdout, stderr, tasks)

    def close(self) -> None:
        """Stop the run if it is still going (a test that failed before waiting) and remove its files."""
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.communicate()
        shutil.rmtree(self._workdir, ignore_errors=True)


def start_playbook(playbook: list[dict] | str | Path, inventory: str | Path = "localhost,", extra_vars: dict | None = None,
                   check: bool = False, env: dict[str, str] | None = None) -> PlaybookProcess:
    """Start ansible-playbook on a list of plays, YAML text, or a playbook file (a Path), without waiting."""
    workdir = Path(tempfile.mkdtemp(prefix="ansible-run-"))
    if isinstance(playbook, Path):
        path = playbook
    else:
        path = workdir / "playbook.yml"
        path.write_text(playbook if isinstance(playbook, str) else yaml.safe_dump(playbook, sort_keys=False))
    cmd = [ANSIBLE_PLAYBOOK, "-i", str(inventory), "-c", "local", str(path)]
    # Modules run on this interpreter even where an inventory names another (inventories/example's auto_silent):
    # an extra var beats the inventory, the environment does not.
    extra_vars = {"ansible_python_interpreter": sys.executable, **(extra_vars or {})}
    # A file keeps types (null, numbers, lists) that "-e key=value" would turn into strings.
    vars_file = workdir / "extra-vars.json"
    vars_file.write_text(json.dumps(extra_vars))
    cmd += ["-e", f"@{vars_file}"]
    if check:
        cmd.append("--check")
    local = {"ANSIBLE_CONFIG": str(CONFIG), "ANSIBLE_PYTHON_INTERPRETER": sys.executable}
    return PlaybookProcess(cmd, ansible_env({**local, **(env or {})}), workdir)


def run_playbook(playbook: list[dict] | str | Path, inventory: str | Path = "localhost,", extra_vars: dict | None = None,
                 check: bool = False, env: dict[str, str] | None = None, timeout: float = 900) -> AnsibleRun:
    """Run ansible-playbook to the end (see start_playbook)."""
    return start_playbook(playbook, inventory, extra_vars, check, env).wait(timeout)


def module_play(module: str, args: dict) -> list[dict]:
    """A playbook of one task: ``module`` with ``args`` on localhost."""
    return [{"name": module, "hosts": "localhost", "gather_facts": False, "tasks": [{"name": module, module: args}]}]


def run_module(module: str, args: dict, check: bool = False, env: dict[str, str] | None = None,
               timeout: float = 900) -> AnsibleRun:
    """Run one module on localhost as a playbook task; ``.result()`` is its result."""
    return run_playbook(module_play(module, args), check=check, env=env, timeout=timeout)
