"""Kill ansible-playbook at one task boundary of a deploy's stage and roll, as a dying controller would.

bench/bench_interrupt.py enables it for each run. It counts the tasks that start in the plays that stage and roll
(their names in playbooks/deploy.yml) and, when task LLMOPS_INTERRUPT_AT is about to start (every earlier task done
on every host, this one not begun), sends its own process SIGKILL: no handler, no cleanup, no report. Each task
start, and each task that reported a change, is appended to LLMOPS_INTERRUPT_RECORD as a JSON line, so a run with
LLMOPS_INTERRUPT_AT=0 lists the boundaries a sweep can kill at. With LLMOPS_INTERRUPT_STATE (a JSON list, the argv
of a command that prints the hosts' state), each start also records the SHA-256 of what that command printed then:
the state of the hosts a kill at that boundary would leave.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: interrupt_at
    type: aggregate
    short_description: kill the run at one task boundary of a deploy's stage and roll
    description:
      - Used by bench/bench_interrupt.py. Counts the task starts in the stage and roll plays of playbooks/deploy.yml
        and sends ansible-playbook SIGKILL before task LLMOPS_INTERRUPT_AT; records each start and change to
        LLMOPS_INTERRUPT_RECORD, with the SHA-256 of what the command LLMOPS_INTERRUPT_STATE prints at each start.
    requirements:
      - enable in configuration
"""

# The plays of playbooks/deploy.yml that change hosts: staging on every host, the front door, the rollout's two plays.
PHASE_PLAYS = ("Stage on every host", "Set up the front door", "Confirm the hosts that serve what they should",
               "Deploy in batches")


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "interrupt_at"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._at = int(os.environ.get("LLMOPS_INTERRUPT_AT", "0") or 0)
        self._record_path = os.environ.get("LLMOPS_INTERRUPT_RECORD", "")
        self._state_argv = json.loads(os.environ.get("LLMOPS_INTERRUPT_STATE", "") or "[]")
        self._active, self._play, self._count = False, "", 0

    def _record(self, **entry):
        if self._record_path:
            with open(self._record_path, "a") as fh:
                fh.write(json.dumps(entry) + "\n")
                fh.flush()
                os.fsync(fh.fileno())

    def _state(self):
        """The digest of the hosts' state now (None without a state command), and the command's exit status. A read
        that failed is tried again: a failed read would pass for a state of its own."""
        if not self._state_argv:
            return None, None
        for _attempt in range(3):
            run = subprocess.run(self._state_argv, capture_output=True, check=False)
            if run.returncode == 0:
                break
        return hashlib.sha256(run.stdout + b"rc=%d" % run.returncode).hexdigest(), run.returncode

    def v2_playbook_on_play_start(self, play):
        self._play = play.get_name().strip()
        self._active = self._play in PHASE_PLAYS

    def v2_playbook_on_task_start(self, task, is_conditional):
        if not self._active:
            return
        self._count += 1
        state, state_rc = self._state()
        self._record(n=self._count, play=self._play, task=task.get_name(), state=state, state_rc=state_rc)
        if self._count == self._at:
            self._record(killed=self._count)
            os.kill(os.getpid(), signal.SIGKILL)

    def v2_runner_on_ok(self, result):
        if self._active and result._result.get("changed"):
            self._record(changed=self._count, task=result.task_name, host=result._host.get_name())
