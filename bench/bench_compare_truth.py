"""The compare run's answer against vLLM's own client, on the same host the same hour.

    . scripts/lib.sh && activate_tools
    ./scripts/test.sh tests/molecule                # or ./scripts/demo.sh: a compare run of the agreeing pair
    python bench/bench_compare_truth.py             # then this, within the hour
    python bench/bench_compare_truth.py --rounds 3 --compare .build/molecule/default-record/compare

The agreeing pair (the tiny target and the DFlash drafter that agrees with it on every token, the demo's and molecule
default's) is started by hand on this machine, without the collection: the engine venv's ``vllm serve`` with the
demo's flags, no speculation and DFlash at K=4 in turn, each round in the order the compare run uses (A B, then B A),
each configuration started afresh in each round. In each block, after one warm-up request, ``vllm bench serve``
measures the workload the speed-up was first measured on by hand: random prompts of 32 tokens, 64 output tokens
(``--ignore-eos``: the agreeing target would end every answer at its first token), greedy (``--temperature 0``, as
vllm_bench measures: the pair agrees on the most likely token, not on a sample), 16 prompts, one in flight. Its
median time per output token gives the block's decode tok/s (1000 / TPOT), and its output tok/s the aggregate.

The speed-up is the paired t interval over rounds (module_utils/report/intervals.paired, the compare run's own
statistics). With ``--compare`` (a compare directory or its latest.json), the compare run's interval for DFlash over
no speculation is printed beside it and checked: the by-hand speed-up must lie inside it. The exit status is 1 when
it does not, or when a block failed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / ".build" / "collections"))
from ansible_collections.llmops.vllm.plugins.module_utils.report import intervals  # noqa: E402
sys.path.insert(0, str(REPO / "tests" / "helpers"))   # the suite's engine starter; the built collection has no tests
from vllm_serve import SERVED, VllmServe, free_port  # noqa: E402

CLI = REPO / "roles" / "vllm_install" / "files" / "vllm_cpu_cli.py"
# The demo inventory's server (inventories/demo/group_vars/vllm_servers/main.yml) beyond what VllmServe sets.
EXTRA = ["--max-num-batched-tokens", "512", "--kv-cache-memory-bytes", "268435456"]
K = 4
CONFIGS = {"no-speculation": False, "dflash-k4": True}


def render_drafter(models: Path, work: Path) -> Path:
    """The agreeing drafter's config as the drafter role renders it for this release (the checkpoint as it is
    published lacks what vLLM reads), through the installed collection."""
    play = [{"name": "Render the agreeing drafter", "hosts": "localhost", "gather_facts": False, "tasks": [{
        "name": "Render it", "ansible.builtin.include_role": {"name": "llmops.vllm.vllm_drafter"}, "vars": {
            "vllm_drafter_target_model_dir": str(models / "tiny-qwen3-agree"),
            "vllm_drafter_dir": str(models / "tiny-qwen3-agree-dflash"),
            "vllm_common_drafter_dir": str(work / "drafter"),
            "vllm_common_version": "0.32.0"}}]}]
    (work / "render.yml").write_text(json.dumps(play))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".build" / "collections"))
    run = subprocess.run(["ansible-playbook", "-i", "localhost,", "-c", "local",
                          "-e", "ansible_python_interpreter=" + sys.executable, str(work / "render.yml")],
                         env=env, capture_output=True, text=True, check=False)
    if run.returncode:
        raise SystemExit("rendering the drafter failed:\n" + run.stdout[-3000:] + run.stderr[-2000:])
    return work / "drafter"


def start_server(python: Path, target: Path, drafter: Path | None, log: Path) -> VllmServe:
    """The test suite's one way to start the engine (tests/helpers/vllm_serve), with the demo's flags, once it
    answers /health."""
    server = VllmServe(python, CLI, log, target, drafter, free_port(), EXTRA, speculative_tokens=K)
    server.start()
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise SystemExit("the server exited (%s): see %s" % (server.proc.returncode, log))
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/health" % server.port, timeout=5) as resp:
                if resp.status == 200:
                    return server
        except OSError:
            pass
        time.sleep(1)
    server.stop()
    raise SystemExit("the server did not answer within 300 s: see %s" % log)


# One request in flight decodes at most a few times faster than its output rate with the first token included (64
# output tokens, a first token of tens of ms); a median time per output token near 0 is a client that read a burst of
# tokens at once (once 0.00 ms, "244,924 tok/s", against 595 output tok/s). Such a block is measured again.
BURST_RATIO = 5.0
BURST_TRIES = 3


def block(python: Path, server: VllmServe, target: Path, out: Path, prompts: int) -> dict:
    """One warm-up request, then vllm bench serve on the random workload; its saved result."""
    body = json.dumps({"model": SERVED, "prompt": "warm up", "max_tokens": 8}).encode()
    urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:%d/v1/completions" % server.port, body,
                                                  {"Content-Type": "application/json"}), timeout=120).read()
    cmd = [str(python), str(CLI), "bench", "serve", "--backend", "vllm", "--base-url",
           "http://127.0.0.1:%d" % server.port, "--model", SERVED, "--tokenizer", str(target),
           "--dataset-name", "random", "--random-input-len", "32", "--random-output-len", "64", "--ignore-eos",
           "--temperature", "0", "--num-prompts", str(prompts), "--max-concurrency", "1", "--seed", "0", "--save-result",
           "--result-dir", str(out.parent), "--result-filename", out.name]
    run = subprocess.run(cmd, env=dict(server.env), capture_output=True, text=True, check=False)
    if run.returncode or not out.exists():
        raise SystemExit("vllm bench serve failed:\n" + run.stdout[-2000:] + run.stderr[-2000:])
    saved = json.loads(out.read_text())
    return {"decode_tok_s": 1000.0 / saved["median_tpot_ms"], "output_tok_s": saved["output_throughput"],
            "median_tpot_ms": saved["median_tpot_ms"], "completed": saved["completed"],
            "acceptance_length": saved.get("spec_decode_acceptance_length")}


def compare_interval(path: Path) -> dict | None:
    kept = sorted(path.glob("*/latest.json")) if path.is_dir() else [path]
    if not kept:
        return None
    record = json.loads(kept[-1].read_text())
    return ((record.get("speedup_intervals") or {}).get("dflash-k4") or {}).get("no-speculation")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--compare", type=Path, help="a compare directory, or its latest.json, of the same hour")
    parser.add_argument("--json", type=Path, help="write the figures as JSON here too")
    args = parser.parse_args()
    venv, models = os.environ.get("LLMOPS_ENGINE_VENV"), os.environ.get("LLMOPS_MODELS")
    if not venv or not models:
        raise SystemExit("LLMOPS_ENGINE_VENV and LLMOPS_MODELS are unset: run '. scripts/lib.sh && activate_tools'")
    python, models = Path(venv) / "bin" / "python", Path(models)
    target = models / "tiny-qwen3-agree"
    work = Path(tempfile.mkdtemp(prefix="llmops-truth-"))
    try:
        drafter = render_drafter(models, work)
        names = list(CONFIGS)
        rows, per = [], {name: [] for name in names}
        started = time.monotonic()
        for rnd in range(args.rounds):
            for name in (names if rnd % 2 == 0 else names[::-1]):
                server = start_server(python, target, drafter if CONFIGS[name] else None, work / ("%s-%d.log" % (name, rnd)))
                try:
                    for attempt in range(BURST_TRIES):
                        figures = block(python, server, target, work / ("%s-%d-%d.json" % (name, rnd, attempt)),
                                        args.prompts)
                        if figures["decode_tok_s"] <= BURST_RATIO * figures["output_tok_s"]:
                            break
                        print("round %d %-15s a client short of CPU read a burst (decode %.1f tok/s against output "
                              "%.1f): measured again" % (rnd, name, figures["decode_tok_s"], figures["output_tok_s"]),
                              flush=True)
                finally:
                    server.stop()
                per[name].append(figures)
                rows.append(dict(figures, name=name, round=rnd))
                print("round %d %-15s decode %7.1f tok/s (median TPOT %.2f ms)  output %7.1f tok/s  acceptance %s  "
                      "%d/%d done" % (rnd, name, figures["decode_tok_s"], figures["median_tpot_ms"],
                                      figures["output_tok_s"], figures["acceptance_length"], figures["completed"],
                                      args.prompts), flush=True)
        decode = intervals.paired([f["decode_tok_s"] for f in per["no-speculation"]],
                                  [f["decode_tok_s"] for f in per["dflash-k4"]])
        output = intervals.paired([f["output_tok_s"] for f in per["no-speculation"]],
                                  [f["output_tok_s"] for f in per["dflash-k4"]])
        took = time.monotonic() - started
        print("\nDFlash K=4 over no speculation, by vllm bench serve (%d rounds, %.0f s):" % (args.rounds, took))
        for label, iv in (("decode (1000 / median TPOT)", decode), ("output tok/s", output)):
            print("  %-28s %.2fx [%s, %s]" % (label, iv["ratio"], iv.get("low"), iv.get("high")))
        ok = True
        kept = compare_interval(args.compare) if args.compare else None
        if args.compare:
            if not kept:
                print("no compare run's interval for dflash-k4 over no-speculation in %s" % args.compare)
                ok = False
            else:
                inside = kept.get("low") is not None and kept["low"] <= decode["ratio"] <= kept["high"]
                print("  the compare run's decode:   %.2fx [%s, %s] over %d rounds: the by-hand %.2fx is %s it"
                      % (kept["ratio"], kept.get("low"), kept.get("high"), kept.get("n", 0), decode["ratio"],
                         "inside" if inside else "OUTSIDE"))
                ok = inside
        if args.json:
            args.json.write_text(json.dumps({"blocks": rows, "decode": decode, "output": output, "compare": kept},
                                            indent=2))
        return 0 if ok else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
