"""A serving group's layout: the ranks and their words, and every way its hosts can disagree, named."""

from __future__ import annotations

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.plan import group, releases
from ansible_collections.llmops.vllm.plugins.module_utils.plan.serve import argv

COMMAND = ["serve", "/srv/models/Qwen3.6-27B", "--tensor-parallel-size", "2", "--speculative-config", "{}"]


def member(host, address, **changes):
    base = {"host": host, "rank": None, "address": address, "interface": "eth1", "port": 8000, "backend": "mp",
            "master_port": 29501, "devices": 1, "package": "vllm", "version": "0.33.0",
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
    ([TWO[0]], "has gpu-node-1: a group serves one model over several hosts; unset vllm_server_group"),
    ([dict(TWO[0], rank=0), TWO[1]], "group_rank is set on some hosts of group 'qwen' but not on gpu-node-2"),
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
    ([TWO[0], dict(TWO[1], devices=0)], "puts 1 rank(s) on each host, but gpu-node-2 has 0 device(s)"),
    ([dict(m, backend="ray") for m in TWO], "group_backend of group 'qwen' is 'ray'"),
    ([dict(m, master_port=8000) for m in TWO], "group_master_port of group 'qwen' is 8000, the API's own port"),
    ([dict(m, master_port="x") for m in TWO], "group_master_port of group 'qwen' must be a port number"),
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
