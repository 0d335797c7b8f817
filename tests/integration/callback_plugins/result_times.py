"""Record each module result, and the wall-clock time the controller got it, as JSON lines.

Enabled by tests with ANSIBLE_CALLBACKS_ENABLED=result_times and RESULT_TIMES_FILE.
"""

from __future__ import annotations

import json
import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: result_times
    type: aggregate
    short_description: write module results with their arrival time to RESULT_TIMES_FILE
    description:
      - Used by the integration tests. Appends one JSON object per result to the file named by RESULT_TIMES_FILE.
    requirements:
      - enable in configuration
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "result_times"
    CALLBACK_NEEDS_ENABLED = True

    def _record(self, result, outcome):
        arrived = time.time()
        record = {"at": arrived, "outcome": outcome, "name": result.task_name, "result": result._result}
        with open(os.environ["RESULT_TIMES_FILE"], "a") as fh:
            fh.write(json.dumps(record, default=str) + "\n")

    def v2_runner_on_ok(self, result):
        self._record(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record(result, "failed")
