"""A serving group's layout: the ranks and their words, and every way its hosts can disagree, named."""

from __future__ import annotations

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.plan import group, releases
from ansible_collections.llmops.vllm.plugins.module_utils.plan.serve import argv

COMMAND = ["serve", "/srv/models/Qwen3.6-27B", "--tensor-parallel-size", "2", "--speculative-config", "{}"]


def member(host, address, **changes):
    base = {"host": host, "rank": None, "address": address, "interface": "eth1", "port": 8000, "backend": "mp",
            "master_port": 29501, "package": "vllm", "version": "0.33.0", "key_id": "k1",
            "model": "/srv/models/Qwen3.6-27B", "model_digest": "m1", "drafter_digest": "d1", "command": COMMAND,
            "tensor_parallel_size": 2, "pipeline_parallel_size": 1}
    return dict(base, **changes)


TWO = [member("gpu-node-1", "10.0.0.11"), member("gpu-node-2", "10.0.0.12")]


def test_two_hosts_of_one_gpu_each_form_one_engine_at_tensor_parallel_2():
    found = group.layout("qwen", TWO)
    assert found["problems"] == [] and found["head"] == "gpu-node-1"
    assert found["ranks"]["gpu-node-1"] == {"rank": 0, "head": True, "words": [
        "--nnodes", "2", "--node-rank", "0", "--master-addr", "10.0.0.11", "--master-port", "29501",
        "--distributed-executor-backend", "mp"]}
    assert found["ranks"]["gpu-node-2"]["words"][3] == "1" and found["ranks"]["gpu-node-2"]["words"][-1] == "--headless"


def test_given_ranks_choose_the_head():
    found = group.layout("qwen", [dict(TWO[0], rank=1), dict(TWO[1], rank="0")])
    assert found["head"] == "gpu-node-2" and found["ranks"]["gpu-node-1"]["words"][5] == "10.0.0.12"


@pytest.mark.parametrize("members, said", [
    ([TWO[0]], "has gpu-node-1: a group serves one model over several hosts; unset vllm_server_serving_group"),
    ([dict(TWO[0], rank=0), TWO[1]], "serving_group_rank is set on some hosts of group 'qwen' but not on gpu-node-2"),
    ([dict(TWO[0], rank=0), dict(TWO[1], rank=0)], "must number its 2 hosts 0 to 1, each once"),
    ([TWO[0], dict(TWO[1], version="0.34.0")],
     "disagree on vllm_common_version (gpu-node-1: 0.33.0, gpu-node-2: 0.34.0)"),
    ([TWO[0], dict(TWO[1], model_digest="m2")], "disagree on the model's files"),
    ([TWO[0], dict(TWO[1], drafter_digest="d2")], "disagree on the drafter's files"),
    ([TWO[0], dict(TWO[1], command=COMMAND + ["--seed", "7"])], "disagree on the serve command"),
    ([TWO[0], dict(TWO[1], address="127.0.0.1")], "internal_address of gpu-node-2 is 127.0.0.1"),
    ([TWO[0], dict(TWO[1], address="10.0.0.11")], "gpu-node-1 and gpu-node-2 of group 'qwen' both name 10.0.0.11"),
    ([TWO[0], dict(TWO[1], interface="lo")], "internal_interface of gpu-node-2 is 'lo'"),
    ([dict(m, tensor_parallel_size=3) for m in TWO], "3 x pipeline parallel 1 = 3 ranks over 2 hosts"),
    ([TWO[0], dict(TWO[1], key_id="k2")], "disagree on vllm_server_api_key"),
    ([TWO[0], dict(TWO[1], interface_addresses=False)], "internal_interface of gpu-node-2 is 'eth1', which that host does not have"),
    ([TWO[0], dict(TWO[1], interface_addresses=["10.0.0.99"])], "10.0.0.12, which is not an address of its interface eth1 (10.0.0.99)"),
    ([dict(m, backend="ray") for m in TWO], "serving_group_backend of group 'qwen' is 'ray'"),
    ([dict(m, master_port=8000) for m in TWO], "serving_group_master_port of group 'qwen' is 8000, the API's own port"),
    ([dict(m, master_port="x") for m in TWO], "serving_group_master_port of group 'qwen' must be a port number"),
])
def test_a_group_that_cannot_form_is_named_before_any_change(members, said):
    problems = group.layout("qwen", members)["problems"]
    assert any(said in p for p in problems), problems


def test_every_rank_shares_the_command_but_where_the_api_binds():
    head = argv({"model": "m", "flavor": "cpu", "host": "10.0.0.11", "port": 8000, "tensor_parallel_size": 2})
    worker = argv({"model": "m", "flavor": "cpu", "host": "10.0.0.12", "port": 8000, "tensor_parallel_size": 2})
    assert group.shared_words(head) == group.shared_words(worker) == ["serve", "m", "--tensor-parallel-size", "2"]


@pytest.mark.parametrize("data", releases.ALL, ids=lambda d: "%s-%s" % (d["package"], d["release"]))
def test_every_release_taken_in_has_the_rank_words(data):
    words = group.layout("qwen", TWO)["ranks"]["gpu-node-2"]["words"]
    assert set(word for word in words if word.startswith("--")) <= set(data["flags"])


def test_a_read_interface_that_holds_the_address_passes():
    assert group.layout("qwen", [dict(TWO[0], interface_addresses=["10.0.0.11", "fe80::1"]), TWO[1]])["problems"] == []


HOSTS = ["gpu-node-1", "gpu-node-2"]
MEMBERS = dict((m["host"], dict(m, api_host="0.0.0.0", api_address=m["address"])) for m in TWO)


def test_each_host_reads_its_rank_and_where_the_group_serves():
    head = group.plan_for("gpu-node-1", "qwen", HOSTS, MEMBERS)
    worker = group.plan_for("gpu-node-2", "qwen", HOSTS, MEMBERS)
    assert head["problems"] == [] and head["head"] and not head["headless"] and "--headless" not in head["words"]
    assert worker["headless"] and worker["rank"] == 1 and worker["words"][-1] == "--headless"
    assert worker["head_host"] == "gpu-node-1" and worker["head_url"] == "http://10.0.0.11:8000"


def test_a_host_not_checked_keeps_the_whole_group_from_changing():
    found = group.plan_for("gpu-node-1", "qwen", HOSTS, {"gpu-node-1": MEMBERS["gpu-node-1"]})
    assert found["words"] == [] and "gpu-node-2 did not answer or was left out of this run" in found["problems"][0]


def test_a_head_on_loopback_is_refused_the_others_watch_through_it():
    members = dict(MEMBERS, **{"gpu-node-1": dict(MEMBERS["gpu-node-1"], api_host="127.0.0.1")})
    assert "must listen beyond loopback" in group.plan_for("gpu-node-2", "qwen", HOSTS, members)["problems"][0]


@pytest.mark.parametrize("given, expected", [
    ({}, {"a": 0, "b": 1}), ({"a": 1, "b": "0"}, {"a": 1, "b": 0}), ({"a": 0}, {"a": None, "b": None})])
def test_the_rank_from_the_inventory_alone(given, expected):
    assert dict((h, group.rank_of(h, ["a", "b"], given)) for h in "ab") == expected


def test_same_files_on_two_hosts_fingerprint_alike_whenever_each_copied_them():
    read = {"config": {"num_hidden_layers": 2}, "manifest": [["config.json", 820, 1], ["model.safetensors", 9, 2]]}
    later = dict(read, manifest=[["config.json", 820, 7], ["model.safetensors", 9, 8]])
    assert group.fingerprint(read) == group.fingerprint(later)
    assert group.fingerprint(read) != group.fingerprint(dict(read, manifest=[["config.json", 821, 1]]))
    assert group.fingerprint({"failed": True}) is None and group.fingerprint({"skipped": True}) is None


def test_one_rank_starting_again_starts_the_group():
    stay = {"restart": False, "checks": False, "check": False, "reasons": []}
    found = group.start_together(stay, {"gpu-node-1": {"restart": True}})
    assert found["restart"] and found["checks"] and found["reasons"] == ["the group's gpu-node-1 starts again"]
    assert group.start_together(stay, {"gpu-node-1": {"restart": False}, "gpu-node-3": None}) == stay


def test_a_rank_that_did_not_come_up_is_named_with_its_own_reason():
    found = group.failures({"gpu-node-2": {"status": "failed", "reason": "engine_died", "detail": "Worker proc died"},
                            "gpu-node-3": {"status": "ready"}, "gpu-node-4": None,
                            # Its slice ran out while it waited for the rank that failed: still starting, not named.
                            "gpu-node-5": {"status": "timeout", "msg": "not ready after 20 s"}})
    assert found == ["Rank gpu-node-2 of the group did not come up (engine_died: Worker proc died)."]


STARTING = {"status": "timeout", "reason": "timeout", "msg": "not ready within 20 s"}
READY = {"status": "ready"}
DIED = {"status": "failed", "reason": "missing_module", "detail": "No module named 'flash_attn.ops'"}


@pytest.mark.parametrize("waits, active, done, state", [
    # The head at the rendezvous (its slice ran out) while its headless rank died at import: failed after one round.
    ({"head": STARTING, "rank": DIED}, ["head", "rank"], 1, "failed"),
    ({"head": STARTING, "rank": STARTING}, ["head", "rank"], 1, "waiting"),
    ({"head": READY, "rank": STARTING}, ["head", "rank"], 44, "waiting"),
    ({"head": READY, "rank": READY}, ["head", "rank"], 45, "ready"),
    ({"head": READY, "rank": STARTING}, ["head", "rank"], 45, "failed"),
    # A rank that left the run (unreachable) cannot come up: nobody waits for it.
    ({"head": STARTING, "rank": STARTING}, ["head"], 1, "failed"),
    # No result at all is never ready: it is waited for until the rounds run out.
    ({"head": READY, "rank": None}, ["head", "rank"], 1, "waiting"),
])
def test_a_group_start_ends_at_the_round_a_rank_fails_or_every_rank_is_ready(waits, active, done, state):
    assert group.wait_round(waits, active, done, 45)["state"] == state


def test_a_group_start_names_each_rank_that_keeps_it_from_serving():
    assert group.wait_round({"head": STARTING, "rank": DIED}, ["head", "rank"], 1, 45)["problems"] == [
        "Rank rank of the group did not come up (missing_module: No module named 'flash_attn.ops')."]
    assert group.wait_round({"head": STARTING, "rank": STARTING}, ["head"], 1, 45)["problems"] == [
        "Rank rank of the group left the run (unreachable, or a task failed there) before the group came up."]
    assert group.wait_round({"head": STARTING, "rank": DIED}, ["head"], 1, 45)["problems"] == [
        "Rank rank of the group did not come up (missing_module: No module named 'flash_attn.ops')."]
    assert group.wait_round({"head": READY, "rank": None}, ["head", "rank"], 45, 45)["problems"] == [
        "Rank rank of the group was still starting after 45 slices of vllm_wait (vllm_server_wait_timeout)."]


def test_an_operation_on_part_of_a_group_is_refused_and_on_all_of_it_allowed():
    groups = {"a": "qwen", "b": "qwen", "c": ""}
    assert group.split_groups(["a", "c"], groups) == [
        "a is a rank(s) of the serving group 'qwen' without b: its other ranks cannot serve without them; choose all "
        "its hosts (a, b), or first deploy them without vllm_server_serving_group."]
    assert group.split_groups(["a", "b"], groups) == [] and group.split_groups(["c"], groups) == []


@pytest.mark.parametrize("reached, refused", [(None, False), ("refused", False), ("open", False),
                                              ("unreachable: timed out", True)])
def test_a_master_port_the_other_ranks_cannot_reach_is_refused(reached, refused):
    problems = group.plan_for("gpu-node-2", "qwen", HOSTS, MEMBERS, reached)["problems"]
    assert bool(problems) == refused, problems
    assert not refused or problems == [
        "From gpu-node-2, the head of group 'qwen' (10.0.0.11, vllm_server_serving_group_master_port 29501) is "
        "unreachable: timed out: the ranks meet there when the group starts, and it would never form; open the port "
        "between the group's hosts."]


def test_an_operation_that_starts_hosts_one_at_a_time_refuses_any_rank_of_a_group():
    groups = {"a": "qwen", "b": "qwen", "c": ""}
    assert group.split_groups(["a", "b"], groups, one_at_a_time=True) == [
        "a, b are rank(s) of the serving group 'qwen', whose ranks start only together, and this operation starts its "
        "hosts one at a time: deploy the group's previous settings instead."]
    assert group.split_groups(["c"], groups, one_at_a_time=True) == []
