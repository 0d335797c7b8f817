"""Record each task result, and the wall-clock time the controller got it, as JSON lines.

tests/helpers/ansible_cli.py enables it for every run and reads the file back; the
stdout callback stays the default one, so failures show what a user would see.
"""

from __future__ import annotations

import json
import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: task_results
    type: aggregate
    short_description: write task results with their arrival time to TASK_RESULTS_FILE
    description:
      - Used by the tests. Appends one JSON object per task result to the file named by TASK_RESULTS_FILE.
    requirements:
      - enable in configuration
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "task_results"
    CALLBACK_NEEDS_ENABLED = True

    def _record(self, result, outcome, **flags):
        arrived = time.time()
        # Callbacks get the result without the failed/skipped flags (the event says it): put back what the module returned.
        record = {"at": arrived, "outcome": outcome, "task": result.task_name, "host": result._host.get_name(),
                  "result": dict(result._result, **flags)}
        with open(os.environ["TASK_RESULTS_FILE"], "a") as fh:
            fh.write(json.dumps(record, default=str) + "\n")

    def v2_runner_on_ok(self, result):
        self._record(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record(result, "failed", failed=True)

    def v2_runner_on_skipped(self, result):
        self._record(result, "skipped", skipped=True)

    def v2_runner_on_unreachable(self, result):
        self._record(result, "unreachable")
