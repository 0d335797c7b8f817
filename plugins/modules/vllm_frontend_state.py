#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_frontend_state
short_description: Say where an HAProxy front door has each vLLM server
version_added: 0.3.0
description:
  - Reads C(show servers state) of one backend through HAProxy's runtime API on its local socket, and returns each
    server's state as an operator set it (V(ready), V(drain), V(maint)) and whether its health check has it up.
  - Changes nothing.
author:
  - llmops.vllm maintainers (!UNKNOWN)
options:
  socket:
    description: HAProxy's runtime API socket.
    type: path
    default: /run/haproxy/admin.sock
  backend:
    description: The backend that holds the vLLM servers.
    type: str
    default: vllm
extends_documentation_fragment:
  - llmops.vllm.attributes.read_only
"""

EXAMPLES = r"""
- name: Read where the front door has each server
  llmops.vllm.vllm_frontend_state:
  register: door
"""

RETURN = r"""
servers:
  description: By server name (the vLLM host's inventory name), C(admin) and C(up).
  returned: success
  type: dict
  sample: {"gpu-node-1": {"admin": "ready", "up": true}}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.vllm.plugins.module_utils.probe import haproxy


def main():
    module = AnsibleModule(
        argument_spec=dict(
            socket=dict(type="path", default="/run/haproxy/admin.sock"),
            backend=dict(type="str", default="vllm"),
        ),
        supports_check_mode=True,
    )
    try:
        servers = haproxy.servers(module.params["socket"], module.params["backend"])
    except (haproxy.HaproxyError, OSError) as e:
        module.fail_json(msg="cannot read HAProxy's servers through %s: %s" % (module.params["socket"], e))
    module.exit_json(changed=False, servers=servers)


if __name__ == "__main__":
    main()
