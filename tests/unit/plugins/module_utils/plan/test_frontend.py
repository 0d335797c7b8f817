"""The front door's server list: fresh entries, the running lines of hosts not reached, and what is wrong."""

from __future__ import annotations

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.plan import frontend
from ansible_collections.llmops.vllm.plugins.module_utils.probe import liveness
from ansible_collections.llmops.vllm.plugins.module_utils.plan.frontend import configured, health_check, problems, servers

RUNNING = """# Ansible managed
frontend vllm_in
    bind 0.0.0.0:8080
    default_backend vllm

backend other
    server gpu-node-9 10.0.0.9:9000 check

backend vllm
    balance leastconn
    server gpu-node-1 10.0.0.1:8000 check
    server gpu-node-2 gpu-node-2.example:8001 check
    server gpu-node-3 [fd00::3]:8000 check
"""


def entry(name, address, port=8000):
    return {"name": name, "address": address, "port": port}


def served(name, address, port=8000, model="qwen3.6-27b"):
    """An entry as the vllm_server role publishes it: with its liveness probe."""
    return dict(entry(name, address, port), check=liveness.request(model))


def test_the_running_lines_of_one_backend_are_read_back():
    assert configured(RUNNING, "vllm") == {
        "gpu-node-1": entry("gpu-node-1", "10.0.0.1"),
        "gpu-node-2": entry("gpu-node-2", "gpu-node-2.example", 8001),
        "gpu-node-3": entry("gpu-node-3", "fd00::3")}
    assert configured(RUNNING, "other") == {"gpu-node-9": entry("gpu-node-9", "10.0.0.9", 9000)}
    assert configured("", "vllm") == {}


def test_a_host_not_reached_keeps_its_running_line_in_the_group_order():
    fresh = [entry("gpu-node-1", "10.0.0.11"), entry("gpu-node-3", "10.0.0.13"), entry("gpu-node-4", "10.0.0.14")]
    group = ["gpu-node-1", "gpu-node-2", "gpu-node-3", "gpu-node-4", "gpu-node-5"]
    assert servers(group, fresh, RUNNING, "vllm") == [
        entry("gpu-node-1", "10.0.0.11"), entry("gpu-node-2", "gpu-node-2.example", 8001),
        entry("gpu-node-3", "10.0.0.13"), entry("gpu-node-4", "10.0.0.14")]   # node-5: never reached, never listed


def test_without_a_group_the_fresh_entries_are_the_list():
    fresh = [entry("b", "127.0.0.1", 9001), entry("a", "127.0.0.1", 9002)]
    assert servers([], fresh, RUNNING, "vllm") == fresh


def test_a_loopback_address_for_another_inventory_host_names_the_variable():
    inventory = ["door", "gpu-node-1", "gpu-node-2"]
    found = problems([served("door", "127.0.0.1"), served("gpu-node-1", "127.0.0.1"), served("gpu-node-2", "::1"),
                      served("side", "localhost")], "door", inventory)
    assert len(found) == 2
    assert "vllm_server_public_address for gpu-node-1" in found[0] and "127.0.0.1" in found[0]
    assert "gpu-node-2" in found[1]
    # The door itself, and a server outside the inventory (on the door's own machine), may be on loopback.
    assert problems([served("door", "127.0.0.1"), served("side", "localhost")], "door", inventory) == []
    assert problems([served("gpu-node-1", "10.0.0.1"), served("gpu-node-2", "gpu-node-2")], "door", inventory) == []


def test_an_incomplete_entry_and_an_empty_list_are_refused():
    assert "lacks address, port" in problems([{"name": "gpu-node-1"}], "door")[0]
    assert "is empty" in problems([], "door")[0]


@pytest.mark.parametrize("name", ["gpu node 1", "gpu-node-1\n    server evil 10.6.6.6:80", "a#b", 'a"b', 7])
def test_a_server_name_haproxy_would_read_otherwise_is_refused(name):
    found = problems([served(name, "10.0.0.1")], "door")
    assert len(found) == 1 and found[0].startswith("vllm_frontend_servers: the server name %r" % (name,)), found


def test_the_health_check_sends_the_servers_liveness_probe():
    listed = [served("a", "10.0.0.1"), served("b", "10.0.0.2"), entry("c", "10.0.0.3")]   # c: a running line kept
    check = health_check(listed)
    assert check == liveness.request("qwen3.6-27b")
    assert check["method"] == "POST" and check["path"] == "/v1/completions"
    assert problems(listed, "door", ["door", "a", "b", "c"]) == []
    assert health_check(listed, "health") == {"method": "GET", "path": "/health", "body": ""}


def test_servers_without_a_probe_or_with_different_models_are_named():
    bare = [entry("a", "10.0.0.1"), entry("b", "10.0.0.2")]
    assert health_check(bare) is None
    (found,) = problems(bare, "door", ["door", "a", "b"])
    assert "vllm_frontend_health_check" in found and "vllm_server_backend" in found
    assert problems(bare, "door", ["door", "a", "b"], "health") == []
    mixed = [served("a", "10.0.0.1"), served("b", "10.0.0.2", model="other")]
    assert health_check(mixed) is None
    (found,) = problems(mixed, "door", ["door", "a", "b"])
    assert "vllm_server_served_model_name" in found and "a: " in found and "b: " in found


KEY = "0123456789abcdef0123"


def keyed(name, key):
    return {"name": name, "address": "10.0.0.%d" % (ord(name[-1]) % 200), "port": 8000, "key_id": frontend.key_id(key)}


def test_hosts_with_different_keys_behind_one_door_are_refused():
    found = frontend.problems([keyed("a", KEY), keyed("b", KEY + "x")], "door", ["a", "b", "door"], "health",
                              {"vllm_frontend_api_key": KEY})
    assert any("different API keys" in problem and "vllm_server_api_key" in problem for problem in found), found
    assert frontend.problems([keyed("a", KEY), keyed("b", KEY)], "door", ["a", "b", "door"], "health",
                             {"vllm_frontend_api_key": KEY}) == []
    found = frontend.problems([keyed("a", KEY)], "door", ["a", "door"], "health", {"vllm_frontend_api_key": ""})
    assert any("vllm_frontend_api_key is not the key" in problem for problem in found), found


@pytest.mark.parametrize("name,value", [
    ("vllm_frontend_api_key", "0123456789abcdef$HOME"), ("vllm_frontend_api_key", '0123456789abcdef" hdr X y'),
    ("vllm_frontend_check_interval", 2000), ("vllm_frontend_check_interval", "2"), ("vllm_frontend_timeout", "10 m"),
    ("vllm_frontend_http_request_timeout", "10s\n    timeout client 0"), ("vllm_frontend_paths", ["/v1 /tokenize"]),
    ("vllm_frontend_paths", []), ("vllm_frontend_paths", ["v1/completions"]), ("vllm_frontend_maxconn", 0),
    ("vllm_frontend_bind_address", "0.0.0.0:80 ssl"), ("vllm_frontend_backend", "vllm\n    server x 1.2.3.4:1"),
    ("vllm_frontend_tls_certificate", "/etc/ssl/a b.pem"), ("vllm_frontend_retries", -1),
])
def test_each_front_door_value_is_checked_against_its_grammar(name, value):
    found = frontend.value_problems({name: value})
    assert found and all(name in problem for problem in found), found


def test_the_front_doors_defaults_pass():
    assert frontend.value_problems({
        "vllm_frontend_api_key": "", "vllm_frontend_bind_address": "0.0.0.0", "vllm_frontend_backend": "vllm",
        "vllm_frontend_paths": ["/health", "/v1/completions"], "vllm_frontend_maxconn": 1000,
        "vllm_frontend_retries": 3, "vllm_frontend_timeout": "10m", "vllm_frontend_http_request_timeout": "10s",
        "vllm_frontend_check_timeout": "10s", "vllm_frontend_check_interval": "10s",
        "vllm_frontend_check_fast_interval": "1s", "vllm_frontend_check_down_interval": "2s",
        "vllm_frontend_tls_certificate": ""}) == []


def test_a_serving_groups_other_ranks_are_never_servers_of_the_front_door():
    # Its head serves the group's API; a rank that once served alone leaves its running line too.
    fresh = [entry("gpu-node-1", "10.0.0.11"), dict(entry("gpu-node-2", "10.0.0.12"), headless=True)]
    assert servers(["gpu-node-1", "gpu-node-2", "gpu-node-3"], fresh, RUNNING, "vllm") == [
        entry("gpu-node-1", "10.0.0.11"), entry("gpu-node-3", "fd00::3")]
    assert servers([], fresh, RUNNING, "vllm") == [entry("gpu-node-1", "10.0.0.11")]
