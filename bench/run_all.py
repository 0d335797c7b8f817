"""Every benchmark of the project in one run, on one machine, with the figures side by side.

    python bench/run_all.py                  # vllm_wait (quick settings) and the fleet/gate figures of the last test run
    python bench/run_all.py --full           # vllm_wait with its default runs and a 1 GB log (about 3 minutes more)

- ``bench_vllm_wait.py``: the waiter's detection latency, CPU and memory against the hand loop it replaces;
- ``bench_fleet.py``: the molecule scenarios' records of the same test session (``./scripts/test.sh``): deploy and
  no-op times for 1 and 3 hosts, failed requests during every rollout, the rolling window, bytes per host, and the
  speed gate's figures and seconds per start.

Each prints its own tables and goals; this prints the machine first and a line per benchmark at the end, and
exits 1 when any of them missed a goal.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def machine() -> str:
    cpu = ""
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    memory = ""
    try:
        kib = int(next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal")))
        memory = ", %.1f GiB" % (kib / 1024 / 1024)
    except (OSError, StopIteration, ValueError):
        pass
    return "%s, %s, %d CPUs%s, Python %s" % (platform.platform(), cpu or "cpu unknown", os.cpu_count() or 0, memory,
                                             platform.python_version())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="bench_vllm_wait.py with its default runs and log size")
    args = parser.parse_args()
    wait_args = [] if args.full else ["--runs", "5", "--big-mb", "128"]
    benches = [("vllm_wait", [sys.executable, str(HERE / "bench_vllm_wait.py"), *wait_args]),
               ("fleet and speed gate", [sys.executable, str(HERE / "bench_fleet.py")])]
    print("machine: " + machine(), flush=True)
    outcomes = []
    for name, cmd in benches:
        print("\n" + "=" * 20 + " " + name + " " + "=" * 20, flush=True)
        started = time.monotonic()
        rc = subprocess.call(cmd)
        outcomes.append((name, rc, time.monotonic() - started))
    print("\n" + "\n".join("%-22s %s in %.0f s" % (name, "goals met" if rc == 0 else "MISSED (exit %d)" % rc, seconds)
                           for name, rc, seconds in outcomes))
    return 0 if all(rc == 0 for _name, rc, _s in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
