"""The fleet table: every host of the group, those that never reported named as such."""

from __future__ import annotations

from ansible_collections.llmops.vllm.plugins.module_utils.report.fleet import rows, table

READY = {"status": "ready", "reason": "ready", "elapsed": 41.27, "restarted": True, "restart_reasons": ["unit changed"],
         "rolled_back": False, "drained": 3, "version": "0.32.0", "endpoint": "http://gpu-node-1:8000",
         "bench": {"decode_tokens_per_second": 181.234, "acceptance_length": 3.456}}
KEPT = {"status": "ready", "reason": "ready", "elapsed": 0.02, "restarted": False, "version": "0.32.0"}
FAILED = {"status": "failed", "reason": "out_of_memory", "elapsed": 12.0, "restarted": True, "rolled_back": True,
          "version": "0.32.0", "hint": "lower --kv-cache-memory-bytes", "bench": {}}


def test_a_row_per_host_in_the_group_order():
    report = rows(["gpu-node-1", "gpu-node-2", "gpu-node-3", "gpu-node-4"],
                  {"gpu-node-1": READY, "gpu-node-2": KEPT, "gpu-node-3": FAILED, "gpu-node-4": None})
    assert [(r["host"], r["status"], r["seconds"], r["drained"]) for r in report] == [
        ("gpu-node-1", "ready", 41.27, 3), ("gpu-node-2", "ready", 0.0, 0), ("gpu-node-3", "failed", 12.0, 0),
        ("gpu-node-4", "no result", 0.0, 0)]
    assert report[3]["reason"] == "unreachable, or failed before its server started"
    lines = table(report)
    assert lines[0].split() == ["host", "status", "reason", "vLLM", "restarted", "s", "to", "ready", "drained", "tok/s",
                                "accept", "len", "hint"]
    assert lines[1].split() == ["gpu-node-1", "ready", "0.32.0", "yes", "41.3", "3", "181.23", "3.46"]
    # Not restarted: not measured either.
    assert lines[2].split() == ["gpu-node-2", "ready", "0.32.0", "no", "-", "0", "-", "-"]
    assert (report[0]["tokens_per_second"], report[0]["acceptance_length"]) == (181.234, 3.456)
    assert lines[3].split()[:6] == ["gpu-node-3", "failed", "out_of_memory", "0.32.0", "rolled", "back"]
    assert lines[3].endswith("lower --kv-cache-memory-bytes")
    assert lines[0].index("status") == lines[1].index("ready") == lines[3].index("failed")   # fixed-width columns


def test_a_host_that_never_answered_is_named_unreachable():
    report = rows(["gpu-node-1", "gpu-node-2", "gpu-node-3"], {"gpu-node-1": READY, "gpu-node-2": None, "gpu-node-3": None},
                  reached={"gpu-node-1", "gpu-node-2"})
    assert [(r["host"], r["status"]) for r in report] == [
        ("gpu-node-1", "ready"), ("gpu-node-2", "no result"), ("gpu-node-3", "unreachable")]
    assert report[1]["reason"].startswith("failed before its server started")
    assert report[2]["reason"] == "the controller could not reach it; it was not changed"


def test_a_server_found_in_a_crash_loop_says_so_in_the_table():
    reason = "was in a crash loop (exit-code after 2 restarts, stopped by its start limit)"
    found = dict(READY, restart_reasons=["unit changed", reason])
    lines = table(rows(["gpu-node-1"], {"gpu-node-1": found}))
    assert "yes, " + reason in lines[1] and "unit changed" not in lines[1]


def test_a_serving_groups_ranks_are_named_in_the_table():
    group = dict(READY, group={"name": "qwen", "rank": 1, "head": "gpu-node-1"})
    report = rows(["gpu-node-2"], {"gpu-node-2": group})
    assert report[0]["group"] == "qwen rank 1" and table(report)[1].startswith("gpu-node-2 (qwen rank 1)  ready")
