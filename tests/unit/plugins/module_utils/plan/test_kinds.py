"""Every option of every entry point, fed every kind of hostile value: each must be refused, naming the option, unless
the option's kind takes that kind of value (a flag takes a YAML boolean, a count an integer, a controller path a
relative one). The options are read from the roles' argument specs, so a new option without a kind fails here, and a
new option with one is fed every hostile kind without a line of this file changing.

module_utils/plan/kinds declares the kinds; the preflights apply them (vllm_common to what the inventory sets, the
server and front door plans to what they render); tests/integration/test_preflight.py runs one through Ansible.
"""

from __future__ import annotations

import pathlib

import pytest
import yaml

from ansible_collections.llmops.vllm.plugins.module_utils.plan import kinds

ROLES = pathlib.Path(__file__).resolve().parents[5] / "roles"


def _options():
    options = {}
    for spec_file in sorted(ROLES.glob("*/meta/argument_specs.yml")):
        for entry in (yaml.safe_load(spec_file.read_text())["argument_specs"] or {}).values():
            options.update((entry or {}).get("options") or {})
    return options


OPTIONS = _options()

# One value of each hostile kind, built on a path so that only the hostile part makes it wrong.
HOSTILE = {
    "newline": "/opt/vllm\nExecStartPre=+/bin/sh -c id",
    "nul": "/opt/vllm\x00",
    "line separator": "/opt/vllm\u2028x",
    "carriage return": "/opt/vllm\rx",
    "percent specifier": "/opt/%h",
    "dollar variable": "/opt/$HOME",
    "space": "/opt/vllm --enable-lora",
    "very long": "/opt/" + "a" * 100000,
    "non-ASCII": "/opt/vllé",
    "YAML bool": True,
    "YAML int": 7,
    "null": None,
    "list": ["/opt/vllm"],
    "mapping": {"a": "b"},
    "relative path": "opt/vllm",
    "system directory": "/etc",
}
# The hostile kinds each kind of value takes as valid; every other one it must refuse.
TAKES = {
    "flag": {"YAML bool"},
    "count": {"YAML int"}, "positive": {"YAML int"}, "port": {"YAML int"}, "number": {"YAML int"},
    "size": {"YAML int"},
    "controller_path": {"relative path", "system directory"},
    "model": {"relative path"},                      # org/name, a hub id
    "command": {"relative path", "system directory", "space"},
    "url_paths": {"list"}, "paths": {"list"}, "lines": {"list"}, "arguments": {"list"},
    "env": {"mapping"}, "mapping": {"mapping"},
}
# Strings no option takes anywhere inside a list or mapping.
DEEP = ("newline", "nul", "line separator", "carriage return", "very long")


def _takes(kind):
    base = kind.rstrip("?")
    return TAKES.get(base, set()) | ({"null"} if kind.endswith("?") else set())


def test_every_option_has_a_kind():
    assert sorted(set(OPTIONS) - set(kinds.KIND)) == [], "options without a kind in module_utils/plan/kinds"
    assert sorted(set(kinds.KIND) - set(OPTIONS)) == [], "kinds of options no argument spec has"
    assert {kind.rstrip("?") for kind in kinds.KIND.values()} <= set(kinds.RULES)


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_every_literal_default_fits_its_kind(name):
    default = OPTIONS[name].get("default")
    if isinstance(default, str) and "{{" in default:
        pytest.skip("a templated default is built from other options")
    if default is None and not kinds.KIND[name].endswith("?"):
        pytest.skip("required, no default")
    assert kinds.problem(name, default) is None


@pytest.mark.parametrize("hostile", sorted(HOSTILE))
@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_every_option_refuses_every_hostile_kind_it_does_not_take(name, hostile):
    found = kinds.problem(name, HOSTILE[hostile])
    if hostile in _takes(kinds.KIND[name]):
        return
    assert found is not None, "%s took a %s value" % (name, hostile)
    assert name in found


@pytest.mark.parametrize("hostile", DEEP)
@pytest.mark.parametrize("name", sorted(n for n, o in OPTIONS.items() if o.get("type") in ("list", "dict")))
def test_lists_and_mappings_refuse_hostile_text_at_any_depth(name, hostile):
    value = HOSTILE[hostile]
    wrapped = {"A": [value]} if OPTIONS[name]["type"] == "dict" else [value]
    found = kinds.problem(name, wrapped)
    assert found is not None and name in found
    if OPTIONS[name]["type"] == "dict":
        assert kinds.problem(name, {value: 1}) is not None


@pytest.mark.parametrize("name, value", [
    ("vllm_server_host", "0.0.0.0 --enable-lora"),
    ("vllm_server_host", "0.0.0.0\nExecStartPre=+/bin/sh"),
    ("vllm_server_public_address", "http://x"),
    ("vllm_server_public_address", "10.0.0.1 check\n    server evil 203.0.113.9:80"),
    ("vllm_server_device_allow", ["char-nvidia%H rw"]),
    ("vllm_server_device_allow", ["/dev/nvidia0\nExecStartPre=+/bin/sh"]),
    ("vllm_frontend_socket", "ipv4@0.0.0.0:9999"),
    ("vllm_common_user", "root"),
    ("vllm_common_drafter_dir", "/etc/alternatives"),
    ("vllm_common_drafter_dir", "/etc/ssl/certs"),
    ("vllm_common_drafter_dir", "/etc"),
    ("vllm_server_api_key", "a" * 20000),
    ("vllm_server_served_model_name", ["a", "b"]),
    ("vllm_server_wait_timeout", True),
    ("vllm_frontend_bind_address", 167772161),
    ("vllm_server_log_dir", "/" + "a" * 99999),
    ("vllm_install_index_url", "http://pypi.example/simple --trusted-host x"),
])
def test_the_audit_s_cases(name, value):
    found = kinds.problem(name, value)
    assert found is not None and found.startswith(name)


@pytest.mark.parametrize("name, value", [
    ("vllm_server_host", "::"), ("vllm_server_host", "0.0.0.0"), ("vllm_server_host", "gpu-node-1.example"),
    ("vllm_server_public_address", "vllm_fleet_1"), ("vllm_server_device_allow", ["char-nvidia*", "/dev/nvidia0 rw"]),
    ("vllm_server_model", "Qwen/Qwen3.6-27B"), ("vllm_server_model", "/srv/models/Qwen3.6-27B"),
    ("vllm_server_port", "8000"), ("vllm_server_require_api_key", "yes"), ("vllm_common_version", "0.20.2"),
    ("vllm_install_index_url", "https://download.pytorch.org/whl/cpu"), ("vllm_server_gate_min_speedup", 1.1),
    ("vllm_server_gpu_memory_command", "nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits"),
    ("vllm_install_flash_attn_wheel", "flash_attn-2.8.3-cp311-cp311-linux_x86_64.whl"),
])
def test_ordinary_values_fit(name, value):
    assert kinds.problem(name, value) is None
