"""The fleet's Prometheus targets, from hostvars as the deploy has them, read by the distribution's promtool."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from ansible_collections.llmops.vllm.tests.helpers import prometheus

TARGETS = ("{{ groups['vllm_servers'] | llmops.vllm.vllm_prometheus_targets(hostvars, lookup('ansible.builtin.file', "
           "path, errors='ignore') | default('[]', true) | from_json) | to_nice_json }}\n")


def result(status, address, version="0.20.2"):
    return {"status": status, "endpoint": "http://%s:8000" % address, "model": "qwen3.6-27b", "version": version,
            "speculative_method": "dflash"}


def write(tmp_path, hosts):
    run = prometheus.write_from_hostvars(tmp_path, hosts, TARGETS, {"path": str(tmp_path / "targets.json")})
    assert run.rc == 0, run.report()
    return json.loads((tmp_path / "targets.json").read_text())


@pytest.fixture
def promtool():
    return prometheus.executable()


def discovered(_promtool, tmp_path):
    """(instance, labels but instance and job) of each target Prometheus itself finds in the file."""
    return [(labels["instance"], {k: v for k, v in labels.items() if k not in ("instance", "job")})
            for labels in prometheus.discovered(tmp_path / "targets.json", tmp_path)]


def test_prometheus_finds_every_server_with_its_labels(tmp_path, promtool):
    write(tmp_path, {
        "gpu-node-1": {"vllm_server_result": result("ready", "10.0.0.11"), "vllm_drafter_dir": "/srv/models/Qwen3.6-27B-DFlash/"},
        "gpu-node-2": {"vllm_server_result": result("ready", "10.0.0.12")},
    })
    assert discovered(promtool, tmp_path) == [
        ("10.0.0.11:8000", {"host": "gpu-node-1", "model": "qwen3.6-27b", "vllm_version": "0.20.2", "speculative_method": "dflash",
                            "drafter": "Qwen3.6-27B-DFlash"}),
        ("10.0.0.12:8000", {"host": "gpu-node-2", "model": "qwen3.6-27b", "vllm_version": "0.20.2", "speculative_method": "dflash"}),
    ]


def test_a_host_this_deploy_did_not_leave_serving_keeps_its_target(tmp_path, promtool):
    first = write(tmp_path, {"gpu-node-1": {"vllm_server_result": result("ready", "10.0.0.11")},
                             "gpu-node-2": {"vllm_server_result": result("ready", "10.0.0.12")}})
    # The next deploy: host 1 not reached (no result), host 2 moved to a new version.
    second = write(tmp_path, {"gpu-node-1": {}, "gpu-node-2": {"vllm_server_result": result("ready", "10.0.0.12", "0.22.0")}})
    assert second[0] == first[0]
    assert second[1]["labels"]["vllm_version"] == "0.22.0"
    assert [instance for instance, _labels in discovered(promtool, tmp_path)] == ["10.0.0.11:8000", "10.0.0.12:8000"]


def test_promtool_refuses_what_the_schema_check_refuses(tmp_path, promtool):
    """The unit tests' schema check agrees with Prometheus on a file it must refuse."""
    from ansible_collections.llmops.vllm.plugins.module_utils.report.prometheus import problems
    bad = [{"targets": ["10.0.0.11:8000"], "labels": {"1st": "x"}}]
    Path(tmp_path / "targets.json").write_text(json.dumps(bad))
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump({"scrape_configs": [{"job_name": "vllm", "file_sd_configs": [{"files": [str(tmp_path / "targets.json")]}]}]}))
    check = subprocess.run([promtool, "check", "config", str(config)], capture_output=True, text=True, timeout=60, check=False)
    assert check.returncode != 0 and "not a valid label name" in check.stdout + check.stderr
    assert problems(bad)
