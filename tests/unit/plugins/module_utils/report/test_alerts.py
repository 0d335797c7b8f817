"""The fleet's alert rules: each host's thresholds from its speed gate's settings, kept for hosts a deploy did not
read, and settings refused with their names. What the rules fire on is promtool's test
(tests/integration/test_prometheus_rules_promtool.py)."""

from __future__ import annotations

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.report import alerts


def server(host, reached=True, method="dflash", measured=None, compared=None, **gate):
    return {"host": host, "reached": reached, "speculative_method": method, "gate": gate,
            "measured_acceptance_length": measured, "compare": compared}


def recorded(document):
    return {rule["record"]: rule["expr"] for group in document["groups"] for rule in group["rules"] if "record" in rule}


def test_thresholds_are_the_speed_gates_own():
    # The gate's default floor for a DFlash drafter when unset; the decode floor is the higher of the minimum and
    # the baseline times the speed-up asked for (73.5 x 1.1, the MTP deployment DFlash replaces).
    assert alerts.thresholds(server("a", min_decode_tokens_per_second=60, baseline_tokens_per_second=73.5,
                                    min_speedup="1.1", measured=3.2)) == {
        alerts.MIN_ACCEPTANCE: 1.1, alerts.MEASURED_ACCEPTANCE: (3.2, alerts.BY_START),
        alerts.MIN_DECODE: pytest.approx(80.85), alerts.STOPS_PAYING: None}
    # 0 turns the acceptance gate off; n-gram has no trained drafter, so no default floor; nothing measured.
    assert alerts.thresholds(server("a", min_acceptance_length=0)) == {
        alerts.MIN_ACCEPTANCE: None, alerts.MEASURED_ACCEPTANCE: None, alerts.MIN_DECODE: None, alerts.STOPS_PAYING: None}
    assert alerts.thresholds(server("a", method="ngram"))[alerts.MIN_ACCEPTANCE] is None


def test_a_host_not_read_keeps_the_thresholds_the_file_had_and_one_measured_keeps_its_last_measure():
    first = alerts.rules([server("a", measured=3.2, min_decode_tokens_per_second=50), server("b", min_acceptance_length=2.5)])
    # The next deploy did not reach a, and started b again without measuring it (its gate off): a keeps all of its
    # thresholds, b its floor from this run.
    second = alerts.rules([server("a", reached=False), server("b", min_acceptance_length=2.0)], previous=first)
    assert alerts.previous_thresholds(second) == {
        alerts.MIN_ACCEPTANCE: {"a": 1.1, "b": 2.0}, alerts.MEASURED_ACCEPTANCE: {"a": (3.2, alerts.BY_START)},
        alerts.MIN_DECODE: {"a": 50.0}}
    assert recorded(second)[alerts.MIN_ACCEPTANCE] == (
        'label_replace(vector(1.1), "host", "a", "", "") or label_replace(vector(2), "host", "b", "", "")')
    # A file the collection did not write has no thresholds to keep.
    assert alerts.previous_thresholds({"groups": "x"}) == {} and alerts.previous_thresholds(None) == {}


def test_the_compare_runs_acceptance_comes_before_the_starts_and_says_so():
    # The compare run of the host's key measured the configuration it serves (many prompts): that is the host's
    # measured acceptance, and where speculation stopped paying is a series of its own; a compare run without an
    # acceptance figure leaves the start's.
    compared = {"name": "dflash-k15", "acceptance_length": 3.91, "stops_paying": 8}
    found = alerts.thresholds(server("a", measured=3.2, compared=compared))
    assert found[alerts.MEASURED_ACCEPTANCE] == (3.91, alerts.BY_COMPARE) and found[alerts.STOPS_PAYING] == 8
    assert alerts.thresholds(server("a", measured=3.2, compared={"acceptance_length": None}))[
        alerts.MEASURED_ACCEPTANCE] == (3.2, alerts.BY_START)
    rules = alerts.rules([server("a", measured=3.2, compared=compared)])
    assert recorded(rules)[alerts.MEASURED_ACCEPTANCE] == (
        'label_replace(label_replace(vector(3.91), "host", "a", "", ""), "measured_by", "the compare run", "", "")')
    # Kept, with what measured it, by a deploy that does not reach the host.
    assert alerts.previous_thresholds(alerts.rules([server("a", reached=False)], previous=rules)) == {
        alerts.MIN_ACCEPTANCE: {"a": 1.1}, alerts.MEASURED_ACCEPTANCE: {"a": (3.91, alerts.BY_COMPARE)},
        alerts.STOPS_PAYING: {"a": 8.0}}


def test_a_server_without_speculation_gets_no_acceptance_threshold_but_keeps_its_decode_floor():
    rules = recorded(alerts.rules([server("a", method="none", measured=3.0, min_acceptance_length=2,
                                          min_decode_tokens_per_second=40)]))
    assert alerts.MIN_ACCEPTANCE not in rules and alerts.MEASURED_ACCEPTANCE not in rules
    assert rules[alerts.MIN_DECODE] == 'label_replace(vector(40), "host", "a", "", "")'
    # Nor does one that speculated at the last deploy and no longer does: what it measured then is not kept.
    before = alerts.rules([server("a", measured=3.2)])
    assert alerts.previous_thresholds(alerts.rules([server("a", method="none")], previous=before)) == {}


def test_every_alert_is_there_with_the_jobs_and_windows_set():
    document = alerts.rules([server("a")], {"job": "gpu-fleet", "window": "2m", "watchdog_job": "node"})
    assert alerts.alert_names(document) == [
        "VllmServerDown", "VllmNotServing", "VllmLivenessFailing", "VllmRestarting", "VllmInBackoff",
        "VllmAcceptanceBelowFloor", "VllmAcceptanceBelowMeasured", "VllmAcceptanceBelowFleet",
        "VllmDecodeBelowBaseline", "VllmSlowFirstToken", "VllmQueueing", "VllmKvCacheNearFull",
        "VllmFrontDoorBackendDown"]
    exprs = " ".join(rule["expr"] for group in document["groups"] for rule in group["rules"])
    assert 'job="vllm"' not in exprs and '{job="gpu-fleet"}[2m]' in exprs and 'vllm_up{job="node"}' in exprs
    assert 'cause="backoff", job="node"' in exprs


@pytest.mark.parametrize("settings, named", [
    ({"window": "5x"}, "vllm_deploy_alerts.window must be a Prometheus duration"),
    ({"for": 10}, "vllm_deploy_alerts.for must be a Prometheus duration"),
    ({"fleet_fraction": 1.5}, "vllm_deploy_alerts.fleet_fraction must be a number over 0 and at most 1"),
    ({"ttft_p90_seconds": True}, "vllm_deploy_alerts.ttft_p90_seconds must be a number over 0"),
    ({"restarts": 0}, "vllm_deploy_alerts.restarts must be a whole number of 1 or more"),
    ({"job": 'vllm"} or vector(1) #'}, "vllm_deploy_alerts.job must be a job or backend name"),
    ({"job": ""}, "vllm_deploy_alerts.job must be a job or backend name"),
    ({"windows": "5m"}, "vllm_deploy_alerts.windows is not a setting of the alerts"),
    ("5m", "vllm_deploy_alerts must be a mapping"),
])
def test_bad_settings_are_named(settings, named):
    found = alerts.settings_problems(settings)
    assert len(found) == 1 and found[0].startswith(named), found


def test_good_settings_pass():
    assert alerts.settings_problems({"job": "vllm", "watchdog_job": "", "window": "90s", "restarts": 5,
                                     "kv_cache_usage": 0.9, "queue_p90_seconds": 2}) == []
    assert alerts.settings_problems(None) == []
