#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_drain
short_description: Wait until a vLLM server has no request in flight
version_added: 0.2.0
description:
  - Reads vLLM's own gauges C(vllm:num_requests_running) and C(vllm:num_requests_waiting) from C(/metrics) until
    their sum is 0 or O(timeout) seconds have passed, so a rollout stops a server only once a front door has stopped
    sending it work and what it was doing has finished.
  - A server that does not answer is reported as V(unreachable) at once; the module never fails on what it reads.
  - It only reads and always reports C(changed=false).
author:
  - llmops.vllm maintainers (!UNKNOWN)
options:
  url:
    description: The server's C(/metrics) URL, or its C(/health) URL (the C(/metrics) beside it is read).
    type: str
    required: true
  timeout:
    description: Seconds to wait for the count to reach 0.
    type: float
    default: 120
  interval:
    description: Seconds between two reads.
    type: float
    default: 0.5
  api_key:
    description: The server's API key (C(/metrics) needs it, or its metrics token, once the server has a key).
    type: str
    default: ""
extends_documentation_fragment:
  - llmops.vllm.attributes.read_only
"""

EXAMPLES = r"""
- name: Let the requests in flight finish before the stop
  llmops.vllm.vllm_drain:
    url: http://127.0.0.1:8000/health
    timeout: 120
  register: drained
"""

RETURN = r"""
status:
  description: V(drained) (nothing in flight), V(timeout) (requests still in flight), or V(unreachable) (no reading).
  returned: always
  type: str
in_flight_at_start:
  description: Requests running or waiting at the first reading.
  returned: always
  type: int
in_flight:
  description: Requests running or waiting at the last reading.
  returned: always
  type: int
most:
  description: The largest count seen.
  returned: always
  type: int
elapsed:
  description: Seconds the wait took.
  returned: always
  type: float
detail:
  description: What happened, in words.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.vllm.plugins.module_utils.probe.in_flight import drain, fetch_in_flight, metrics_url_for


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", required=True),
            timeout=dict(type="float", default=120),
            interval=dict(type="float", default=0.5),
            api_key=dict(type="str", default="", no_log=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    headers = {"Authorization": "Bearer %s" % p["api_key"]} if p["api_key"] else {}
    result = drain(metrics_url_for(p["url"]), p["timeout"], p["interval"],
                   fetch=lambda url, timeout: fetch_in_flight(url, timeout, headers))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
