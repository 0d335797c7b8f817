"""One real `vllm serve` of the CPU engine on the tiny models, for the tests that need a running server."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import urllib.request
from pathlib import Path

SERVED = "tiny-qwen3"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class VllmServe:
    """One `vllm serve` process group, logging to a file like the systemd unit does."""

    def __init__(self, engine_python: Path, cli: Path, log: Path, model: Path, drafter: Path | None,
                 port: int, extra: list[str] | None = None, speculative_tokens: int = 4):
        self.log, self.port = log, port
        spec = {"method": "dflash", "model": str(drafter), "num_speculative_tokens": speculative_tokens} if drafter else None
        self.cmd = [str(engine_python), str(cli), "serve", str(model), "--served-model-name", SERVED,
                    "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "256", "--dtype", "float32",
                    "--enforce-eager", "--max-num-seqs", "8"]
        if spec:
            self.cmd += ["--speculative-config", json.dumps(spec)]
        self.cmd += extra or []
        # The worker on the last core: molecule default's engine, which may run meanwhile, has the first
        # (tests/helpers/molecule_run.py), and two engines' workers on one core barely start.
        self.env = dict(os.environ, HF_HUB_OFFLINE="1", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1",
                        VLLM_CPU_OMP_THREADS_BIND=str((os.cpu_count() or 1) - 1))
        # A 1 GiB KV cache, unless the command sizes it: VLLM_CPU_KVCACHE_SPACE would override the flag.
        if "--kv-cache-memory-bytes" in self.cmd:
            self.env.pop("VLLM_CPU_KVCACHE_SPACE", None)
        else:
            self.env["VLLM_CPU_KVCACHE_SPACE"] = "1"
        self.proc: subprocess.Popen | None = None

    def start(self) -> int:
        with self.log.open("ab") as fh:
            self.proc = subprocess.Popen(self.cmd, stdout=fh, stderr=subprocess.STDOUT, env=self.env,
                                         start_new_session=True)
        return self.proc.pid

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)

    def engine_core_pid(self) -> int:
        out = subprocess.run(["pgrep", "-s", str(self.proc.pid), "-f", "EngineCore"], capture_output=True,
                             text=True, check=False).stdout.split()
        assert out, "no EngineCore process"
        return int(out[0])


def http(port: int, path: str, body: dict | None = None) -> str:
    data = json.dumps(body).encode() if body else None
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return resp.read().decode()


def wait_args(server: VllmServe, offset: int, timeout: float = 240) -> dict:
    return {"pid": server.proc.pid, "log_path": str(server.log), "log_offset": offset,
            "health_url": f"http://127.0.0.1:{server.port}/health", "expect_model": SERVED, "timeout": timeout}
