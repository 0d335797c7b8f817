"""Hostile inventory values, by class: each must be refused by the server preflight's plan before any host changes,
with the variable named. The classes come from what each consumer reads specially (module_utils/plan/values): a
newline starts a new systemd directive or logrotate directive, white space splits a systemd word, % is a systemd
specifier, $ an HAProxy variable, quotes and # end HAProxy words; the drafter role empties its directory.

The same values through the whole preflight (the real role, ansible-playbook) are in
tests/integration/test_preflight.py; the front door's are in tests/unit/plugins/module_utils/plan/test_frontend.py.
"""

from __future__ import annotations

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.plan.serve import plan, value_problems

GOOD = {
    "vllm_server_api_key": "0123456789abcdef0123456789abcdef",
    "vllm_server_metrics_token": "",
    "vllm_server_hf_token": "hf_abcdefghijklmnopqrstuvwxyz",
    "vllm_server_service_name": "vllm",
    "vllm_server_internal_address": "127.0.0.1",
    "vllm_server_internal_interface": "lo",
    "vllm_server_env": {"HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"},
    "vllm_server_unset_env": ["VLLM_CPU_KVCACHE_SPACE"],
    "vllm_server_unit_dir": "/etc/systemd/system",
    "vllm_server_config_dir": "/etc/vllm",
    "vllm_server_log_dir": "/var/log/vllm",
    "vllm_server_state_dir": "/var/lib/vllm",
    "vllm_server_cache_dir": "/var/cache/vllm",
    "vllm_server_private_dir": "/var/lib/llmops-vllm",
    "vllm_server_textfile_dir": "/var/lib/prometheus/node-exporter",
    "vllm_common_drafter_dir": "/opt/vllm/drafter",
    "vllm_common_user": "vllm",
    "vllm_common_group": "vllm",
    "vllm_server_log_rotate_size": "100M",
    "vllm_server_log_rotate_keep": 5,
    "vllm_server_log_rotate_max_age": 14,
    "vllm_server_watchdog_interval": 10,
    "vllm_server_watchdog_deadline": 10,
    "vllm_server_watchdog_failures": 3,
}

PATHS = ["vllm_server_unit_dir", "vllm_server_config_dir", "vllm_server_log_dir", "vllm_server_state_dir",
         "vllm_server_cache_dir", "vllm_server_private_dir", "vllm_server_textfile_dir", "vllm_common_drafter_dir"]
HOSTILE_PATHS = [
    "/var/log/vllm\nExecStartPre=+/bin/sh -c 'id > /tmp/pwned'",   # a new directive, run as root
    "/var/log/vllm /",                                            # ReadWritePaths widened to /
    "/var/log/%h",                                                # a systemd specifier
    "/var/log/$HOME",
    "var/log/vllm",                                               # relative
    "/var/log/vllm/",
    "/var/log/../../etc",
    "/var/log/./vllm",
    "/var/log/'vllm'",
    "/var/log/\tvllm",
    "/var/log/vl*m",
    "/var/log\\vllm",
    "/var/log/vllm:/etc",                                         # a separator BindPaths= and others read
    "/var/log/~root",
    "",
]
SECRETS = ["vllm_server_api_key", "vllm_server_api_key_previous", "vllm_server_metrics_token", "vllm_server_hf_token"]
HOSTILE_SECRETS = [
    "0123456789abcdef\n",                    # a key no client can send
    "0123456789abcdef\nExecStartPre=+/bin/true",
    "0123456789 abcdef",
    "0123456789abcdef$HOME",                 # HAProxy expands it in the health check's header
    '0123456789abcdef"',
    "0123456789abcdef#x",
    "0123456789abcdef%n",
    "short",
    12345678901234567890,
    "0123456789abcdef\x00",
    "0123456789abcdéf",
]
NAMES = ["vllm_server_service_name", "vllm_common_user", "vllm_common_group"]
HOSTILE_NAMES = ["vllm\nExecStartPre=+/bin/true", "vl lm", "../vllm", "", "-vllm", "vllm;id", "v" * 65]
OTHERS = [
    ("vllm_server_internal_address", "127.0.0.1\nExecStartPre=+/bin/true"),
    ("vllm_server_internal_address", "localhost"),
    ("vllm_server_internal_address", ""),
    ("vllm_server_internal_address", "127.0.0.1 10.0.0.1"),
    ("vllm_server_internal_interface", "eth0\nExecStartPre=+/bin/true"),
    ("vllm_server_internal_interface", "a-very-long-interface-name"),
    ("vllm_server_internal_interface", "eth/0"),
    ("vllm_server_internal_interface", ""),
    ("vllm_server_env", {"BAD NAME": "1"}),
    ("vllm_server_env", {"X\nExecStartPre": "1"}),
    ("vllm_server_env", {"1X": "1"}),
    ("vllm_server_env", {"X": "1\nExecStartPre=+/bin/true"}),
    ("vllm_server_env", {"X": ["a"]}),
    ("vllm_server_env", ["X=1"]),
    ("vllm_server_unset_env", ["VLLM_X\nExecStartPre=+/bin/true"]),
    ("vllm_server_unset_env", ["A B"]),
    ("vllm_server_unset_env", "VLLM_X"),
    ("vllm_server_log_rotate_size", "100M\n    postrotate\n        id > /tmp/pwned\n    endscript"),
    ("vllm_server_log_rotate_size", "100 M"),
    ("vllm_server_log_rotate_size", "-1"),
    ("vllm_server_log_rotate_size", "1T"),
    ("vllm_server_log_rotate_size", True),
    ("vllm_server_log_rotate_keep", 0),
    ("vllm_server_log_rotate_keep", "5\nmissingok"),
    ("vllm_server_log_rotate_max_age", -1),
    ("vllm_server_watchdog_interval", "10s"),
    ("vllm_server_watchdog_deadline", True),
    ("vllm_server_watchdog_failures", 0),
    ("vllm_common_drafter_dir", "/"),
    ("vllm_common_drafter_dir", "/etc"),
    ("vllm_common_drafter_dir", "/usr/local"),
    ("vllm_server_private_dir", "/var/lib/vllm/root-state"),   # inside the service user's own home
]

CASES = ([(name, value) for name in PATHS for value in HOSTILE_PATHS]
         + [(name, value) for name in SECRETS for value in HOSTILE_SECRETS]
         + [(name, value) for name in NAMES for value in HOSTILE_NAMES]
         + OTHERS)


def test_the_good_values_pass():
    assert value_problems(GOOD) == []


def test_the_list_is_long_enough_to_mean_something():
    assert len(CASES) >= 200


@pytest.mark.parametrize("name,value", CASES, ids=["%s=%r" % case for case in CASES])
def test_each_hostile_value_is_refused_naming_its_variable(name, value):
    found = value_problems(dict(GOOD, **{name: value}))
    assert found and all(name in problem for problem in found), found
    if name in SECRETS and isinstance(value, str) and len(value) > 5:
        assert not any(value in problem for problem in found), "the message must not echo a secret"


def test_a_key_rotated_out_needs_a_key_to_rotate_to():
    assert value_problems(dict(GOOD, vllm_server_api_key_previous="0ld-key-0123456789")) == []
    assert value_problems(dict(GOOD, vllm_server_api_key="", vllm_server_api_key_previous="0ld-key-0123456789")) == [
        "vllm_server_api_key_previous is set but vllm_server_api_key is empty: a rotation replaces one key with "
        "another; set the new key in vllm_server_api_key."]


def test_the_plan_refuses_them_before_it_builds_a_command():
    settings = {"model": "/srv/models/m", "host": "127.0.0.1", "port": 8000, "executable": "/opt/vllm/bin/vllm",
                "version": "0.20.2", "flavor": "cpu", "values": dict(GOOD, vllm_server_log_dir="/var/log/vllm /")}
    result = plan(settings, {"port_owner": {"kind": "none"}})
    assert result["argv"] == [] and any("vllm_server_log_dir" in problem for problem in result["problems"])
