#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_compare_report
short_description: Write the answer of a compare run on the controller, and keep it for the speed gate
version_added: 0.3.0
description:
  - From the results of a compare run (C(playbooks/compare.yml) - server configurations measured side by side on one
    canary, the same prompts and concurrencies for each), writes under O(dest), in a directory per key (model, drafter,
    vLLM version, GPU model and count, tensor parallel size) and per run, C(compare.json) (all of it as data),
    C(compare.md) (aggregate
    tok/s for each configuration x category x concurrency with the spread of the repeats, the speed-up of each DFlash
    configuration over each baseline, where speculation stops paying, each number of speculative tokens predicted from
    per-position acceptance against what was measured, and the recommendation with its evidence) and C(compare.png).
  - The key's C(latest.json) is what a rollout's speed gate reads (C(vllm_server_gate_baseline_config)) to compare
    with a baseline measured on the same key and workload instead of a typed number.
  - The chart needs matplotlib for the Python that runs the module; without it the module says so and writes the rest.
author:
  - llmops.vllm maintainers (!UNKNOWN)
options:
  results:
    description: One per configuration - what P(llmops.vllm.vllm_compare_describe#filter) keeps of it, with C(status)
      (C(ready) when it served), C(reason), C(msg) and C(bench) (P(llmops.vllm.vllm_bench_figures#filter) of what
      M(llmops.vllm.vllm_bench) measured).
    type: list
    elements: dict
    required: true
  key:
    description: The key, as P(llmops.vllm.vllm_compare_key#filter) makes it.
    type: dict
    required: true
  workload:
    description: What was measured - dataset, dataset_digest, categories, dataset_output_len, input_len, output_len,
      warmups; a gate compares with these results only on the same.
    type: dict
    required: true
  dest:
    description: The directory on the controller that holds one directory per key.
    type: path
    required: true
  run_id:
    description: The name of this run's directory, such as a UTC timestamp.
    type: str
    required: true
  target_concurrency:
    description: The concurrency the recommendation is made at (requests in flight); it must be one of those measured.
    type: int
    default: 1
  mix:
    description:
      - "The category mix the recommendation weighs, as C({category: weight}); by default the prompt set's own (its
        entries per category)."
    type: dict
    default: {}
extends_documentation_fragment:
  - llmops.vllm.attributes.report
"""

EXAMPLES = r"""
- name: Write the answer of the compare run
  llmops.vllm.vllm_compare_report:
    results: "{{ _vllm_compare_results }}"
    key: "{{ _vllm_compare_key }}"
    workload: "{{ _vllm_compare_workload }}"
    dest: "{{ playbook_dir }}/vllm-compare"
    run_id: "{{ now(utc=true).strftime('%Y%m%dT%H%M%SZ') }}"
    target_concurrency: 4
    mix: {code: 0.6, chat: 0.4}
"""

RETURN = r"""
files:
  description: The files written.
  returned: always
  type: list
  elements: str
latest:
  description: The key's record the speed gate reads.
  returned: always
  type: str
recommendation:
  description: C(name) (the configuration with the most tok/s at the target concurrency over the mix), C(msg) (it,
    the runner-up and the evidence), C(speculation_pays), C(dflash_pays), C(tokens_per_second), C(margin), C(spread).
  returned: always
  type: dict
report:
  description: The Markdown of C(compare.md).
  returned: always
  type: str
notes:
  description: What was not written, and why.
  returned: always
  type: list
  elements: str
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.vllm.plugins.module_utils.report import compare
from ansible_collections.llmops.vllm.plugins.module_utils.report.bench import file_name


def _write(path, text):
    with open(path + ".tmp", "w") as fh:
        fh.write(text)
    os.rename(path + ".tmp", path)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            results=dict(type="list", elements="dict", required=True),
            key=dict(type="dict", required=True, no_log=False),
            workload=dict(type="dict", required=True),
            dest=dict(type="path", required=True),
            run_id=dict(type="str", required=True),
            target_concurrency=dict(type="int", default=1),
            mix=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    p = module.params
    fields = compare.key(p["key"])
    summary = compare.compare(p["results"], p["target_concurrency"], p["mix"] or None)
    report = compare.markdown(summary, fields, p["run_id"])
    directory = os.path.join(p["dest"], compare.slug(fields))
    latest = os.path.join(directory, "latest.json")
    out = dict(changed=not module.check_mode, files=[], latest=latest, recommendation=summary["recommendation"],
               report=report, notes=[])
    if module.check_mode:
        out["notes"].append("check mode: nothing written")
        module.exit_json(**out)
    run_dir = os.path.join(directory, file_name(p["run_id"]))
    if not os.path.isdir(run_dir):
        os.makedirs(run_dir, 0o755)
    record = json.dumps(compare.record(summary, fields, p["results"], p["workload"], p["run_id"]), indent=2,
                        sort_keys=True) + "\n"
    for name, text in (("compare.json", record), ("compare.md", report)):
        _write(os.path.join(run_dir, name), text)
        out["files"].append(os.path.join(run_dir, name))
    chart = os.path.join(run_dir, "compare.png")
    why_not = compare.chart(summary, chart, "%s: %s" % (p["run_id"], fields["model"]))
    if why_not:
        out["notes"].append(why_not)
    else:
        out["files"].append(chart)
    # Only a run where something served becomes what the gate reads.
    if summary["scores"]:
        _write(latest, record)
    else:
        out["notes"].append("no configuration served: %s kept as it was" % latest)
    module.exit_json(**out)


if __name__ == "__main__":
    main()
