"""The speed report of a deploy: a file per measured host, a Markdown table of the fleet, a chart."""

from __future__ import annotations

import struct

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.report.bench import (
    baseline_of, chart, file_name, host_record, markdown, measured)

FAST = {"host": "gpu-node-1", "status": "ready", "reason": "ready", "version": "0.20.2", "endpoint": "http://gpu-node-1:8000",
        "bench": {"decode_tokens_per_second": 181.234, "output_tokens_per_second": {"1": 170.0, "8": 912.5},
                  "acceptance_length": 3.456, "per_position_acceptance": [0.94, 0.85, 0.667], "speedup": 2.466,
                  "baseline_tokens_per_second": 73.5, "notes": [], "runs": []}}
SLOW = {"host": "gpu-node-2", "status": "failed", "reason": "low_acceptance", "version": "0.20.2", "endpoint": "",
        "bench": {"decode_tokens_per_second": 60.0, "output_tokens_per_second": {"1": 58.0}, "acceptance_length": 1.02,
                  "per_position_acceptance": [0.02, 0.0, 0.0], "speedup": 0.816, "baseline_tokens_per_second": 73.5,
                  "notes": ["a | note"], "runs": []}}
KEPT = {"host": "gpu-node-3", "status": "ready", "reason": "ready", "version": "0.20.2", "endpoint": "", "bench": {}}


def test_only_measured_hosts_get_a_file_and_the_baseline_is_the_gates():
    assert [row["host"] for row in measured([FAST, SLOW, KEPT])] == ["gpu-node-1", "gpu-node-2"]
    assert baseline_of([KEPT, FAST]) == 73.5 and baseline_of([KEPT]) is None
    record = host_record(FAST, "20261201T180000Z")
    assert record["run"] == "20261201T180000Z" and record["bench"]["acceptance_length"] == 3.456


def test_the_markdown_table_has_every_host_with_its_figures():
    text = markdown([FAST, SLOW, KEPT], "20261201T180000Z", 73.5)
    lines = text.splitlines()
    assert lines[0] == "# Speed report 20261201T180000Z"
    header = next(line for line in lines if line.startswith("| host"))
    assert header == ("| host | status | decode tok/s (1 stream) | speed-up over 73.5 tok/s | aggregate tok/s at 8 | "
                      "acceptance length | per-position acceptance | notes |")
    rows = [line for line in lines if line.startswith("| gpu-node")]
    assert rows[0] == "| gpu-node-1 | ready | 181.23 | 2.47x | 912.50 | 3.46 | 94% / 85% / 67% |  |"
    assert rows[1].startswith("| gpu-node-2 | failed (low_acceptance) | 60.00 | 0.82x | - | 1.02 | 2% / 0% / 0% | a \\| note |")
    assert rows[2].startswith("| gpu-node-3 | ready | not measured (not restarted by this deploy) |")
    assert all(row.count(" | ") == header.count(" | ") for row in rows)


def test_the_speed_up_carries_the_gate_s_interval_when_it_had_one():
    sure = dict(FAST, bench=dict(FAST["bench"], speedup_interval={"ratio": 2.466, "low": 2.31, "high": 2.634, "n": 3}))
    row = next(line for line in markdown([sure], "r", 73.5).splitlines() if line.startswith("| gpu-node-1"))
    assert "| 2.47x [2.31, 2.63] |" in row


def test_without_a_baseline_there_is_no_speed_up_column():
    assert "speed-up" not in markdown([FAST], "r")


def test_the_chart_is_a_png(tmp_path):
    path = tmp_path / "report.png"
    assert chart([FAST, SLOW, KEPT], "20261201T180000Z", str(path), 73.5) is None
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1100, 420)


def test_a_chart_without_speculative_figures_still_draws(tmp_path):
    plain = dict(FAST, bench=dict(FAST["bench"], per_position_acceptance=[], acceptance_length=None))
    assert chart([plain], "r", str(tmp_path / "report.png")) is None
    assert (tmp_path / "report.png").stat().st_size > 1000


@pytest.mark.parametrize("host,name", [("gpu-node-1", "gpu-node-1"), ("../../etc/cron.d/x", "_.._.._etc_cron.d_x"),
                                       ("..", "_.."), ("", "_"), ("a b/c", "a_b_c"), ("2001:db8::1", "2001_db8__1")])
def test_a_host_name_makes_a_file_name_that_stays_in_its_directory(host, name):
    assert file_name(host) == name and "/" not in file_name(host)


def test_a_host_measured_on_a_prompt_set_gets_a_row_per_category_and_the_overall():
    from ansible_collections.llmops.vllm.plugins.module_utils.probe import workload
    from ansible_collections.llmops.vllm.plugins.module_utils.probe.speed import figures

    def run(category, repeat, decode, accepted):
        return {"category": category, "concurrency": 1, "repeat": repeat, "other_requests": 0,
                "client": {"decode_tokens_per_second": decode, "output_tokens_per_second": decode * 0.9,
                           "median_ttft_ms": 21.0, "median_itl_ms": 4.0, "completed": 4, "failed": 0},
                "speculative": {"drafts": 10, "draft_tokens": 40, "accepted_tokens": accepted,
                                "acceptance_length": 1 + accepted / 10, "per_position_acceptance": [0.9, 0.6, 0.3, 0.1]}}
    runs = [run("code", 0, 200.0, 19), run("code", 1, 220.0, 19), run("chat", 0, 90.0, 4)]
    summary = workload.summarise(runs, {"code": 0.5, "chat": 0.5})
    bench = figures(dict(summary, status="passed", runs=runs, workload="builtin", decode_tokens_per_second=150.0,
                         acceptance_length=summary["overall"]["1"]["acceptance_length"], notes=[]))
    # What the deploy keeps: the overall figures at the top, the categories beside them.
    assert bench["workload"] == "builtin" and bench["output_tokens_per_second"] == {"1": 135.0}
    assert bench["per_position_acceptance"] == [0.9, 0.6, 0.3, 0.1]
    text = markdown([dict(FAST, bench=bench)], "r")
    assert "## gpu-node-1 by category (builtin)" in text
    lines = text.splitlines()
    assert "| code | 210.00 (200.00-220.00) | 189.00 (180.00-198.00) | 21.0 | 4.0 | 2.90 | 90% / 60% / 30% / 10% |" in lines
    assert "| chat | 90.00 | 81.00 | 21.0 | 4.0 | 1.40 | 90% / 60% / 30% / 10% |" in lines
    assert any(line.startswith("| overall | 150.00 | 135.00 |") for line in lines)
    # The fixed workload has no such section.
    assert "by category" not in markdown([FAST], "r")
