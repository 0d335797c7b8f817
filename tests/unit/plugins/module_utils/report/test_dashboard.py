"""The fleet's Grafana dashboard: the figures the alert rules record, beside each host's thresholds. Its queries run
against a real Prometheus scraping the real engine in tests/integration/test_vllm_bench_engine.py."""

from __future__ import annotations

import json

from ansible_collections.llmops.vllm.plugins.module_utils.report import alerts, dashboard


def test_every_panel_reads_a_recorded_figure_or_an_exported_series_of_the_settings_job():
    board = dashboard.dashboard({"job": "gpu-fleet", "watchdog_job": "node"})
    json.dumps(board)   # what Grafana imports
    queries = dashboard.expressions(board, host="gpu-node-1")
    assert len({panel["id"] for panel in board["panels"]}) == len(board["panels"]) == 9
    assert all("$host" not in expr for _title, expr in queries)
    text = " ".join(expr for _title, expr in queries)
    for record in (alerts.ACCEPTANCE, alerts.POSITION_ACCEPTANCE, alerts.DECODE, alerts.TTFT_P90, alerts.QUEUE_P90,
                   alerts.MIN_ACCEPTANCE, alerts.MEASURED_ACCEPTANCE, alerts.MIN_DECODE, alerts.STOPS_PAYING):
        assert record + '{host=~"gpu-node-1"}' in text, record
    assert 'up{job="gpu-fleet", host=~"gpu-node-1"}' in text and 'job="vllm"' not in text
    assert 'vllm_restarts_total{job="node", service=~".+"}' in text
    # The host picker lists the hosts of the job's targets.
    picker = board["templating"]["list"][1]
    assert picker["name"] == "host" and picker["definition"] == 'label_values(up{job="gpu-fleet"}, host)'
