"""playbooks/deploy.yml refuses an inventory with no host to deploy, or a host whose name it cannot write, before it
touches anything, and leaves the fleet report and the Prometheus targets of the last deploy as they were."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.llmops.vllm.tests.helpers.ansible_cli import run_playbook


@pytest.mark.parametrize("hosts, named", [
    # The group's name is one letter short: Ansible would run every play on no host at all.
    ("vllm_server:\n  hosts:\n    gpu-node-1:\n      ansible_connection: local\n",
     "no host in the group vllm_servers (it has: vllm_server)"),
    # A name that would end the front door's server line and the alert rules' label value.
    ('vllm_servers:\n  hosts:\n    \'gpu"node 1\':\n      ansible_connection: local\n',
     "The inventory names the host 'gpu\"node 1' in vllm_servers"),
])
def test_an_inventory_the_deploy_cannot_take_deploys_nothing_and_keeps_the_reports(
        repo_root: Path, tmp_path: Path, hosts: str, named: str):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(hosts)
    report, targets = tmp_path / "report.json", tmp_path / "targets.json"
    report.write_text('[{"host": "gpu-node-1", "status": "ready"}]\n')
    targets.write_text('[{"targets": ["gpu-node-1:8000"]}]\n')
    before = report.read_text(), targets.read_text()
    run = run_playbook(repo_root / "playbooks" / "deploy.yml", inventory=inventory,
                       extra_vars={"vllm_deploy_report_path": str(report),
                                   "vllm_deploy_prometheus_targets_path": str(targets),
                                   "vllm_deploy_speed_report_dir": str(tmp_path / "speed")}, timeout=300)
    assert run.rc != 0
    assert named in run.stdout, run.report()
    assert (report.read_text(), targets.read_text()) == before
    assert not (tmp_path / "speed").exists()
