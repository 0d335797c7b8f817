# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Wait for a vLLM server to be ready, or say why it will not be.

Each poll: read the new log lines (milestones, failure evidence), check the
watched process or unit, probe /health. The wait ends

* ``ready``  when /health is 200 from a listener that is ours (or, when that
  cannot be told, the log since the offset shows the HTTP server started), and
  /v1/models lists ``expect_model`` if one is given;
* ``failed`` when the process or unit is gone (classified from the log; an exit
  code 0 is still a failure), a certain failure signature appears, /health
  answers 503 (engine dead), or another process owns the port;
* ``timeout`` when time runs out.

Clock, sleep, HTTP prober, process watcher and port-owner lookup are injected,
so the state machine is tested without real time, processes or sockets.
"""

from __future__ import annotations

import shutil
import time

from ansible_collections.llmops.vllm.plugins.module_utils.probe import http_client
from ansible_collections.llmops.vllm.plugins.module_utils.probe.process import Listener, PidWatch, UnitWatch, port_owner
from ansible_collections.llmops.vllm.plugins.module_utils.log import vocabulary
from ansible_collections.llmops.vllm.plugins.module_utils.log.follower import Cursor, LogFollower, start_cursor
from ansible_collections.llmops.vllm.plugins.module_utils.log.signatures import DEFAULT_HINTS, MILESTONE_ORDER
from ansible_collections.llmops.vllm.plugins.module_utils.log.watch import LogWatch, Sighting

DEFAULT_HEALTH_URL = "http://127.0.0.1:8000/health"
READ_BUDGET = 32 << 20      # bytes of log per poll, so a huge backlog never starves the probes
SETTLE = 0.3                # after a certain failure line: seconds to let the rest of the traceback arrive
FAST_PROBE = 0.05           # probe period once the log says the HTTP server is starting
MAX_DETAIL = 600
MAX_TAIL_LINES = 1000
CURSOR_VERSION = "v1"


class WaitSettings(object):
    """What to wait for and how patiently (the module's parameters, validated)."""

    def __init__(self, health_url=DEFAULT_HEALTH_URL, models_url=None, expect_model=None, api_key=None,
                 timeout=600.0, interval=0.25, probe_timeout=2.0, port=None, log_path=None, already_started=False,
                 headless=False):
        if timeout < 0 or interval <= 0 or probe_timeout <= 0:
            raise ValueError("timeout must be >= 0, interval and probe_timeout > 0")
        self.health_url = health_url
        self.models_url = models_url or http_client.models_url_for(health_url)
        self.expect_model = expect_model
        self.api_key = api_key
        self.timeout = float(timeout)
        self.interval = float(interval)
        self.probe_timeout = float(probe_timeout)
        # A serving group's headless rank serves no API: health_url is its head's, on another host, and the rank
        # is ready once the group serves while its own process lives and its log shows no failure.
        self.headless = headless
        if port is None and not headless:
            host, url_port = http_client.url_host_port(health_url)
            port = url_port if http_client.is_local_host(host) else None
        self.port = port
        self.log_path = log_path
        # The start happened before this call (log_offset 'end'), so its start-up lines are not expected.
        self.already_started = already_started


def dump_cursor(log_cursor, watch, process):
    """One short string that lets a later call resume: log position, milestones seen, process baseline."""
    parts = [CURSOR_VERSION]
    if log_cursor is not None:
        parts.append("log=" + log_cursor.dump())
    seen = [name for name in MILESTONE_ORDER + ("ready_pattern",) if name in watch.milestones]
    if seen:
        parts.append("seen=" + ",".join(seen))
    if process is not None:
        parts.append(process.baseline())
    return ";".join(parts)


def load_cursor(text):
    """Parse dump_cursor's string into {'log': Cursor, 'seen': [...], 'pid': (pid, ticks), 'unit': (main, n)}."""
    parts = text.strip().split(";")
    if parts[0] != CURSOR_VERSION:
        raise ValueError("cursor %r was not returned by this version of vllm_wait" % text)
    state = {"seen": []}
    for part in parts[1:]:
        key, _sep, value = part.partition("=")
        if key == "log":
            state["log"] = Cursor.load(value)
        elif key == "seen":
            state["seen"] = [name for name in value.split(",") if name]
        elif key in ("pid", "unit"):
            first, _sep, second = value.partition(":")
            try:
                state[key] = (int(first), None if second in ("", "-") else int(second))
            except ValueError:
                raise ValueError("cursor %r has a malformed %s baseline" % (text, key))
        else:
            raise ValueError("cursor %r has an unknown field %r" % (text, key))
    return state


class VllmWaiter(object):
    """The wait state machine. ``run()`` returns the result dict (see the module's RETURN)."""

    def __init__(self, settings, watch, follower=None, process=None, prober=None, owner_lookup=port_owner,
                 clock=time.monotonic, sleep=time.sleep, wall_clock=time.time, kernel_log=None):
        self.settings = settings
        self.watch = watch
        self.follower = follower
        self.process = process
        self.prober = prober or http_client.HttpProber()
        self.owner_lookup = owner_lookup
        # The kernel's recent log (journalctl -k): whose OOM kills explain a death the process could not log.
        self.kernel_log = kernel_log or (lambda: "")
        self.clock, self.sleep, self.wall_clock = clock, sleep, wall_clock
        self.health_status = None
        self.models = []
        self.listener = ""
        self.state = None
        self._origin = None         # monotonic start of the watched process, once known
        self._started = None
        self._caught_up = False
        self._fatal_since = None
        self._trust_note = ""

    # -- the loop ---------------------------------------------------------
    def run(self):
        s = self.settings
        self._started = self.clock()
        deadline = self._started + s.timeout
        while True:
            now = self.clock()
            more = self._read_log(now, READ_BUDGET)
            if self.process is not None:
                self.state = self.process.poll()
                if self.state.started_at:
                    self._origin = self.state.started_at
                if not self.state.alive:
                    self._drain_log()
                    return self._process_gone()
            if self.watch.fatal is not None:
                if self._fatal_since is None:
                    self._fatal_since = now
                if now - self._fatal_since >= SETTLE:
                    self._drain_log(final=False)
                    return self._from_log("engine_died", "")
            else:
                outcome = self._probe()
                if outcome is not None:
                    return outcome
            now = self.clock()
            if now >= deadline:
                self._read_log(now, READ_BUDGET)
                return self._timed_out()
            if not more:
                self.sleep(max(0.0, min(self._pause(), deadline - now)))

    def _pause(self):
        pause = self.settings.interval
        if self._fatal_since is not None:
            pause = min(pause, SETTLE / 3)
        elif self.watch.log_ready or "server_starting" in self.watch.milestones:
            pause = min(pause, FAST_PROBE)
        return pause

    # -- log ----------------------------------------------------------------
    def _read_log(self, now, budget):
        """Feed new lines to the watch; True when the budget ran out before the end of the file."""
        if self.follower is None:
            return False
        for block in self.follower.read(budget):
            self.watch.feed(block, now, backlog=not self._caught_up)
        more = self.follower.pending()
        if not more:
            self._caught_up = True
        return more

    def _drain_log(self, final=True):
        """Read to the end; after the writer exited, its unterminated last line counts too."""
        if self.follower is None:
            return
        now = self.clock()
        while self._read_log(now, None):
            pass
        if final:
            last = self.follower.flush()
            if last:
                self.watch.feed(last, now, backlog=not self._caught_up)

    # -- http ---------------------------------------------------------------
    def _probe(self):
        s = self.settings
        result = self.prober.health(s.health_url, s.probe_timeout)
        self.health_status = result.status if result.status is not None else result.error
        if result.status is None and result.error != http_client.TIMEOUT:
            return None  # refused, reset: nobody serves yet
        owner = self._owner()
        self.listener = owner.kind
        if owner.kind == "foreign":
            return self._result("failed", "port_in_use", owner.detail + " (it answered /health: %s)" % self.health_status,
                                DEFAULT_HINTS["port_in_use"])
        # "unknown" means every listener has the watched process's uid but no readable process holds it
        # (no CAP_SYS_PTRACE, as in containers): trust it when the start-up line was seen since the offset,
        # or when the start happened before this call and no start-up line is expected.
        trusted = (owner.kind == "ours" or self.watch.log_ready or self.follower is None or self.settings.headless
                   or (owner.kind == "unknown" and self.settings.already_started))
        if result.status == 503 and trusted:
            self._drain_log(final=False)
            return self._from_log("engine_died", "/health answered 503: the engine is dead")
        if result.status != 200:
            return None
        if not trusted:
            self._trust_note = ("/health is 200 but the listener's owner is unknown and the log since the offset "
                                "never showed 'Application startup complete.' (an old server?)")
            return None
        return self._check_models()

    def _owner(self):
        if self.owner_lookup is None or self.process is None or self.settings.port is None:
            return Listener("unknown", [], "port ownership not checked")
        tree = self.process.tree()
        if not tree:
            return Listener("unknown", [], "no process tree to compare with")
        return self.owner_lookup(self.settings.port, tree, root=getattr(self.process, "pid", None))

    def _check_models(self):
        s = self.settings
        result, ids = self.prober.models(s.models_url, s.api_key, s.probe_timeout)
        self.models = ids
        if s.expect_model:
            if result.status in (401, 403):
                return self._result("failed", "config_error", "%s answered %s: the API key is missing or wrong"
                                    % (s.models_url, result.status), "pass the server's --api-key as api_key")
            if result.status != 200:
                return None
            if s.expect_model not in ids:
                return self._result("failed", "config_error", "the server serves %s, not %r" % (ids, s.expect_model),
                                    "check --served-model-name (or --model) against expect_model")
        self.watch.milestones.setdefault("http_ready", Sighting(self.clock()))
        return self._result("ready", "ready", "", "")

    # -- outcomes -----------------------------------------------------------
    def _process_gone(self):
        st = self.state
        summary = "; ".join(x for x in (st.note, st.exit_detail) if x)
        if self.watch.shutdown and not self.watch.finding():
            return self._result("failed", "process_exited",
                                "the server was asked to shut down during the wait (%s)" % summary,
                                "something stopped or restarted the server while it started: check handlers and "
                                "other plays")
        killed = self._host_records()
        if killed:
            return killed
        pre_exec = getattr(self.process, "pre_exec", None)
        if pre_exec and not self.watch.finding():
            # Nothing ran, so nothing logged: systemd's own status is the only evidence (vocabulary.SYSTEMD_EXIT).
            return self._result("failed", pre_exec[1], "systemd could not start the unit: %s" % summary,
                                vocabulary.systemd_hint(pre_exec[1]))
        return self._from_log("process_exited", summary, summary)

    def _host_records(self):
        """What the kernel's log says killed a process of this server, when the log names no other cause than a
        death (a killed process prints nothing; the others only report that it died): the OOM killer's records
        (out_of_memory) or the GPU driver's Xid (engine_died); None when it names none of them."""
        finding = self.watch.finding()
        if finding is not None and finding.reason not in (None, "engine_died", "process_exited"):
            return None
        pids = set(self.watch.pids) | set([self.state.pid] if self.state and self.state.pid else [])
        text = self.kernel_log() if pids else ""
        killed = vocabulary.oom_kills(text, pids)
        if killed:
            return self._result("failed", "out_of_memory", "the kernel's OOM killer killed %s (from its log)" % ", ".join(
                "%s (pid %d)" % (name, pid) for pid, name in killed), DEFAULT_HINTS["engine_died"])
        faults = vocabulary.gpu_faults(text, pids)
        if faults:
            return self._result("failed", "engine_died", "the GPU driver reported %s (from the kernel's log)" % "; ".join(
                "Xid %d for %s (pid %d) on %s: %s" % fault for fault in faults[:3]), vocabulary.XID_HINT)
        return None

    def _from_log(self, default_reason, default_detail, suffix=""):
        reason, detail, hint, ev = self.watch.explain(default_reason)
        if ev is None:
            return self._result("failed", reason, default_detail, hint)
        return self._result("failed", reason, detail + (" (%s)" % suffix if suffix else ""), hint, ev)

    def _timed_out(self):
        s = self.settings
        parts = ["not ready after %g s" % s.timeout]
        last = self.watch.last_milestone()
        if last:
            parts.append("last milestone: %s" % last)
        elif self.follower is not None and self.follower.cursor.ino is None:
            parts.append("log file %s does not exist" % s.log_path)
        else:
            parts.append("no start-up milestone in the log since the offset")
        parts.append("/health: %s" % (self.health_status if self.health_status is not None else "not probed"))
        if self._trust_note and self.health_status == 200:
            parts.append(self._trust_note)
        ev = self.watch.finding()
        return self._result("timeout", "timeout", "; ".join(parts), DEFAULT_HINTS["timeout"], ev)

    def _result(self, status, reason, detail, hint, evidence=None):
        s = self.settings
        log_cursor = self.follower.cursor if self.follower is not None else None
        res = {
            "status": status,
            "reason": reason,
            "detail": _clip(detail),
            "hint": hint or "",
            "root_cause_line": (evidence.root_line or evidence.line).raw if evidence is not None else "",
            "log_tail": list(self.watch.tail),
            "elapsed": round(self.clock() - self._started, 3),
            "phases": self._phases(),
            "restarts": self.state.restarts if self.state is not None else 0,
            "cursor": dump_cursor(log_cursor, self.watch, self.process),
            "health_status": self.health_status,
            "models": self.models,
            "pid": getattr(self.process, "pid", None),
            "listener": self.listener,
            "log_path": s.log_path or "",
        }
        res["msg"] = _message(res, s)
        return res

    def _phases(self):
        """Seconds from the process start (when known, else the wait start) to each milestone."""
        origin = self._origin or self._started
        now_mono, now_wall = self.clock(), self.wall_clock()
        phases = {}
        for name, sighting in self.watch.milestones.items():
            if sighting.seen_at is None:
                continue
            at = sighting.seen_at
            if sighting.backlog and sighting.ts:
                at = _estimate_monotonic(sighting.ts, now_mono, now_wall, at)
            phases[name] = round(max(0.0, at - origin), 3)
        return phases


def _estimate_monotonic(ts, now_mono, now_wall, fallback):
    """Map a line's local 'MM-DD HH:MM:SS' onto the monotonic clock (year: the latest not in the future)."""
    year = time.localtime(now_wall).tm_year
    for candidate in (year, year - 1):
        try:
            wall = time.mktime(time.strptime("%d-%s" % (candidate, ts), "%Y-%m-%d %H:%M:%S"))
        except (ValueError, OverflowError):
            return fallback
        if wall <= now_wall + 60:
            return min(fallback, now_mono - (now_wall - wall))
    return fallback


def _clip(text):
    return text if len(text) <= MAX_DETAIL else text[:MAX_DETAIL - 3] + "..."


def _message(res, settings):
    if res["status"] == "ready":
        served = " serving %s" % ", ".join(res["models"]) if res["models"] else ""
        return "vLLM is ready: %s answered 200 after %.1f s%s" % (settings.health_url, res["elapsed"], served)
    head = ("vLLM failed to start (%s): %s." if res["status"] == "failed" else "vLLM was not ready in time (%s): %s.")
    words = [head % (res["reason"], res["detail"])]
    if res["root_cause_line"]:
        words.append("Root cause: '%s'." % res["root_cause_line"].strip())
    if res["hint"]:
        words.append("To fix: %s." % res["hint"].rstrip("."))
    if res["log_path"]:
        words.append("Log: %s (its last lines are in log_tail)." % res["log_path"])
    return " ".join(words)


def build_waiter(params, runner=None):
    """Assemble a VllmWaiter from the module's parameters (a dict); ValueError on bad values."""
    state = load_cursor(params["cursor"]) if params.get("cursor") else {"seen": []}
    log_path = params.get("log_path")
    follower = None
    if log_path:
        log_cursor = state.get("log") or start_cursor(log_path, _offset(params.get("log_offset", 0)))
        follower = LogFollower(log_path, log_cursor)
    tail_lines = params.get("log_tail_lines", 40)
    if not 0 <= tail_lines <= MAX_TAIL_LINES:
        raise ValueError("log_tail_lines must be between 0 and %d" % MAX_TAIL_LINES)
    watch = LogWatch(params.get("fail_patterns") or (), params.get("ready_patterns") or (), tail_lines,
                     seen=state["seen"])
    process = None
    if params.get("pid") is not None:
        pid = params["pid"]
        ticks = state["pid"][1] if state.get("pid") and state["pid"][0] == pid else None
        process = PidWatch(pid, start_ticks=ticks)
    elif params.get("unit"):
        main, restarts = state.get("unit", (None, None))
        process = UnitWatch(params["unit"], runner, main_pid=main, restarts=restarts)
    health_url = params.get("health_url") or DEFAULT_HEALTH_URL
    settings = WaitSettings(health_url, params.get("models_url"), params.get("expect_model"), params.get("api_key"),
                            params.get("timeout", 600.0), params.get("interval", 0.25),
                            params.get("probe_timeout", 2.0), params.get("port"), log_path,
                            already_started=not params.get("cursor") and _offset(params.get("log_offset", 0)) == "end",
                            headless=bool(params.get("headless")))
    return VllmWaiter(settings, watch, follower, process, kernel_log=_kernel_log(runner))


def _kernel_log(runner):
    """The kernel's last records, as journalctl -k prints them; '' where they cannot be read (a container, say)."""
    def read():
        if runner is None or shutil.which("journalctl") is None:
            return ""
        try:
            rc, out, _err = runner(["journalctl", "-k", "-q", "-o", "cat", "--no-pager", "-n", "2000"])
        except (OSError, ValueError):
            return ""
        return out if rc == 0 else ""
    return read


def _offset(value):
    if value in (None, ""):
        return 0
    if isinstance(value, str) and value.strip() == "end":
        return "end"
    try:
        offset = int(value)
    except (TypeError, ValueError):
        raise ValueError("log_offset must be a byte count or 'end', got %r" % (value,))
    if offset < 0:
        raise ValueError("log_offset cannot be negative")
    return offset
