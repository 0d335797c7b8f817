# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Liveness watchdog of one vLLM systemd unit, run by a timer (one probe per run; standard library only).

/health answers 200 while the engine is hung (a stopped EngineCore: 2 ms), so the probe is what a client does: a
1-token completion with a short deadline. Its path and body come from the unit, rendered from the rule the
front door's health check is rendered from too (module_utils/probe/liveness): both take a hung engine for dead.
After ``--failures`` failed probes in a row the engine is killed (SIGKILL to the unit's processes: a hung engine
cannot drain) and systemd's Restart= starts it again; why is written to the journal (this unit's output). It
never acts on a server still starting (no probe has succeeded since its MainPID started and /health does not
answer 200 yet: vllm_wait decides that start; vLLM answers /health only once its engine has loaded, so a failed
completion while /health answers is a hang, not a load), on one a deploy is rolling (its lock file, younger than
``--lock-max-age``), or on a unit that is not
active (systemd's Restart= and start limit decide that).

Each run also writes the host's state as a node_exporter textfile (atomically): up, restarts by cause, the last
probe's latency, the consecutive failures, the watchdog's restarts, a failed unit's result, and whether it is a
crash loop: failed after systemd restarted it, so its start limit stopped the restarts (systemd keeps the failed
run's result, exit-code say, and says start-limit-hit only after a run that had succeeded).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import signal
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request

SHOW = ("ActiveState", "SubState", "Result", "MainPID", "NRestarts")


def unit_state(unit):
    out = subprocess.run(["systemctl", "show", unit, "-p", ",".join(SHOW)], capture_output=True, text=True,
                         check=False).stdout
    state = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return {"active": state.get("ActiveState", ""), "sub": state.get("SubState", ""), "result": state.get("Result", ""),
            "pid": int(state.get("MainPID") or 0), "nrestarts": int(state.get("NRestarts") or 0)}


# A 1-token completion answers in well under 1 kB; reading more than this is not waiting for that answer.
BODY_LIMIT = 64 * 1024


class _Deadline(Exception):
    pass


def _alarm(signum, frame):
    raise _Deadline()


@contextlib.contextmanager
def _within(deadline):
    """Raise _Deadline in the block once ``deadline`` seconds have passed: urllib's timeout bounds each socket read,
    not the answer, so a server that drips a byte a second would hold a request for ever."""
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, max(deadline, 0.01))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def probe(url, path, body, deadline, api_key=""):
    """(ok, seconds, why): one probe request, POSTed as JSON, all of it within ``deadline`` seconds (_within), the
    body read up to BODY_LIMIT bytes."""
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = "Bearer " + api_key
    started = time.monotonic()
    try:
        with _within(deadline):
            request = urllib.request.Request(url.rstrip("/") + path, body.encode(), headers)
            with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=deadline) as answer:
                answer.read(BODY_LIMIT)
        return True, time.monotonic() - started, ""
    except _Deadline:
        return False, time.monotonic() - started, "timeout after %g s" % deadline
    except urllib.error.HTTPError as e:
        return False, time.monotonic() - started, "HTTP %d" % e.code
    except (OSError, ValueError, http.client.HTTPException) as e:
        reason = getattr(e, "reason", e)
        return False, time.monotonic() - started, "timeout after %g s" % deadline if "timed out" in str(reason) else str(reason)


def loaded(url, deadline):
    """Whether /health answers 200 within ``deadline`` seconds: vLLM's API server answers it once the engine has
    loaded (and goes on answering while the engine hangs)."""
    try:
        with _within(deadline):
            request = urllib.request.Request(url.rstrip("/") + "/health")
            with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=deadline) as answer:
                return answer.status == 200
    except (_Deadline, OSError, ValueError, http.client.HTTPException):
        return False


# The longest a failed unit waits for its next start from the watchdog, however often it failed before.
BACKOFF_CAP = 3600


def decide(state, unit, lock_age, failures_allowed, lock_max_age, result=None, now=None, backoff=0, started_after=0):
    """The next state and the action: 'probe' (the caller probes, then calls again with ``result``), 'kill',
    'start' (a unit its start limit stopped, once its backoff has passed), or None. ``state`` is the saved one;
    ``unit`` what systemctl shows now; ``lock_age`` the rollout lock's age in seconds or None; ``result`` (ok,
    seconds, why) of this run's probe; ``now`` the wall clock; ``backoff`` the seconds a failed unit waits before
    the watchdog starts it again (doubled after each such start that did not serve, up to BACKOFF_CAP; 0: never);
    ``started_after`` the seconds after which a process counts as started whatever its probes said (0: never): a
    serving group's headless rank probes its head, which serves only once every rank has joined, so a rank that
    joined a head since gone would otherwise wait for it for ever."""
    state = dict(state)
    now = time.time() if now is None else now
    # systemd's own restarts after an exit; the one right after the watchdog's kill is the watchdog's.
    new = max(0, unit["nrestarts"] - state.get("seen_nrestarts", unit["nrestarts"]))
    if unit["nrestarts"] < state.get("seen_nrestarts", 0):   # a manual start reset the counter
        new = 0
    if new and state.get("killed"):
        new -= 1
        state["killed"] = False
    state["exit_restarts"] = state.get("exit_restarts", 0) + new
    state["seen_nrestarts"] = unit["nrestarts"]
    state["unit"] = {k: unit[k] for k in ("active", "sub", "result", "nrestarts")}
    rolling = lock_age is not None and lock_age < lock_max_age
    if unit["active"] == "failed" and backoff > 0 and not rolling:
        # Stopped by its start limit (or failed outright): no request sequence may keep a host down for good.
        since = state.setdefault("failed_since", now)
        wait = min(backoff * 2 ** state.get("backoff_in_a_row", 0), BACKOFF_CAP)
        state.update(up=False, failures=0, note="failed (%s) %d s ago; the watchdog starts it again after %d s" % (
            unit["result"], now - since, wait))
        if now - since < wait:
            return state, None
        state.pop("failed_since")
        state.update(backoff_restarts=state.get("backoff_restarts", 0) + 1,
                     backoff_in_a_row=state.get("backoff_in_a_row", 0) + 1,
                     note="failed (%s) for %d s: starting it again (backoff %d s)" % (unit["result"], now - since, wait))
        return state, "start"
    state.pop("failed_since", None)
    if unit["active"] != "active" or unit["sub"] != "running":
        state.update(up=False, failures=0, note="not running: %s/%s" % (unit["active"], unit["sub"]))
        return state, None
    if unit["pid"] != state.get("pid"):
        # A new server process: it counts as started once a probe has succeeded.
        state.update(pid=unit["pid"], started=False, failures=0, pid_seen_at=now)
    if rolling:
        state.update(note="a deploy is rolling this host")
        return state, None
    if result is None:
        return state, "probe"
    ok, seconds, why = result[:3]
    # The probe's fourth figure, when given: whether /health answered 200 after a failed completion.
    health = result[3] if len(result) > 3 else False
    state["latency"] = round(seconds, 3)
    if ok:
        state.update(up=True, started=True, failures=0, backoff_in_a_row=0, note="")
        return state, None
    state["up"] = False
    if not state.get("started") and started_after > 0 and now - state.get("pid_seen_at", now) >= started_after:
        state["started"] = True
    if not state.get("started") and health:
        # Loaded (vLLM answers /health only then) and no completion: a hang soon after a start, which a bound
        # on "starting" must not hide; the failures count from here.
        state["started"] = True
    if not state.get("started"):
        state["note"] = "starting: no probe has succeeded since pid %d started (%s)" % (unit["pid"], why)
        return state, None
    state["failures"] = state.get("failures", 0) + 1
    state["note"] = "probe failed %d time(s) in a row: %s" % (state["failures"], why)
    if state["failures"] < failures_allowed:
        return state, None
    state.update(failures=0, started=False, killed=True, watchdog_restarts=state.get("watchdog_restarts", 0) + 1)
    return state, "kill"


def textfile(state, service):
    """The node_exporter textfile for the state."""
    label = 'service="%s"' % service
    unit = state.get("unit", {})
    lines = [
        "# HELP vllm_up 1 when the last liveness probe (a 1-token completion) succeeded.",
        "# TYPE vllm_up gauge",
        "vllm_up{%s} %d" % (label, 1 if state.get("up") else 0),
        "# HELP vllm_restarts_total Restarts of the server by cause: exit (systemd Restart= after the process ended), "
        "watchdog (liveness probes failed), backoff (a failed unit started again by the watchdog).",
        "# TYPE vllm_restarts_total counter",
        'vllm_restarts_total{%s,cause="exit"} %d' % (label, state.get("exit_restarts", 0)),
        'vllm_restarts_total{%s,cause="watchdog"} %d' % (label, state.get("watchdog_restarts", 0)),
        'vllm_restarts_total{%s,cause="backoff"} %d' % (label, state.get("backoff_restarts", 0)),
        "# HELP vllm_liveness_latency_seconds Seconds the last liveness probe took.",
        "# TYPE vllm_liveness_latency_seconds gauge",
        "vllm_liveness_latency_seconds{%s} %s" % (label, state.get("latency", 0)),
        "# HELP vllm_liveness_failures Liveness probes failed in a row.",
        "# TYPE vllm_liveness_failures gauge",
        "vllm_liveness_failures{%s} %d" % (label, state.get("failures", 0)),
        "# HELP vllm_unit_failed 1 when the unit is in the failed state, with systemd's result.",
        "# TYPE vllm_unit_failed gauge",
        'vllm_unit_failed{%s,result="%s"} %d' % (label, unit.get("result", ""), 1 if unit.get("active") == "failed" else 0),
        "# HELP vllm_crash_loop 1 when the unit failed after systemd had restarted it: Restart=always stopped at the "
        "start limit.",
        "# TYPE vllm_crash_loop gauge",
        "vllm_crash_loop{%s} %d" % (label, 1 if unit.get("active") == "failed" and unit.get("nrestarts", 0) > 0 else 0),
        "# HELP vllm_watchdog_decided 0 when the last watchdog run could not decide (its journal says why).",
        "# TYPE vllm_watchdog_decided gauge",
        "vllm_watchdog_decided{%s} %d" % (label, 0 if str(state.get("note", "")).startswith("cannot decide") else 1),
    ]
    return "\n".join(lines) + "\n"


STATE_LIMIT = 64 * 1024
_COUNTS = ("seen_nrestarts", "exit_restarts", "watchdog_restarts", "backoff_restarts", "backoff_in_a_row", "failures",
           "pid")


def load_state(path):
    """The saved state: a JSON object of at most STATE_LIMIT bytes in a regular file, else a fresh one ({})."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return {}
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return {}
        data = os.read(fd, STATE_LIMIT + 1)
        saved = json.loads(data or b"{}") if len(data) <= STATE_LIMIT else {}
    except (OSError, ValueError):
        return {}
    finally:
        os.close(fd)
    if not isinstance(saved, dict):
        return {}
    # Counters of the wrong type (a hand edit, a partial write) start again rather than crash every run.
    return dict((key, value) for key, value in saved.items() if _well_typed(key, value))


def _well_typed(key, value):
    if key in _COUNTS:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0
    if key in ("latency", "failed_since", "pid_seen_at"):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if key == "unit":
        return isinstance(value, dict)
    return True


def write_atomically(path, text):
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w") as fh:
        fh.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unit", required=True)
    parser.add_argument("--url", required=True, help="the server's base URL")
    parser.add_argument("--path", required=True, help="the probe's path (a 1-token completion)")
    parser.add_argument("--body", required=True, help="the probe's JSON body")
    parser.add_argument("--deadline", type=float, default=10.0)
    parser.add_argument("--failures", type=int, default=3)
    parser.add_argument("--state", required=True)
    parser.add_argument("--lock", required=True)
    parser.add_argument("--lock-max-age", type=float, default=3600.0)
    parser.add_argument("--textfile", default="")
    parser.add_argument("--backoff", type=float, default=0.0,
                        help="seconds a failed unit waits before the watchdog starts it again (0: never)")
    parser.add_argument("--started-after", type=float, default=0.0,
                        help="seconds after which a process counts as started whatever its probes said (0: never)")
    args = parser.parse_args(argv)

    saved = load_state(args.state)
    try:
        lock_age = time.time() - os.stat(args.lock).st_mtime
    except OSError:
        lock_age = None
    try:
        unit = unit_state(args.unit)
        state, action = decide(saved, unit, lock_age, args.failures, args.lock_max_age, backoff=args.backoff,
                               started_after=args.started_after)
        if action == "probe":
            result = probe(args.url, args.path, args.body, args.deadline, os.environ.get("VLLM_API_KEY", ""))
            if not result[0] and not state.get("started"):
                result = result + (loaded(args.url, args.deadline),)
            state, action = decide(state, unit, lock_age, args.failures, args.lock_max_age, result, backoff=args.backoff,
                                   started_after=args.started_after)
    except Exception as e:   # a watchdog that cannot decide says so in the metrics, and acts on nothing
        state, action = dict(saved, up=False, note="cannot decide: %s: %s" % (type(e).__name__, e)), None
        unit = {"pid": 0}
    if state.get("note"):
        print(state["note"], flush=True)
    if action == "kill":
        print("killing %s (pid %d) so systemd starts it again: %d liveness probes failed in a row"
              % (args.unit, unit["pid"], args.failures), flush=True)
        subprocess.run(["systemctl", "kill", "--signal=SIGKILL", args.unit], check=False)
    elif action == "start":
        # reset-failed clears the start limit; --no-block: the start is systemd's, this run ends now.
        subprocess.run(["systemctl", "reset-failed", args.unit], check=False)
        subprocess.run(["systemctl", "start", "--no-block", args.unit], check=False)
    write_atomically(args.state, json.dumps(state))
    if args.textfile and os.path.isdir(os.path.dirname(args.textfile)):
        write_atomically(args.textfile, textfile(state, args.unit))
    return 0


if __name__ == "__main__":
    sys.exit(main())
