#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_frontend_server
short_description: Take a vLLM server out of an HAProxy front door, or put it back
version_added: 0.2.0
description:
  - Sets one server of an HAProxy backend to V(drain) (no new requests; those it serves go on) or back to V(ready)
    through HAProxy's runtime API on its local socket, and with O(wait_idle) waits until the server has no session
    left, so a rollout stops a vLLM host only when the front door no longer needs it.
  - Reports C(changed) only when the server's state changes.
author:
  - llmops.vllm maintainers (!UNKNOWN)
options:
  socket:
    description: HAProxy's runtime API socket (C(stats socket ... level admin)).
    type: path
    default: /run/haproxy/admin.sock
  backend:
    description: The backend that holds the server.
    type: str
    default: vllm
  server:
    description: The server's name in the backend (the inventory name of the vLLM host).
    type: str
    required: true
  state:
    description: V(drain) takes it out of rotation, V(ready) puts it back (HAProxy's health checks still decide UP or DOWN).
    type: str
    choices: [drain, ready]
    required: true
  wait_idle:
    description: With V(drain), wait until the server has no session left, for at most O(timeout) seconds.
    type: bool
    default: true
  timeout:
    description: Seconds O(wait_idle) waits.
    type: float
    default: 120
extends_documentation_fragment:
  - llmops.vllm.attributes.sets_state
"""

EXAMPLES = r"""
- name: Take gpu-node-1 out of the front door and let its requests finish
  llmops.vllm.vllm_frontend_server:
    server: gpu-node-1
    state: drain
  delegate_to: "{{ item }}"
  loop: "{{ groups['vllm_frontends'] }}"
"""

RETURN = r"""
previous:
  description: The state before (V(ready), V(drain) or V(maint)).
  returned: always
  type: str
status:
  description: HAProxy's status of the server afterwards (UP, DOWN, DRAIN, ...).
  returned: always
  type: str
sessions:
  description: Sessions the server still had when the module returned.
  returned: always
  type: int
most_sessions:
  description: The most sessions seen while waiting.
  returned: always
  type: int
waited:
  description: Seconds spent waiting for the sessions to end.
  returned: always
  type: float
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.vllm.plugins.module_utils.probe import haproxy


def main():
    module = AnsibleModule(
        argument_spec=dict(
            socket=dict(type="path", default="/run/haproxy/admin.sock"),
            backend=dict(type="str", default="vllm"),
            server=dict(type="str", required=True),
            state=dict(type="str", choices=["drain", "ready"], required=True),
            wait_idle=dict(type="bool", default=True),
            timeout=dict(type="float", default=120),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        row = haproxy.server(p["socket"], p["backend"], p["server"])
        previous = haproxy.admin_state(p["socket"], p["backend"], p["server"])
        changed = previous != p["state"]
        if changed and not module.check_mode:
            haproxy.set_state(p["socket"], p["backend"], p["server"], p["state"])
        sessions, most, waited = int(row.get("scur") or 0), int(row.get("scur") or 0), 0.0
        if p["state"] == "drain" and p["wait_idle"] and not module.check_mode:
            sessions, most, waited = haproxy.wait_idle(p["socket"], p["backend"], p["server"], p["timeout"])
        status = haproxy.server(p["socket"], p["backend"], p["server"]).get("status", "")
    except haproxy.HaproxyError as e:
        module.fail_json(msg=str(e))
    module.exit_json(changed=changed, previous=previous, status=status, sessions=sessions, most_sessions=most,
                     waited=waited)


if __name__ == "__main__":
    main()
