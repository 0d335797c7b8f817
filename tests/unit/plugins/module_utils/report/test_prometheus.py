"""The fleet's Prometheus targets: one group per server, kept for the hosts this deploy did not leave serving."""

from __future__ import annotations

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.report.prometheus import entries, problems, target_of

READY = {"host": "gpu-node-1", "status": "ready", "endpoint": "http://10.0.0.11:8000", "model": "qwen3.6-27b",
         "version": "0.20.2", "speculative_method": "dflash", "drafter": "Qwen3.6-27B-DFlash"}


def test_a_ready_server_is_a_target_with_its_labels():
    assert entries([READY]) == [{"targets": ["10.0.0.11:8000"], "labels": {
        "host": "gpu-node-1", "model": "qwen3.6-27b", "vllm_version": "0.20.2", "speculative_method": "dflash",
        "drafter": "Qwen3.6-27B-DFlash"}}]


def test_without_speculative_decoding_the_method_says_none():
    plain = dict(READY, speculative_method="", drafter="")
    labels = entries([plain])[0]["labels"]
    assert labels["speculative_method"] == "none" and "drafter" not in labels   # empty labels are no labels


def test_a_host_not_left_serving_this_run_keeps_its_entry_and_order_follows_the_fleet():
    previous = [{"targets": ["10.0.0.12:8000"], "labels": {"host": "gpu-node-2", "model": "old", "vllm_version": "0.19.1"}},
                {"targets": ["10.0.0.99:8000"], "labels": {"host": "gone"}}, "junk"]
    rolled_back = {"host": "gpu-node-2", "status": "failed", "endpoint": "http://10.0.0.12:8000"}
    unreachable = {"host": "gpu-node-3", "status": "unreachable"}
    out = entries([rolled_back, READY, unreachable], previous)
    assert [entry["labels"]["host"] for entry in out] == ["gpu-node-2", "gpu-node-1"]
    assert out[0] == previous[0]


@pytest.mark.parametrize("endpoint, target", [
    ("http://gpu-node-1:8000", "gpu-node-1:8000"), ("http://[fd00::11]:8001", "[fd00::11]:8001"), ("http://10.0.0.1", "10.0.0.1:80")])
def test_targets_are_host_and_port(endpoint, target):
    assert target_of(endpoint) == target


def test_what_entries_builds_is_a_file_prometheus_reads():
    assert problems(entries([READY])) == []


@pytest.mark.parametrize("data, words", [
    ({"targets": []}, "list of target groups"),
    ([{"targets": ["a:1"], "labels": {}, "extra": 1}], "only 'targets' and 'labels'"),
    ([{"targets": ["no port"]}], "host:port"),
    ([{"targets": ["a:1"], "labels": {"1bad": "x"}}], "'1bad' is not a label name"),
    ([{"targets": ["a:1"], "labels": {"__address__": "x"}}], "'__address__' is not a label name"),
    ([{"targets": ["a:1"], "labels": {"port": 8000}}], "label port must be a string"),
])
def test_what_prometheus_would_refuse_is_named(data, words):
    found = problems(data)
    assert len(found) == 1 and words in found[0], found


def test_a_serving_groups_head_is_its_target_and_the_other_ranks_none():
    head = dict(READY, group={"name": "qwen", "rank": 0, "head": "gpu-node-1"})
    rank = dict(READY, host="gpu-node-2", group={"name": "qwen", "rank": 1, "head": "gpu-node-1"})
    previous = [{"targets": ["10.0.0.12:8000"], "labels": {"host": "gpu-node-2"}}]
    assert [entry["labels"]["host"] for entry in entries([head, rank], previous)] == ["gpu-node-1"]
