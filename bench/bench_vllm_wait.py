"""Benchmark vllm_wait's waiter against the polling it replaces.

    python bench/bench_vllm_wait.py [--runs 15] [--big-mb 1024]

Prints medians over repeated runs of:
  * ready detection: the scripted server's /health turns 200 -> the waiter returns ready;
  * failure detection: the server process exits / writes a fatal line -> the waiter returns failed;
beside a hand-written `sleep 15; tail -5 | grep` loop (expected latency worked out, and a
run scaled down 30x measured) and wait_for-style re-reading of the whole log on every poll;
and the waiter's CPU time and peak RSS while it follows a log that grows by --big-mb MB,
against the same file already present before the offset.

The waiter runs in its own subprocess (os.wait4 gives its own CPU time and peak RSS).
Big files live in a temporary directory that is removed at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import mmap
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPTED = REPO / "tests" / "fixtures" / "scripted_vllm.py"
HAND_PERIOD = 15.0
SCALE = 30.0
HAND_GREP = "error|Error|Application startup|ready|Uvicorn running|Traceback|pydantic"
END_MARKER = "BENCH-END-OF-LOG"
GOALS = {"ready": 0.5, "failure": 1.0, "rss_mb": 64.0}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_file(path, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise RuntimeError("%s never appeared" % path)
        time.sleep(0.005)
    return float(path.read_text())


def child_main(params):
    """Inside the waiter subprocess: run the engine, print when it returned."""
    sys.path.insert(0, os.environ["BENCH_FARM"])
    from ansible_collections.llmops.vllm.plugins.module_utils.probe.readiness import build_waiter
    result = build_waiter(json.loads(params)).run()
    print(json.dumps({"returned_at": time.time(), "status": result["status"], "reason": result["reason"]}))


class Waiter(object):
    """The waiter engine in a subprocess; ``finish()`` returns its result, CPU seconds and peak RSS (MB)."""

    def __init__(self, farm, **params):
        env = dict(os.environ, BENCH_FARM=farm)
        self.proc = subprocess.Popen([sys.executable, __file__, "--child", json.dumps(params)], env=env,
                                     stdout=subprocess.PIPE, text=True)

    def finish(self):
        _pid, status, usage = os.wait4(self.proc.pid, 0)
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        out = json.loads(self.proc.stdout.read())
        self.proc.stdout.close()
        return out, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0


class Server(object):
    def __init__(self, tmp, behaviour, *extra, state=None):
        self.state = state or Path(tempfile.mkdtemp(dir=tmp))
        self.log = self.state / "serve.log"
        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, str(SCRIPTED), behaviour, "--log", str(self.log), "--port",
                                      str(self.port), "--state", str(self.state)] + list(extra))

    def event(self, name):
        return wait_file(self.state / name)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(10)


def waiter_params(server, **extra):
    params = dict(pid=server.proc.pid, log_path=str(server.log), timeout=60,
                  health_url="http://127.0.0.1:%d/health" % server.port)
    params.update(extra)
    return params


def measure_vllm_wait(tmp, farm, runs):
    ready, exits, fatals = [], [], []
    for _run in range(runs):
        server = Server(tmp, "good", "--pause", "0.05")
        res, _cpu, _rss = Waiter(farm, **waiter_params(server)).finish()
        assert res["status"] == "ready", res
        ready.append(res["returned_at"] - server.event("ready_at"))
        server.stop()
        server = Server(tmp, "exit1", "--after", "0.8")
        res, _cpu, _rss = Waiter(farm, **waiter_params(server)).finish()
        assert res["reason"] == "process_exited", res
        exits.append(res["returned_at"] - server.event("exit_at"))
        server.stop()
        server = Server(tmp, "fatal", "--after", "0.8", "--linger", "10")
        res, _cpu, _rss = Waiter(farm, **waiter_params(server)).finish()
        assert res["reason"] == "missing_dependency", res
        fatals.append(res["returned_at"] - server.event("fatal_at"))
        server.stop()
    return ready, exits, fatals


def measure_hand_loop(tmp, runs):
    """The hand-written loop, sleep scaled down SCALE times, on the same scripted start."""
    period = HAND_PERIOD / SCALE
    script = ('for i in $(seq 1 2000); do sleep %s; OUT=$(tail -5 "$1" 2>/dev/null); '
              'if echo "$OUT" | grep -qiE "%s"; then date +%%s.%%N; break; fi; done' % (period, HAND_GREP))
    latencies = []
    for _run in range(runs):
        state = Path(tempfile.mkdtemp(dir=tmp))
        loop = subprocess.Popen(["bash", "-c", script, "loop", str(state / "serve.log")], stdout=subprocess.PIPE,
                                text=True)
        time.sleep(random.uniform(0, period))   # the server starts at an arbitrary phase of the loop
        server = Server(tmp, "good", "--pause", "0.05", state=state)
        out = loop.communicate(timeout=120)[0]
        latencies.append((float(out.split()[0]) - server.event("ready_at")) * SCALE)
        server.stop()
    return latencies


def make_block(size=1 << 20):
    """About 1 MiB of a busy server's log: access lines, stats lines and the odd warning."""
    rng = random.Random(0)
    lines, total = [], 0
    while total < size:
        r = rng.random()
        if r < 0.7:
            line = '(APIServer pid=13083) INFO:     10.0.0.%d:%d - "POST /v1/chat/completions HTTP/1.1" 200 OK' % (
                rng.randint(1, 254), rng.randint(30000, 60000))
        elif r < 0.99:
            numbers = (rng.randint(0, 59), rng.random() * 900, rng.random() * 300, rng.randint(0, 64),
                       rng.random() * 90, rng.random() * 50)
            line = ("(APIServer pid=13083) INFO 05-09 11:02:%02d [loggers.py:271] Engine 000: Avg prompt throughput: "
                    "%.1f tokens/s, Avg generation throughput: %.1f tokens/s, Running: %d reqs, Waiting: 0 reqs, GPU KV "
                    "cache usage: %.1f%%, Prefix cache hit rate: %.1f%%" % numbers)
        else:
            line = ("(APIServer pid=13083) WARNING 05-09 11:02:%02d [serving.py:310] Request exceeded the model's "
                    "context window and was truncated" % rng.randint(0, 59))
        lines.append(line)
        total += len(line) + 1
    return ("\n".join(lines) + "\n").encode()


def docker_stamped(block):
    """The same lines as ``docker logs -t`` writes them: an RFC 3339 stamp in front of each."""
    lines = block.decode().split("\n")
    return ("\n".join("2025-05-09T11:02:%02d.%09dZ %s" % (i % 60, i, line) if line else line
                      for i, line in enumerate(lines))).encode()


def follow(farm, log, size_mb, stamped=False):
    """CPU seconds, peak RSS (MB) and bytes of a waiter that starts at the end of ``log`` while it grows by ``size_mb``.

    What the file held before (a big file, for the 'before the offset' case) must cost nothing.
    """
    block = docker_stamped(make_block()) if stamped else make_block()
    blocks = int(size_mb * (1 << 20) // len(block))
    marker = ("(APIServer pid=13083) ERROR %s\n" % END_MARKER).encode()
    waiter = Waiter(farm, log_path=str(log), log_offset="end", timeout=600, interval=0.25,
                    health_url="http://127.0.0.1:%d/health" % free_port(), fail_patterns=[END_MARKER])
    time.sleep(0.5)   # the waiter is following before the growth starts
    with open(log, "ab") as fh:
        for _block in range(blocks):
            fh.write(block)
        fh.write(marker)
    res, cpu, rss = waiter.finish()
    assert res["status"] == "failed", res
    return cpu, rss, blocks * len(block)


def wait_for_style_poll(log):
    """One wait_for poll: mmap the whole file and search it from byte 0 (CPU seconds)."""
    start = time.process_time()
    with open(log, "rb") as fh, contextlib.closing(mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)) as mm:
        re.compile(b"Application startup complete", re.MULTILINE).search(mm)
    return time.process_time() - start


def med(values):
    return statistics.median(values)


def p90(values):
    return sorted(values)[max(0, int(round(0.9 * len(values))) - 1)]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--big-mb", type=int, default=1024)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child_main(args.child)

    tmp = tempfile.mkdtemp(prefix="bench-vllm-wait-")
    try:
        farm = os.path.join(tmp, "farm")
        os.makedirs(os.path.join(farm, "ansible_collections", "llmops"))
        os.symlink(str(REPO), os.path.join(farm, "ansible_collections", "llmops", "vllm"))
        print("vllm_wait benchmark: %d runs per latency, %d MB log; %d CPUs" % (args.runs, args.big_mb, os.cpu_count()))
        ready, exits, fatals = measure_vllm_wait(tmp, farm, args.runs)
        hand = measure_hand_loop(tmp, args.runs)
        log = Path(tmp) / "big.log"
        base_cpu, base_rss, _bytes = follow(farm, Path(tmp) / "empty.log", 0)
        quarter_cpu, _rss, quarter_bytes = follow(farm, Path(tmp) / "quarter.log", args.big_mb // 4)
        os.remove(Path(tmp) / "quarter.log")
        stamped_cpu, _rss, stamped_bytes = follow(farm, Path(tmp) / "quarter.log", args.big_mb // 4, stamped=True)
        os.remove(Path(tmp) / "quarter.log")
        grow_cpu, grow_rss, grown = follow(farm, log, args.big_mb)
        old_cpu, old_rss, _bytes = follow(farm, log, 0)   # the same file, now entirely before the offset
        poll_cpu = med([wait_for_style_poll(log) for _poll in range(3)])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    gb = grown / float(1 << 30)
    rows = [
        ("ready detected after /health 200", "%.3f s [p90 %.3f]" % (med(ready), p90(ready)),
         "%.1f s expected (%.1f s max); scaled run: %.1f s" % (HAND_PERIOD / 2, HAND_PERIOD, med(hand)),
         "n/a (no HTTP check)"),
        ("failure detected after process exit", "%.3f s [p90 %.3f]" % (med(exits), p90(exits)),
         "never (no log line; runs out its 7.5 min)", "never (no process check)"),
        ("failure detected after fatal line", "%.3f s [p90 %.3f]" % (med(fatals), p90(fatals)),
         "%.1f s expected, if in tail -5" % (HAND_PERIOD / 2), "never (waits for success only)"),
        ("CPU to follow %d MB appended" % (grown >> 20),
         "%.2f s (%.2f s/GB)" % (grow_cpu - base_cpu, (grow_cpu - base_cpu) / gb), "-", "%.2f s per 1 s poll" % poll_cpu),
        ("CPU to follow %d MB appended" % (quarter_bytes >> 20), "%.2f s" % (quarter_cpu - base_cpu), "-", "-"),
        ("CPU to follow %d MB of docker -t lines" % (stamped_bytes >> 20),
         "%.2f s (x%.1f the plain lines)" % (stamped_cpu - base_cpu, (stamped_cpu - base_cpu) / max(1e-9, quarter_cpu - base_cpu)),
         "-", "-"),
        ("CPU with %d MB before the offset" % (grown >> 20), "%.2f s" % (old_cpu - base_cpu), "-",
         "%.2f s per poll, for ever" % poll_cpu),
        ("waiter peak RSS", "%.1f MB (idle %.1f MB)" % (max(grow_rss, old_rss), base_rss), "-", "-"),
    ]
    widths = [max(len(r[i]) for r in rows + [("measure", "vllm_wait", "hand loop (sleep 15)", "wait_for-style")])
              for i in range(4)]
    fmt = "  ".join("%%-%ds" % w for w in widths)
    print(fmt % ("measure", "vllm_wait", "hand loop (sleep 15)", "wait_for-style"))
    for row in rows:
        print(fmt % row)
    checks = [
        ("ready within %.1f s (median)" % GOALS["ready"], med(ready) <= GOALS["ready"]),
        ("failure within %.1f s (median, exit and fatal line)" % GOALS["failure"],
         max(med(exits), med(fatals)) <= GOALS["failure"]),
        ("peak RSS under %d MB" % GOALS["rss_mb"], max(grow_rss, old_rss) < GOALS["rss_mb"]),
        ("CPU scales with new bytes only (old bytes cost < 5% of new)",
         (old_cpu - base_cpu) < 0.05 * (grow_cpu - base_cpu)),
    ]
    for name, ok in checks:
        print("%s  %s" % ("PASS" if ok else "FAIL", name))
    return 0 if all(ok for _name, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
