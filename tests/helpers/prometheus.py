"""The distribution's Prometheus (LLMOPS_PROMTOOL and the server beside it, unpacked by scripts/bootstrap.sh): what it
finds in a deploy's targets file (promtool checks the config that names it, then runs its file-based discovery), and
a server that scrapes a real engine, its front door and node_exporter, and evaluates the fleet's rules. Used by the integration tests and by both
scenarios' verify (which put this folder on sys.path: they run outside the suite's collection farm)."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import yaml


def write_from_hostvars(tmp_path: Path, hosts: dict, content: str, extra_vars: dict):
    """Run, on the controller, one copy task writing ``content`` (a template of ``groups``, ``hostvars`` and
    ``extra_vars``) to ``extra_vars["path"]``, over an inventory of ``hosts`` in vllm_servers, as the deploy's last play
    writes the targets and the rules. Returns the run."""
    from ansible_collections.llmops.vllm.tests.helpers.ansible_cli import run_playbook   # the suite's farm only
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"vllm_servers": {"hosts": hosts}},
                                                 "hosts": {"localhost": {"ansible_connection": "local"}}}}))
    play = [{"name": "Write the file", "hosts": "localhost", "gather_facts": False,
             "tasks": [{"name": "Write it", "ansible.builtin.copy": {"content": content, "dest": "{{ path }}",
                                                                     "mode": "0644"}}]}]
    return run_playbook(play, inventory=inventory, extra_vars=extra_vars)


def executable() -> str:
    """The distribution's promtool, unpacked by scripts/bootstrap.sh."""
    promtool = os.environ.get("LLMOPS_PROMTOOL", "")
    assert os.access(promtool, os.X_OK), "LLMOPS_PROMTOOL is not promtool: run the suite with scripts/test.sh"
    return promtool


def discovered(targets: Path, work: Path) -> list[dict]:
    """The labels of every target Prometheus discovers in ``targets`` (``__``-prefixed ones left out)."""
    config = work / "prometheus.yml"
    config.write_text("scrape_configs:\n  - job_name: vllm\n    file_sd_configs:\n      - files: [%s]\n" % targets)
    promtool = executable()
    checked = subprocess.run([promtool, "check", "config", str(config)], capture_output=True, text=True, timeout=60, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    found = subprocess.run([promtool, "check", "service-discovery", "--timeout=5s", str(config), "vllm"],
                           capture_output=True, text=True, timeout=60, check=False)
    assert found.returncode == 0, found.stderr
    # promtool lists the discovered targets in no fixed order (seen both ways): by instance.
    return sorted(({k: v for k, v in target["labels"].items() if not k.startswith("__")} for target in json.loads(found.stdout)),
                  key=lambda labels: labels.get("instance", ""))


class NodeExporter:
    """The distribution's node_exporter (LLMOPS_NODE_EXPORTER, unpacked beside promtool) on a loopback port, with its
    textfile collector alone, reading ``directory`` as it does on a host. Stopped by ``stop()``."""

    def __init__(self, directory: Path, port: int, log: Path):
        binary = os.environ.get("LLMOPS_NODE_EXPORTER", "")
        assert os.access(binary, os.X_OK), "LLMOPS_NODE_EXPORTER is not node_exporter: run the suite with scripts/test.sh"
        self.port, self.log = port, log.open("wb")
        self.proc = subprocess.Popen([binary, "--collector.disable-defaults", "--collector.textfile",
                                      "--collector.textfile.directory=%s" % directory,
                                      "--web.listen-address=127.0.0.1:%d" % port], stdout=self.log, stderr=subprocess.STDOUT)

    def stop(self):
        _stop(self.proc)
        self.log.close()


def _stop(proc):
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


class Server:
    """The distribution's Prometheus server (the binary beside promtool) on a loopback port: scraping every second,
    evaluating its rules every second, its data in ``work``: the job ``vllm`` from the deploy's targets file, and
    ``jobs`` ({name: [host:port]}) as static targets. Stopped by ``stop()``."""

    def __init__(self, work: Path, rules: dict, targets: list, port: int, jobs: dict | None = None):
        self.port, self.work = port, work
        (work / "rules.yml").write_text(yaml.safe_dump(rules, sort_keys=False))
        (work / "targets.json").write_text(json.dumps(targets))
        scrape = [{"job_name": "vllm", "file_sd_configs": [{"files": [str(work / "targets.json")]}]}]
        scrape += [{"job_name": name, "static_configs": [{"targets": list(found)}]} for name, found in (jobs or {}).items()]
        (work / "prometheus.yml").write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
            "rule_files": [str(work / "rules.yml")], "scrape_configs": scrape}))
        binary = str(Path(executable()).with_name("prometheus"))
        self.log = (work / "prometheus.log").open("wb")
        self.proc = subprocess.Popen([binary, "--config.file=%s" % (work / "prometheus.yml"),
                                      "--storage.tsdb.path=%s" % (work / "data"),
                                      "--web.listen-address=127.0.0.1:%d" % port], stdout=self.log, stderr=subprocess.STDOUT)
        self._until(lambda: self._get("/-/ready") is not None, 60, "Prometheus did not get ready")

    def _get(self, path: str):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d%s" % (self.port, path), timeout=5) as resp:
                return resp.read().decode()
        except (urllib.error.URLError, OSError):
            return None

    def _until(self, ok, seconds: float, why: str):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if ok():
                return
            time.sleep(0.5)
        raise AssertionError("%s within %s s (its log: %s)" % (why, seconds, (self.work / "prometheus.log").read_text()[-2000:]))

    def query(self, expr: str) -> list[dict]:
        """The instant vector ``expr`` returns now ([] on an error)."""
        text = self._get("/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
        return json.loads(text)["data"]["result"] if text else []

    def firing(self) -> list[dict]:
        """The labels of each alert firing now."""
        text = self._get("/api/v1/alerts")
        return [a["labels"] for a in json.loads(text)["data"]["alerts"] if a["state"] == "firing"] if text else []

    def wait_firing(self, name: str, seconds: float = 60) -> dict:
        self._until(lambda: any(a["alertname"] == name for a in self.firing()), seconds, "%s did not fire" % name)
        return next(a for a in self.firing() if a["alertname"] == name)

    def stop(self):
        _stop(self.proc)
        self.log.close()
