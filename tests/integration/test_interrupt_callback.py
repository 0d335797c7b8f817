"""The callback bench/bench_interrupt.py kills deploys with (bench/callback_plugins/interrupt_at.py): it kills
ansible-playbook before the task it is told, counting only the tasks of the stage and roll plays, and records each
task start and each change, so the sweep's kill points and its "killed there" check mean what they say."""

from __future__ import annotations

import json
import signal

import pytest

from ansible_collections.llmops.vllm.tests.helpers.ansible_cli import REPO, TESTS, run_playbook

CALLBACKS = "%s:%s" % (TESTS / "callback_plugins", REPO / "bench" / "callback_plugins")


def _plays(marker):
    touch = {"ansible.builtin.file": {"path": str(marker) + "-{{ item }}", "state": "touch"}}
    return [
        # Not a phase play: its task is not counted.
        {"name": "Check every host before changing any", "hosts": "localhost", "gather_facts": False,
         "tasks": [{"name": "Read", "ansible.builtin.debug": {"msg": "read"}}]},
        {"name": "Stage on every host", "hosts": "localhost", "gather_facts": False,
         "tasks": [{"name": "Unchanged", "ansible.builtin.debug": {"msg": "nothing"}},
                   {"name": "Stage", **touch, "loop": ["staged"]}]},
        {"name": "Deploy in batches", "hosts": "localhost", "gather_facts": False,
         "tasks": [{"name": "Roll", **touch, "loop": ["rolled"]}]},
    ]


def _run(tmp_path, kill_at, state=()):
    record = tmp_path / ("record-%d.jsonl" % kill_at)
    run = run_playbook(_plays(tmp_path / "marker"), env={
        "ANSIBLE_CALLBACK_PLUGINS": CALLBACKS, "ANSIBLE_CALLBACKS_ENABLED": "task_results,interrupt_at",
        "LLMOPS_INTERRUPT_AT": str(kill_at), "LLMOPS_INTERRUPT_RECORD": str(record),
        "LLMOPS_INTERRUPT_STATE": json.dumps(list(state))})
    entries = [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
    return run, entries


def test_a_recording_run_lists_the_phase_tasks_and_the_changes(tmp_path):
    run, entries = _run(tmp_path, 0)
    assert run.rc == 0, run.report()
    assert [(e["n"], e["play"], e["task"]) for e in entries if "n" in e] == [
        (1, "Stage on every host", "Unchanged"), (2, "Stage on every host", "Stage"), (3, "Deploy in batches", "Roll")]
    assert [e["changed"] for e in entries if "changed" in e] == [2, 3]
    assert (tmp_path / "marker-staged").exists() and (tmp_path / "marker-rolled").exists()
    assert all(e["state"] is None for e in entries if "n" in e)


def test_each_boundary_records_the_state_a_kill_there_would_leave(tmp_path):
    # The "host": the marker files. The task that changes nothing leaves the state as it was; the one that touches
    # a file makes a new one.
    run, entries = _run(tmp_path, 0, ["sh", "-c", "ls %s/marker-* 2>/dev/null || true" % tmp_path])
    assert run.rc == 0, run.report()
    states = [e["state"] for e in entries if "n" in e]
    assert len(set(states)) == 2 and states[0] == states[1] != states[2], states


@pytest.mark.parametrize("kill_at, done", [(1, []), (2, []), (3, ["staged"])])
def test_the_run_dies_before_the_task_it_is_told(tmp_path, kill_at, done):
    run, entries = _run(tmp_path, kill_at)
    assert run.rc == -signal.SIGKILL, run.report()
    assert {"killed": kill_at} in entries
    assert sorted(p.name.split("-", 1)[1] for p in tmp_path.glob("marker-*")) == done
    # Killed, not stopped: no recap, as when a controller dies.
    assert "PLAY RECAP" not in run.stdout
