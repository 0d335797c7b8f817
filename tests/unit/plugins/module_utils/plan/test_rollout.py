"""The roll's decisions, case by case: restart or not and why, check again or not, the record, the message."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.llmops.vllm.plugins.module_utils.plan import rollout

ROLE = Path(__file__).resolve().parents[5] / "roles" / "vllm_server"

PARTS = {"unit": "u1", "env file": "e1", "drafter or model files": "d1", "virtualenv": "v1"}
ACTIVE = {"ActiveState": "active", "Result": "success", "NRestarts": "0"}


def inputs(running="D1", digest="D1", **parts):
    return {"digest": digest, "parts": dict(PARTS, **parts), "running_digest": running}


HISTORY = {"D1": PARTS}


@pytest.mark.parametrize("status, found, history, reasons", [
    (ACTIVE, inputs(), HISTORY, []),
    # A run that installed a new drafter config and died before the restart: the digests still differ.
    (ACTIVE, inputs(digest="D2", **{"drafter or model files": "d2"}), HISTORY, ["drafter or model files changed"]),
    (ACTIVE, inputs(digest="D2", unit="u2", virtualenv="v2"), HISTORY, ["unit changed", "virtualenv changed"]),
    (ACTIVE, inputs(digest="D2", **{"env file": "e2"}), HISTORY, ["env file changed"]),
    # The running digest's parts were not recorded (the record was lost): the reason is still there, unnamed.
    (ACTIVE, inputs(digest="D2"), {}, ["its inputs changed since it started"]),
    (ACTIVE, inputs(running=""), HISTORY,
     ["its inputs are not known (started by hand or by a release that did not record them)"]),
    ({"ActiveState": "inactive"}, inputs(running=""), HISTORY, ["not running"]),
    ({"ActiveState": "activating"}, inputs(), HISTORY, ["not running"]),
    ({}, {}, None, ["not running"]),
    ({"ActiveState": "failed", "Result": "exit-code", "NRestarts": "3"}, inputs(running=""), HISTORY,
     ["was in a crash loop (exit-code after 3 restarts, stopped by its start limit)"]),
    ({"ActiveState": "failed", "Result": "exit-code", "NRestarts": "0"}, inputs(running=""), HISTORY,
     ["was failed (exit-code)"]),
    ({"ActiveState": "reloading"}, inputs(), HISTORY, []),
])
def test_restart_reasons(status, found, history, reasons):
    assert rollout.restart_reasons(status, found, history) == reasons


def test_a_failed_server_is_named_with_the_reason_from_its_log():
    why = {"reason": "config_error", "root_cause_line": "x" * 200}
    text = rollout.failed_reason({"Result": "exit-code", "NRestarts": 2}, why)
    assert text.startswith("was in a crash loop (exit-code after 2 restarts, stopped by its start limit): config_error, x")
    assert text.endswith("...") and len(text.rsplit(", ", 1)[1]) == 160


def test_check_mode_previews_come_first_and_are_not_repeated():
    reasons = rollout.restart_reasons(ACTIVE, inputs(digest="D2", unit="u2"), HISTORY, previews=["unit changed"])
    assert reasons == ["unit changed"]
    assert rollout.restart_reasons(ACTIVE, inputs(), HISTORY, previews=["drafter or model files changed"]) == [
        "drafter or model files changed"]


@pytest.mark.parametrize("found, checked, check_mode, decision", [
    (inputs(), "", False, {"restart": False, "reasons": [], "check": False, "checks": False}),
    # Staging checked these very inputs: no second check before the start.
    (inputs(digest="D2", unit="u2"), "D2\n", False, {"restart": True, "reasons": ["unit changed"], "check": False, "checks": True}),
    # The drafter config changed after staging's check: check again.
    (inputs(digest="D3", unit="u2"), "D2", False, {"restart": True, "reasons": ["unit changed"], "check": True, "checks": True}),
    (inputs(digest="D2", unit="u2"), "D2", True, {"restart": True, "reasons": ["unit changed"], "check": True, "checks": True}),
])
def test_plan(found, checked, check_mode, decision):
    assert rollout.plan(ACTIVE, found, HISTORY, checked, check_mode=check_mode) == decision


def test_a_server_no_start_of_whose_inputs_passed_its_checks_is_checked_again_without_a_restart():
    # A run stopped between the start and the last-good record: the server runs the host's inputs, and the last
    # start that passed its checks had others (or there is none).
    for confirmed in ("D0", ""):
        decision = rollout.plan(ACTIVE, dict(inputs(), confirmed=confirmed), HISTORY, "D1")
        assert decision == {"restart": False, "reasons": [rollout.UNCHECKED], "check": False, "checks": True}
        # It rolls in a batch, never with the hosts confirmed all at once.
        assert rollout.stage_restarts(ACTIVE, dict(inputs(), staged_digest="D1", confirmed=confirmed)) is True
    assert rollout.plan(ACTIVE, dict(inputs(), confirmed="D1"), HISTORY, "D1")["checks"] is False
    assert rollout.stage_restarts(ACTIVE, dict(inputs(), staged_digest="D1", confirmed="D1")) is False
    # A restart takes the checks anyway, with its own reasons.
    decision = rollout.plan(ACTIVE, dict(inputs(digest="D2", unit="u2"), confirmed="D0"), HISTORY, "D2")
    assert decision["reasons"] == ["unit changed"] and decision["checks"]


@pytest.mark.parametrize("status, found, check_mode, check", [
    (ACTIVE, inputs(), False, False),
    (ACTIVE, inputs(digest="D2"), False, True),
    (ACTIVE, inputs(running=""), False, True),
    ({"ActiveState": "failed"}, inputs(), False, True),
    (ACTIVE, inputs(), True, True),
])
def test_stage_check(status, found, check_mode, check):
    assert rollout.stage_check(status, found, check_mode) is check


@pytest.mark.parametrize("status, found, check_mode, restarts", [
    # The staged identity (the drafter config and links the roll installs) is what the running server loaded.
    (ACTIVE, dict(inputs(), staged_digest="D1"), False, False),
    # Only the drafter changes: the digest of the live files still equals the running one, the staged one does not.
    (ACTIVE, dict(inputs(), staged_digest="D2"), False, True),
    # Without a staged digest, the live files' digest stands for it.
    (ACTIVE, inputs(), False, False),
    (ACTIVE, inputs(digest="D2"), False, True),
    (ACTIVE, dict(inputs(running=""), staged_digest="D1"), False, True),
    ({"ActiveState": "failed"}, dict(inputs(), staged_digest="D1"), False, True),
    ({"ActiveState": "inactive"}, dict(inputs(), staged_digest="D1"), False, True),
    # Check mode starts nothing.
    (ACTIVE, dict(inputs(), staged_digest="D2"), True, False),
])
def test_stage_restarts(status, found, check_mode, restarts):
    assert rollout.stage_restarts(status, found, check_mode) is restarts


FACTS = {"endpoint": "http://h:8000", "version": "0.32.0", "model": "tiny", "speculative_method": "dflash", "drained": "2",
         "bench": {"decode_tokens_per_second": 10.0}, "elapsed": "41.27", "check_mode": False}


def test_the_record_of_a_start():
    wait = {"status": "ready", "reason": "ready", "elapsed": 40.0, "phases": {"load": 30}, "pid": "123"}
    record = rollout.result(wait, {"restart": True, "reasons": ["unit changed"]}, FACTS)
    assert record == {"status": "ready", "reason": "ready", "elapsed": 41.27, "phases": {"load": 30}, "pid": 123,
                      "restarted": True, "restart_reasons": ["unit changed"], "rolled_back": False,
                      "endpoint": "http://h:8000", "drained": 2, "version": "0.32.0", "model": "tiny",
                      "speculative_method": "dflash", "bench": {"decode_tokens_per_second": 10.0}}


def test_the_record_of_a_confirmation_and_of_check_mode():
    check = {"status": "ready", "reason": "ready", "elapsed": 0.02, "pid": 7}
    kept = rollout.result(check, {"restart": False, "reasons": []}, dict(FACTS, elapsed="None"))
    assert (kept["restarted"], kept["elapsed"], kept["pid"]) == (False, 0.02, 7)
    planned = rollout.result({}, {"restart": True, "reasons": ["unit changed"]}, dict(FACTS, check_mode="True"))
    assert (planned["status"], planned["restarted"], planned["restart_reasons"]) == ("check mode", False, ["unit changed"])


def test_the_record_of_a_failure():
    failure = {"status": "failed", "reason": "out_of_memory", "elapsed": 12.0, "phases": {}, "hint": "lower it",
               "bench": {}, "refused": "False", "rolled_back": True}
    record = rollout.result({}, {"restart": True, "reasons": ["unit changed"]}, FACTS, failure)
    assert record == {"status": "failed", "reason": "out_of_memory", "elapsed": 12.0, "phases": {}, "pid": 0,
                      "restarted": True, "restart_reasons": ["unit changed"], "rolled_back": True,
                      "endpoint": "http://h:8000", "drained": 2, "version": "0.32.0", "hint": "lower it", "bench": {}}
    refused = rollout.result({}, {"restart": True, "reasons": []}, FACTS, dict(failure, refused=True, rolled_back="False"))
    assert (refused["restarted"], refused["rolled_back"]) == (False, False)
    # A serving group's rank says which group and rank failed, as it does when it starts.
    rank = {"name": "qwen", "rank": 1, "head": "gpu-node-1"}
    assert rollout.result({}, {"restart": True}, dict(FACTS, group=rank), failure)["group"] == rank


FAILURE = {"reason": "config_error", "detail": "vLLM refused it", "root_cause_line": "", "hint": ""}


@pytest.mark.parametrize("restored, refused, wait, tail", [
    (["/etc/vllm/vllm.env"], True, None,
     "Refused before any restart by the vLLM of /opt/v: put back the previous /etc/vllm/vllm.env; vllm was not restarted."),
    ([], True, None, "Refused before any restart by the vLLM of /opt/v; vllm was not restarted."),
    ([], False, None, "vllm was stopped: there was no previous unit, env file or drafter config to go back to."),
    (["/u", "/e"], False, {"status": "ready"}, "Rolled back to the previous /u, /e; the previous server is ready again."),
    (["/u"], False, {"status": "failed", "reason": "out_of_memory", "detail": "no room"},
     "Rolled back to the previous /u, but the previous server is not ready either: out_of_memory: no room."),
])
def test_failure_message(restored, refused, wait, tail):
    message = rollout.failure_message(FAILURE, "vllm", "/opt/v", restored, refused, wait)
    assert message == "config_error: vLLM refused it | root cause: not found in the log | hint: none | " + tail


def test_a_failure_without_detail_reads_as_its_reason_alone():
    rank = {"reason": "Rank gpu-node-2 of the group did not come up (config_error: bad core list).", "detail": ""}
    assert rollout.failure_message(rank, "vllm", "/opt/v", [], False).startswith(
        "Rank gpu-node-2 of the group did not come up (config_error: bad core list). | root cause: not found in the log")


def test_batches_confirm_only_the_hosts_known_not_to_restart():
    restarts = {"a": False, "b": True, "c": None, "d": False}
    assert rollout.batches(["a", "b", "c", "d", "e"], restarts) == {
        "confirm": ["a", "d"], "roll": ["b", "c", "e"], "serial": [1]}
    assert rollout.batches([], {}, serial="50%") == {"confirm": [], "roll": [], "serial": ["50%"]}


@pytest.mark.parametrize("serial, sizes", [(1, [2, 1, 1]), (2, [3, 1]), ("50%", [2, 1, 1]), ("67%", [3, 1]), ("100%", [4])])
def test_a_serving_group_rolls_as_one_unit_in_one_batch(serial, sizes):
    groups = {"a": "qwen", "c": "qwen"}
    found = rollout.batches(["a", "b", "c", "d"], {}, groups, serial)
    assert found["roll"] == ["a", "c", "b", "d"] and found["serial"] == sizes


def test_a_serving_group_is_confirmed_only_all_together():
    found = rollout.batches(["a", "b", "c"], {"a": False, "b": False, "c": True}, {"a": "qwen", "c": "qwen"})
    assert found["confirm"] == ["b"] and found["roll"] == ["a", "c"] and found["serial"] == [2]


def test_a_changed_part_is_worded_once_for_check_mode_and_for_the_host_s_digests():
    assert rollout.changed({"virtualenv": True, "unit": "True", "env file": False}) == ["unit changed", "virtualenv changed"]
    with pytest.raises(ValueError, match="not a part of the server's inputs: drafter"):
        rollout.changed({"drafter": True})
    # The role's inputs are made of exactly these parts, so a reason names what the digest found.
    parts = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["_vllm_server_input_parts"]
    assert tuple(parts) == rollout.PARTS


def test_host_names_are_refused_where_the_deploy_could_not_write_them():
    # Names HAProxy takes as server names, and so the targets and the rules: a DNS name, an address, an IPv6 one.
    assert rollout.host_name_problems(["gpu-node-1", "10.0.0.12", "fd00::12", "gpu_node.dc1"], "vllm_servers") == []
    # A quote ends the rules' label value; a space or '#' ends the front door's server line.
    (problem,) = rollout.host_name_problems(["ok", 'gpu"node', "gpu node", "gpu#1", ""], "vllm_frontends")
    assert problem.startswith("The inventory names the hosts 'gpu\"node', 'gpu node', 'gpu#1', '' in vllm_frontends")
