"""Debian's HAProxy as a plain process, configured by the vllm_frontend role's own template and checks, in front of
servers on loopback: the front door the integration tests send traffic through."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from pathlib import Path

from ansible_collections.llmops.vllm.plugins.module_utils.probe import liveness
from ansible_collections.llmops.vllm.tests.helpers.ansible_cli import run_playbook
from ansible_collections.llmops.vllm.tests.helpers.vllm_serve import free_port


@contextlib.contextmanager
def running(tmp_path: Path, servers: dict, model: str, **settings):
    """HAProxy on a free port before ``servers`` ({name: port} on 127.0.0.1), its health check the liveness probe of
    ``model``; ``settings``: more vllm_frontend_* variables. Yields {url, port, socket, config, log}."""
    assert shutil.which("haproxy"), "no haproxy: scripts/bootstrap.sh installs it"
    port, sock = free_port(), tmp_path / "admin.sock"
    config = tmp_path / "haproxy.cfg"
    rendered = run_playbook([{
        "name": "Render the front door", "hosts": "localhost", "gather_facts": False,
        "tasks": [{"name": "Render", "ansible.builtin.include_role": {"name": "llmops.vllm.vllm_frontend", "tasks_from": "config"}}],
        "vars": {"vllm_frontend_config_path": str(config), "vllm_frontend_socket": str(sock), "vllm_frontend_port": port,
                 "vllm_frontend_bind_address": "127.0.0.1", "vllm_frontend_check_interval": "200ms",
                 "vllm_frontend_check_fast_interval": "200ms", "vllm_frontend_check_down_interval": "200ms",
                 "vllm_frontend_check_timeout": "500ms",
                 "vllm_frontend_servers": [{"name": name, "address": "127.0.0.1", "port": server_port,
                                            "check": liveness.request(model)} for name, server_port in servers.items()],
                 **settings},
    }], timeout=120)
    assert rendered.rc == 0, rendered.report()
    # As a plain process (no systemd here), its log on stdout instead of syslog, kept in a file the tests read.
    config.write_text(config.read_text().replace("log /dev/log local0", "log stdout format raw local0"))
    log = tmp_path / "haproxy.log"
    proc = subprocess.Popen(["haproxy", "-db", "-f", str(config)], stdout=log.open("w"), stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 10
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sock.exists(), log.read_text()
        time.sleep(0.5)   # two health checks: the servers that answer are UP
        yield {"url": f"http://127.0.0.1:{port}/v1/completions", "port": port, "socket": str(sock), "config": config,
               "log": log}
    finally:
        proc.terminate()
        proc.wait(timeout=10)
