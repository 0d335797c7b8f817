#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_port_owner
short_description: Tell who listens on the port a vLLM service is about to use
version_added: 0.2.0
description:
  - Reads the TCP listeners on O(port) from C(/proc/net/tcp) and C(tcp6) and tells whether the port is free, held by
    the service (the process tree of the unit's MainPID), or held by something else, by the same rules
    M(llmops.vllm.vllm_wait) applies before it trusts C(/health).
  - Where root may not read the holder's C(/proc/PID/fd) (no C(CAP_SYS_PTRACE), as in containers), a listening socket
    of the service account counts as the service's.
  - It only reads and always reports C(changed=false).
author:
  - llmops.vllm maintainers (!UNKNOWN)
options:
  port:
    description: The TCP port.
    type: int
    required: true
  unit:
    description: The systemd unit of the service; its MainPID's process tree is the service.
    type: str
    required: true
  user:
    description: The service account; its sockets count as the service's where their process cannot be read.
    type: str
    default: ""
extends_documentation_fragment:
  - llmops.vllm.attributes.read_only
"""

EXAMPLES = r"""
- name: Who holds port 8000
  llmops.vllm.vllm_port_owner:
    port: 8000
    unit: vllm
    user: vllm
  register: owner

- name: Fail unless it is free or ours
  ansible.builtin.assert:
    that: owner.kind in ['none', 'ours']
    fail_msg: "{{ owner.detail }}"
"""

RETURN = r"""
kind:
  description: V(none) (free), V(ours) (the service's), V(foreign) (another process), or V(unknown) (cannot tell).
  returned: always
  type: str
pids:
  description: The processes found holding the port.
  returned: always
  type: list
  elements: int
detail:
  description: Who holds it, in words.
  returned: always
  type: str
main_pid:
  description: The unit's MainPID (0 when it is not running).
  returned: always
  type: int
"""

import pwd

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.vllm.plugins.module_utils.probe.process import SYSTEMCTL_ENV, service_port_owner, unit_main_pid


def main():
    module = AnsibleModule(
        argument_spec=dict(
            port=dict(type="int", required=True),
            unit=dict(type="str", required=True),
            user=dict(type="str", default=""),
        ),
        supports_check_mode=True,
    )
    p = module.params
    main_pid = unit_main_pid(p["unit"], lambda argv: module.run_command(argv, environ_update=SYSTEMCTL_ENV))
    uid = None
    if p["user"]:
        try:
            uid = pwd.getpwnam(p["user"]).pw_uid
        except KeyError:
            uid = None          # no such account yet (before the first install): none of its sockets exist either
    owner = service_port_owner(p["port"], main_pid, uid)
    module.exit_json(changed=False, kind=owner.kind, pids=owner.pids, detail=owner.detail, main_pid=main_pid)


if __name__ == "__main__":
    main()
