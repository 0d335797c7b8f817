#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_status
short_description: Say what the vLLM server of a host runs, from the host
version_added: 0.3.0
description:
  - Reads the service's state from systemd (main PID, uptime, restarts systemd made), the running command from the
    main process itself (so a change staged but not rolled yet does not show), the vLLM release from the virtualenv
    that command runs, the watchdog's state, and when the server role kept the files of the last good start and of the
    one before it (the target of C(playbooks/rollback.yml)).
  - Changes nothing; playbooks/status.yml runs it on every host and makes the fleet's table.
author:
  - llmops.vllm maintainers (!UNKNOWN)
options:
  service:
    description: The vLLM service's unit name (C(vllm_server_service_name)).
    type: str
    default: vllm
  state_dir:
    description: The server role's private directory for the service (C(vllm_server_private_dir)/<service>).
    type: path
    default: /var/lib/llmops-vllm/vllm
extends_documentation_fragment:
  - llmops.vllm.attributes.read_only
"""

EXAMPLES = r"""
- name: Read what this host runs
  llmops.vllm.vllm_status:
    service: vllm
  register: status
"""

RETURN = r"""
status:
  description: The host's row.
  returned: always
  type: dict
  contains:
    state:
      description: The unit's ActiveState, such as V(active) or V(failed).
      type: str
      returned: always
    pid:
      description: The main PID; 0 when the unit runs nothing.
      type: int
      returned: always
    uptime:
      description: Seconds since the main process started; null when none runs.
      type: float
      returned: always
    restarts:
      description: Restarts systemd made since the unit was last started by hand or by a deploy.
      type: int
      returned: always
    version:
      description: The vLLM release of the running venv.
      type: str
      returned: always
    model:
      description: The model argument the server runs.
      type: str
      returned: always
    speculative_method:
      description: The speculative method; empty for none.
      type: str
      returned: always
    num_speculative_tokens:
      description: The speculative tokens per step (K); null without speculation.
      type: int
      returned: always
    watchdog:
      description: The watchdog timer's ActiveState (V(active) while it runs the probes).
      type: str
      returned: always
    last_good_at:
      description: When the last good start's files were kept (epoch seconds); null when none are.
      type: float
      returned: always
    rollback_target_at:
      description: When the start before it was kept; null when there is nothing to roll back to.
      type: float
      returned: always
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.vllm.plugins.module_utils.probe import host_state
from ansible_collections.llmops.vllm.plugins.module_utils.probe.process import SYSTEMCTL_ENV


def main():
    module = AnsibleModule(
        argument_spec=dict(
            service=dict(type="str", default="vllm"),
            state_dir=dict(type="path", default="/var/lib/llmops-vllm/vllm"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    row = host_state.read(p["service"], p["service"] + "-watchdog.timer", p["state_dir"],
                          lambda argv: module.run_command(argv, environ_update=SYSTEMCTL_ENV))
    module.exit_json(changed=False, status=row)


if __name__ == "__main__":
    main()
