"""The fleet's alert rules as the deploy writes them, from hostvars, checked and unit tested by the distribution's
promtool: every alert with series that must fire it and series that must not (tests/fixtures/prometheus)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from ansible_collections.llmops.vllm.tests.helpers import prometheus

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "prometheus" / "alerts.test.yml"

RULES = ("{{ groups['vllm_servers'] | llmops.vllm.vllm_prometheus_rules(hostvars, settings | default({}), "
         "lookup('ansible.builtin.file', path, errors='ignore') | default('{}', true) | from_yaml) | to_nice_yaml }}")

# The two hosts of the fixture: what each one's preflight published (the second's with what the compare run of its key
# measured), and what its start this deploy measured.
HOSTS = {
    "gpu-node-1": {"vllm_server_gates": {"speculative_method": "dflash", "min_decode_tokens_per_second": 60,
                                         "min_acceptance_length": None, "baseline_tokens_per_second": 73.5,
                                         "min_speedup": 1.1},
                   "vllm_server_result": {"status": "ready", "restarted": True, "bench": {"acceptance_length": 3.2}}},
    "gpu-node-2": {"vllm_server_gates": {"speculative_method": "dflash", "min_decode_tokens_per_second": None,
                                         "min_acceptance_length": 2.5, "baseline_tokens_per_second": None,
                                         "min_speedup": None,
                                         "compare": {"name": "dflash-k15", "acceptance_length": 5.5, "stops_paying": 8}},
                   "vllm_server_result": {"status": "ready", "restarted": False, "bench": {}}},
    # A serving group's headless rank: the head's figures are the group's, so it has no threshold of its own.
    "gpu-node-3": {"vllm_server_gates": {"speculative_method": "dflash", "min_acceptance_length": 9},
                   "vllm_server_result": {"status": "ready", "group": {"rank": 1}}},
}


def write(tmp_path, hosts, settings=None):
    extra = {"path": str(tmp_path / "rules.yml")}
    if settings is not None:
        extra["settings"] = settings
    return prometheus.write_from_hostvars(tmp_path, hosts, RULES, extra)


def promtool(*args, cwd=None):
    return subprocess.run([prometheus.executable(), *args], capture_output=True, text=True, timeout=60, check=False,
                          cwd=cwd)


def test_every_alert_fires_on_its_series_and_only_there(tmp_path):
    run = write(tmp_path, HOSTS)
    assert run.rc == 0, run.report()
    checked = promtool("check", "rules", str(tmp_path / "rules.yml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    shutil.copy(FIXTURE, tmp_path / "alerts.test.yml")
    tested = promtool("test", "rules", "alerts.test.yml", cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    # Every alert the rules hold is tested there (a new alert without its promtool test fails here).
    rules = yaml.safe_load((tmp_path / "rules.yml").read_text())
    names = {rule["alert"] for group in rules["groups"] for rule in group["rules"] if "alert" in rule}
    fixture = yaml.safe_load(FIXTURE.read_text())
    tested_names = {case["alertname"] for test in fixture["tests"] for case in test["alert_rule_test"]
                    if case.get("exp_alerts")}
    assert names == tested_names, names ^ tested_names
    assert "gpu-node-3" not in (tmp_path / "rules.yml").read_text()


def test_the_next_deploy_keeps_a_host_it_did_not_reach(tmp_path):
    assert write(tmp_path, HOSTS).rc == 0
    # Not reached: no fact from its preflight, no result.
    run = write(tmp_path, {"gpu-node-1": {}, "gpu-node-2": HOSTS["gpu-node-2"]})
    assert run.rc == 0, run.report()
    shutil.copy(FIXTURE, tmp_path / "alerts.test.yml")
    tested = promtool("test", "rules", "alerts.test.yml", cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr


@pytest.mark.parametrize("settings, named", [({"window": "five minutes"}, "vllm_deploy_alerts.window")])
def test_bad_settings_write_nothing(tmp_path, settings, named):
    run = write(tmp_path, HOSTS, settings)
    assert run.rc != 0 and named in run.report()
    assert not (tmp_path / "rules.yml").exists()
