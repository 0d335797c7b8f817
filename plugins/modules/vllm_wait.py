#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_wait
short_description: Wait until a vLLM server is ready, or report why it failed
version_added: 0.1.0
description:
  - Follows the vLLM log from a byte offset (or a cursor from an earlier call), watches the server's process or systemd
    unit, and probes C(/health), all at once, every O(interval) seconds.
  - Returns C(ready) when C(/health) answers 200 from a listener held by the watched process tree (or, when ownership
    cannot be told, after the log since the offset shows C(Application startup complete.)), and C(/v1/models) lists
    O(expect_model) when given.
  - Fails at once, naming the root-cause log line and a hint, when the process or unit dies (an exit code 0 after an
    engine death is a failure too), when the unit restarts (a crash loop under C(Restart=)), when the log shows a
    certain failure (engine initialisation, validation, out of memory, address in use, missing module, ...), when
    C(/health) answers 503 (engine dead), or when another process holds the port (vLLM binds with C(SO_REUSEPORT), so
    an old server can answer for the new one).
  - Lines written before the offset never count, so a stale C(Application startup complete.) from an earlier run
    cannot fake readiness.
  - The log may come through a collector or a supervisor (timestamps from C(docker logs -t), Kubernetes CRI, journald,
    docker compose, a supervisor's own logging header, records joined on one line, sentences hard-wrapped over two);
    the lines are normalised before they are read. A failure no exact signature knows is placed by its family (the
    exception class and the words of its message), and RV(reason=process_exited) is left for exits the log does not
    explain. C(docs/vllm-wait-corpus.md) in the collection shows how this scores on a corpus of real start-up logs.
  - It only reads, never changes the host, and always reports C(changed=false).
author:
  - llmops.vllm maintainers (!UNKNOWN)
options:
  log_path:
    description:
      - The file vLLM writes its stdout and stderr to (for example the unit's C(StandardOutput=append:) file).
      - Rotation (a new file at the path) and truncation are followed; a file that does not exist yet is waited for.
      - Without it, only the process and HTTP are watched.
    type: path
  log_offset:
    description:
      - Byte offset in O(log_path) where this start's lines begin, usually the file size taken just before the
        (re)start.
      - V(end) means the size of the file when the module starts, that is, the server started before this call
        (confirming that a running server still serves). Then no start-up line is expected, and a listener on the
        port that has the watched process's uid is trusted even where its owning process cannot be read (no
        C(CAP_SYS_PTRACE), as in containers); a listener of another uid is still V(port_in_use).
      - Ignored when O(cursor) is given.
    type: raw
    default: 0
  cursor:
    description:
      - The RV(cursor) returned by an earlier call, to resume from its log position, milestones seen and process
        or unit baseline (so a unit that restarted in between is reported as a failure). Overrides O(log_offset).
      - For a later task; not for the retries of one C(until) loop, whose arguments Ansible templates once.
    type: str
  unit:
    description:
      - A systemd unit running vLLM. Its C(MainPID), C(NRestarts) and exit status are read with C(systemctl show).
      - Mutually exclusive with O(pid).
    type: str
  pid:
    description:
      - The process id of the vLLM API server (the C(vllm serve) process). Mutually exclusive with O(unit).
    type: int
  health_url:
    description:
      - The server's health endpoint. A wildcard host (V(0.0.0.0), V(::)) is probed as V(127.0.0.1).
    type: str
    default: http://127.0.0.1:8000/health
  models_url:
    description:
      - The server's model list. Defaults to C(/v1/models) next to O(health_url).
    type: str
  expect_model:
    description:
      - A served model name that C(/v1/models) must list before the server counts as ready.
    type: str
  api_key:
    description:
      - The server's C(--api-key), sent as a Bearer token to C(/v1/models) only (C(/health) needs none).
    type: str
  timeout:
    description:
      - Seconds to wait in total. V(0) takes one look and returns.
    type: float
    default: 600
  interval:
    description:
      - Seconds between polls. Once the log shows the HTTP server starting, C(/health) is probed more often.
    type: float
    default: 0.25
  probe_timeout:
    description:
      - Seconds each HTTP probe may take. A probe that times out is not a failure by itself.
    type: float
    default: 2
  ready_patterns:
    description:
      - Extra regular expressions that, like C(Application startup complete.), show in the log that the HTTP server
        started. Readiness still needs C(/health) 200.
    type: list
    elements: str
  fail_patterns:
    description:
      - Extra regular expressions that end the wait as failed when a log line matches.
      - Each entry is a regex (reason V(config_error)) or a dict with keys C(pattern), C(reason) (one of the failure
        reasons listed under RV(reason)) and C(hint).
    type: list
    elements: raw
  log_tail_lines:
    description:
      - How many of the last log lines to return in RV(log_tail).
    type: int
    default: 40
  port:
    description:
      - The TCP port whose listener must belong to the watched process tree. Defaults to the port of O(health_url)
        when its host is this machine; otherwise ownership is not checked.
    type: int
  headless:
    description:
      - The watched process is a headless rank of a serving group (C(vllm serve --headless)), which serves no API.
        O(health_url) is the group's head's, on another host; the rank is ready once the head answers (and lists
        O(expect_model)) while the rank's own process lives and its log shows no failure. The listener's owner is not
        checked.
    type: bool
    default: false
extends_documentation_fragment:
  - llmops.vllm.attributes.read_only
notes:
  - Safe under C(async). For very long starts, short calls in an C(until) loop avoid holding one long connection;
    each retry reads again from O(log_offset), because Ansible templates a task's arguments once for all its retries,
    so one retry cannot hand RV(cursor) to the next. RV(cursor) resumes in a later task.
  - Linux only (reads C(/proc)).
"""

EXAMPLES = r"""
- name: Take the log size before the restart
  ansible.builtin.stat:
    path: /var/log/vllm/vllm.log
  register: vllm_log_before

- name: Restart vLLM
  ansible.builtin.systemd_service:
    name: vllm
    state: restarted

- name: Wait until vLLM serves the model, or fail with the reason
  llmops.vllm.vllm_wait:
    unit: vllm
    log_path: /var/log/vllm/vllm.log
    log_offset: "{{ vllm_log_before.stat.size | default(0) }}"
    health_url: http://127.0.0.1:8000/health
    expect_model: qwen3.6-27b
    timeout: 900

# Each retry reads again from the same offset (arguments are templated once for all retries).
- name: Wait in short steps
  llmops.vllm.vllm_wait:
    pid: "{{ vllm_pid }}"
    log_path: /srv/vllm/serve.log
    log_offset: "{{ vllm_log_before.stat.size | default(0) }}"
    timeout: 60
    fail_patterns:
      - pattern: "CUDA error: an illegal memory access"
        reason: engine_died
        hint: retry with --enforce-eager
  register: vllm_step
  until: vllm_step.reason != 'timeout'
  retries: 15
  failed_when: vllm_step.status != 'ready' and vllm_step.reason != 'timeout'
"""

RETURN = r"""
status:
  description: V(ready), V(failed) or V(timeout).
  returned: always
  type: str
  sample: failed
reason:
  description:
    - V(ready), or why not, one of V(missing_dependency), V(out_of_memory), V(config_error), V(model_not_found),
      V(port_in_use), V(gpu_unavailable), V(distributed_error), V(engine_died), V(process_exited), V(timeout).
  returned: always
  type: str
  sample: config_error
detail:
  description: The specifics, for example the missing module, the config class and field, the exit code.
  returned: always
  type: str
  sample: "SpeculativeConfig.bogus_key: Unexpected keyword argument (exit code 1)"
hint:
  description: What to change to fix it.
  returned: always
  type: str
root_cause_line:
  description:
    - The log record that explains the failure, without a collector's prefix.
    - The first one, not the wrappers printed after it; the innermost exception of a chained traceback; for a pydantic
      C(ValidationError), its message line, not its header.
  returned: always
  type: str
  sample: "(APIServer pid=1) Value error, Invalid repository ID or local directory specified: '/srv/models/x'."
log_tail:
  description: The last O(log_tail_lines) lines read from the log.
  returned: always
  type: list
  elements: str
elapsed:
  description: Seconds the wait took.
  returned: always
  type: float
  sample: 41.27
phases:
  description:
    - Seconds from the watched process's start (or the wait's start when unknown) to each start-up milestone seen
      since the offset. Keys among V(api_server_up), V(engine_init), V(weights_loaded), V(kv_cache_sized),
      V(cuda_graphs_captured), V(engine_ready), V(server_starting), V(app_startup_complete), V(http_ready),
      V(ready_pattern).
  returned: always
  type: dict
  sample: {"api_server_up": 12.1, "engine_init": 25.0, "weights_loaded": 33.8, "app_startup_complete": 40.2, "http_ready": 40.3}
restarts:
  description: Restarts of the unit since the wait (or the cursor's call) began.
  returned: always
  type: int
  sample: 0
cursor:
  description: Pass it as O(cursor) to a later call to continue from here.
  returned: always
  type: str
  sample: "v1;log=2049:1311:48213;seen=api_server_up,engine_init;unit=4242:0"
health_status:
  description: The last C(/health) answer, an HTTP status or V(refused), V(reset), V(timeout), V(unreachable).
  returned: always
  type: raw
  sample: 200
models:
  description: The model ids C(/v1/models) listed (read once /health was 200).
  returned: always
  type: list
  elements: str
  sample: ["qwen3.6-27b"]
pid:
  description: The watched pid (the unit's C(MainPID) with O(unit)).
  returned: always
  type: int
listener:
  description: Who held the port at the last answered probe, V(ours), V(foreign), V(none) or V(unknown); empty when
    nothing answered.
  returned: always
  type: str
log_path:
  description: The log file read.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.vllm.plugins.module_utils.probe.process import SYSTEMCTL_ENV
from ansible_collections.llmops.vllm.plugins.module_utils.probe.readiness import DEFAULT_HEALTH_URL, build_waiter


def main():
    module = AnsibleModule(
        argument_spec=dict(
            log_path=dict(type="path"),
            log_offset=dict(type="raw", default=0),
            cursor=dict(type="str"),
            unit=dict(type="str"),
            pid=dict(type="int"),
            health_url=dict(type="str", default=DEFAULT_HEALTH_URL),
            models_url=dict(type="str"),
            expect_model=dict(type="str"),
            api_key=dict(type="str", no_log=True),
            timeout=dict(type="float", default=600),
            interval=dict(type="float", default=0.25),
            probe_timeout=dict(type="float", default=2),
            ready_patterns=dict(type="list", elements="str"),
            fail_patterns=dict(type="list", elements="raw"),
            log_tail_lines=dict(type="int", default=40),
            port=dict(type="int"),
            headless=dict(type="bool", default=False),
        ),
        mutually_exclusive=[("unit", "pid")],
        supports_check_mode=True,
    )

    def run_command(argv):
        return module.run_command(argv, environ_update=SYSTEMCTL_ENV)

    try:
        waiter = build_waiter(module.params, run_command)
        result = waiter.run()
    except (ValueError, RuntimeError) as e:
        module.fail_json(msg=str(e), changed=False)

    msg = result.pop("msg")
    if result["status"] == "ready":
        module.exit_json(changed=False, msg=msg, **result)
    module.fail_json(changed=False, msg=msg, **result)


if __name__ == "__main__":
    main()
