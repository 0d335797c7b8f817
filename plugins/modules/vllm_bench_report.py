#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_bench_report
short_description: Write the speed report of one deploy on the controller
version_added: 0.2.0
description:
  - From the fleet report's rows (filter P(llmops.vllm.vllm_fleet_report#filter)), writes under O(dest)/O(run_id) a JSON file
    per host that M(llmops.vllm.vllm_bench) measured, C(report.md) (a table of every host with its single-stream and
    aggregate tok/s, speed-up over the baseline, acceptance length and per-position acceptance) and C(report.png)
    (per-host tok/s against the baseline, and per-position acceptance), so runs can be compared over time.
  - The chart needs matplotlib for the Python that runs the module; without it the module says so and writes the rest.
  - A deploy that measured no host (nothing restarted) writes nothing.
author:
  - llmops.vllm maintainers (!UNKNOWN)
options:
  rows:
    description: The C(hosts) of the fleet report.
    type: list
    elements: dict
    required: true
  dest:
    description: The directory on the controller that holds one directory per run.
    type: path
    required: true
  run_id:
    description: The name of this run's directory, such as a UTC timestamp.
    type: str
    required: true
  baseline_tokens_per_second:
    description: The single-stream tok/s the chart and the table compare with; by default the one the hosts' speed gate
      used (C(vllm_server_gate_baseline_tokens_per_second)).
    type: float
extends_documentation_fragment:
  - llmops.vllm.attributes.report
"""

EXAMPLES = r"""
- name: Write the speed report
  llmops.vllm.vllm_bench_report:
    rows: "{{ (groups['vllm_servers'] | llmops.vllm.vllm_fleet_report(hostvars)).hosts }}"
    dest: "{{ playbook_dir }}/vllm-speed-reports"
    run_id: "{{ now(utc=true).strftime('%Y%m%dT%H%M%SZ') }}"
"""

RETURN = r"""
files:
  description: The files written, JSON files first.
  returned: always
  type: list
  elements: str
notes:
  description: What was not written, and why.
  returned: always
  type: list
  elements: str
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.vllm.plugins.module_utils.report.bench import (
    baseline_of, chart, file_name, host_record, markdown, measured)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            rows=dict(type="list", elements="dict", required=True),
            dest=dict(type="path", required=True),
            run_id=dict(type="str", required=True),
            baseline_tokens_per_second=dict(type="float", no_log=False),
        ),
        supports_check_mode=True,
    )
    p = module.params
    rows = p["rows"]
    baseline = p["baseline_tokens_per_second"] or baseline_of(rows)
    if not measured(rows):
        module.exit_json(changed=False, files=[], notes=["no host was measured in this deploy: no report written"])
    if module.check_mode:
        module.exit_json(changed=True, files=[], notes=["check mode: nothing written"])
    # A run id is one directory below dest, whatever it holds (a ../ in it would write elsewhere).
    directory = os.path.join(p["dest"], file_name(p["run_id"]))
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    files, notes = [], []
    for row in measured(rows):
        path = os.path.join(directory, "%s.json" % file_name(row["host"]))
        with open(path, "w") as fh:
            json.dump(host_record(row, p["run_id"]), fh, indent=2, sort_keys=True)
            fh.write("\n")
        files.append(path)
    path = os.path.join(directory, "report.md")
    with open(path, "w") as fh:
        fh.write(markdown(rows, p["run_id"], baseline))
    files.append(path)
    path = os.path.join(directory, "report.png")
    why_not = chart(rows, p["run_id"], path, baseline)
    if why_not:
        notes.append(why_not)
    else:
        files.append(path)
    module.exit_json(changed=True, files=files, notes=notes)


if __name__ == "__main__":
    main()
