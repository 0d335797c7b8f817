"""The fleet report and front door filters: module_utils behind them, hostvars read as Ansible hands them over."""

from __future__ import annotations

from pathlib import Path

import yaml

from ansible_collections.llmops.vllm.plugins.filter.vllm_frontend import FilterModule as FrontendFilters
from ansible_collections.llmops.vllm.plugins.filter.vllm_report import FilterModule as ReportFilters

DOCS = Path(__file__).resolve().parents[4] / "plugins" / "filter"
FRONTEND = FrontendFilters().filters()
REPORT = ReportFilters().filters()


def test_filters_are_registered_with_a_doc_each():
    for name in list(FRONTEND) + list(REPORT):
        assert yaml.safe_load((DOCS / f"{name}.yml").read_text())["DOCUMENTATION"]["name"] == name


def test_the_report_tells_an_unreachable_host_from_one_that_failed_early():
    hostvars = {"a": {"vllm_deploy_reached": True, "vllm_server_result": {"status": "ready", "restarted": False}},
                "b": {"vllm_deploy_reached": True},
                "c": {}}
    report = REPORT["vllm_fleet_report"](["a", "b", "c"], hostvars)
    assert [row["status"] for row in report["hosts"]] == ["ready", "no result", "unreachable"]
    assert report["table"][3].split()[:2] == ["c", "unreachable"]


def test_a_report_without_the_deploy_note_does_not_guess():
    report = REPORT["vllm_fleet_report"](["c"], {"c": {}})
    assert report["hosts"][0]["reason"] == "unreachable, or failed before its server started"


def test_the_front_door_filters_keep_a_running_line_and_refuse_loopback_for_another_host():
    running = "backend vllm\n    server b 10.0.0.2:8000 check\n"
    listed = FRONTEND["vllm_frontend_servers"](["a", "b"], [{"name": "a", "address": "127.0.0.1", "port": 8000}], running)
    assert listed == [{"name": "a", "address": "127.0.0.1", "port": 8000}, {"name": "b", "address": "10.0.0.2", "port": 8000}]
    assert FRONTEND["vllm_frontend_problems"](listed, "a", ["a", "b"], "health") == []
    # The completion check needs the probe the vllm_server role publishes with each entry.
    assert "vllm_frontend_health_check" in FRONTEND["vllm_frontend_problems"](listed, "a", ["a", "b"])[0]
    assert FRONTEND["vllm_frontend_check"](listed, "health")["path"] == "/health"
    assert "vllm_server_public_address for a" in FRONTEND["vllm_frontend_problems"](listed, "b", ["a", "b"], "health")[0]


def test_the_rollout_stops_once_the_failed_hosts_pass_the_percentage():
    hostvars = {"a": {"vllm_deploy_failed": "out_of_memory"}, "b": {}, "c": {}, "d": {"vllm_deploy_not_rolled": "stopped"}}
    group = ["a", "b", "c", "d"]
    assert REPORT["vllm_rollout_failed"](group, hostvars) == ["a"]
    assert REPORT["vllm_rollout_stopped_by"](group, hostvars) == ["a"]          # 0 %: the first failure stops it
    assert REPORT["vllm_rollout_stopped_by"](group, hostvars, 25) == []         # 1 of 4 is not more than 25 %
    assert REPORT["vllm_rollout_stopped_by"](group, hostvars, 24.9) == ["a"]
    row = REPORT["vllm_fleet_report"](group, hostvars)["hosts"][3]
    assert (row["status"], row["reason"]) == ("not rolled", "stopped")


def test_prometheus_targets_prometheus_would_refuse_are_never_returned():
    import pytest
    from ansible.errors import AnsibleFilterError
    good = {"a": {"vllm_server_result": {"status": "ready", "endpoint": "http://10.0.0.1:8000", "model": "m"}}}
    assert REPORT["vllm_prometheus_targets"](["a"], good) == [
        {"targets": ["10.0.0.1:8000"], "labels": {"host": "a", "model": "m", "speculative_method": "none"}}]
    # An endpoint no check refused upstream (0.3.0 printed "http://0.0.0.0 --enable-lora:8000"): not written.
    bad = {"a": {"vllm_server_result": {"status": "ready", "endpoint": "http://0.0.0.0 --enable-lora:8000"}}}
    with pytest.raises(AnsibleFilterError, match="would not be a file Prometheus reads"):
        REPORT["vllm_prometheus_targets"](["a"], bad)
