"""Fleet rollout figures from the molecule scenarios' own records, side by side for 1 host and the fleet (2 hosts).

Both scenarios record each deploy they run (phases.jsonl in their ephemeral directory: start, end, exit status,
fleet report, each host's server PID and network counters after it); the fleet scenario's probe records every
request it sent through the front door and to each host (probe.jsonl). ``./scripts/test.sh`` runs both scenarios
in one session, so one test run gives both columns; this script reads them, prints the figures and checks the goals:

- a no-op re-run takes at most 20% of a first deploy's wall time, for 1 host and for the fleet;
- no request failed through the front door during any rollout (the first deploy from the first answer on);
- no request failed on a host the rollout did not restart.

The default scenario's compare run (its tune run: playbooks/compare.yml on its one host with the agreeing pair) is
read from what it kept (compare/*/latest.json) and its output: the wall time of each configuration, the canary's
time out of its front door, the spread of the repeated measurements and the smallest speed-up a gate can tell from
it.

    python bench/bench_fleet.py                       # reads .build/molecule/{default,fleet}-record
    python bench/bench_fleet.py --json figures.json   # the figures as JSON too
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NOOP_GOAL = 0.20


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def phases(directory: Path) -> list[dict]:
    """Each recorded phase, deploys named by their order (the first deploy, then the no-op re-run)."""
    named, deploys = [], 0
    for p in lines(directory / "phases.jsonl"):
        if p["phase"] == "deploy":
            deploys += 1
            p = dict(p, phase="first deploy" if deploys == 1 else "no-op re-run")
        named.append(p)
    return named


def deploy_times(recorded: list[dict]) -> dict:
    by = {p["phase"]: p for p in recorded}
    first = by["first deploy"]["end"] - by["first deploy"]["start"]
    noop = by["no-op re-run"]["end"] - by["no-op re-run"]["start"]
    return {"hosts": len(by["first deploy"]["pids"]), "first_s": round(first, 1), "noop_s": round(noop, 1),
            "ratio": round(noop / first, 3)}


def received(recorded: list[dict], phase: str) -> dict:
    """Bytes each host received and sent during a phase (its eth0 counters, from the phase before)."""
    index = [p["phase"] for p in recorded].index(phase)
    if index == 0:
        raise SystemExit("no record before %s: run the scenario again (its prepare step records the counters)" % phase)
    before, after = recorded[index - 1], recorded[index]
    return {host: {"rx": after["rx_bytes"][host] - before["rx_bytes"][host],
                   "tx": after["tx_bytes"][host] - before["tx_bytes"][host]} for host in after["rx_bytes"]}


def restarted_hosts(recorded: list[dict], index: int) -> set:
    """The hosts a phase restarted: from its fleet report, or for a phase without one, those whose PID changed."""
    p = recorded[index]
    if p["report"]:
        return {row["host"] for row in p["report"] if row["restarted"]}
    before = recorded[index - 1]["pids"] if index else {}
    return {host for host, pid in p["pids"].items() if before.get(host) != pid}


def rollouts(recorded: list[dict], requests: list[dict], host_every: float) -> list[dict]:
    out = []
    for index, p in enumerate(recorded):
        if p["phase"] == "prepared":
            continue
        inside = [r for r in requests if p["start"] <= r["t"] < p["end"]]
        front = [r for r in inside if r["target"] == "front"]
        if p["phase"] == "first deploy":   # nothing could answer before the first host served
            answered = [i for i, r in enumerate(front) if r["ok"]]
            front = front[answered[0]:] if answered else []
        restarted = restarted_hosts(recorded, index)
        untouched = [r for r in inside if r["target"] not in ("front", *restarted)]
        windows = {}
        for host in sorted(restarted):
            down = [r["t"] for r in inside if r["target"] == host and not r["ok"]]
            windows[host] = round(max(down) - min(down) + host_every, 1) if down else 0.0
        out.append({
            "phase": p["phase"], "rc": int(p["rc"]), "wall_s": round(p["end"] - p["start"], 1),
            "front_sent": len(front), "front_failed": sum(not r["ok"] for r in front),
            "untouched_sent": len(untouched), "untouched_failed": sum(not r["ok"] for r in untouched),
            "restarted": sorted(restarted), "down_s": windows,
            "ready_s": {row["host"]: row["seconds"] for row in p["report"] if row["restarted"]},
            "drained": {row["host"]: row["drained"] for row in p["report"] if row["restarted"]},
        })
    return out


def gate_rows(scenario: str, recorded: list[dict]) -> list[dict]:
    """The speed gate of every start the scenario's deploys made: its figures and what it added to the rollout."""
    out = []
    for p in recorded:
        for row in p["report"]:
            bench = row.get("bench") or {}
            if row["restarted"] and bench.get("elapsed") is not None:
                out.append({"scenario": scenario, "phase": p["phase"], "host": row["host"], "status": row["status"],
                            "reason": row["reason"], "tok_s": bench.get("decode_tokens_per_second"),
                            "acceptance_length": bench.get("acceptance_length"), "gate_s": bench["elapsed"],
                            "ready_s": row["seconds"]})
    return out


def compare_run(directory: Path, log_name: str) -> dict | None:
    """A scenario's compare run: each configuration's seconds, acceptance and tok/s at concurrency 1, the largest
    spread of its repeats, and the canary's seconds out of its front door (from the playbook's last message)."""
    kept = sorted(directory.glob("compare/*/latest.json"))
    if not kept:
        return None
    record = json.loads(kept[-1].read_text())
    log = (directory / log_name).read_text() if (directory / log_name).exists() else ""
    out_s = re.search(r"was out of its front doors for ([0-9.]+) s; the compare run took ([0-9.]+) s", log)
    rows = []
    for result in record["results"]:
        overall = ((result.get("bench") or {}).get("overall") or {}).get("1") or {}
        spreads = [cell["output_tokens_per_second"]["spread"] or 0.0
                   for by in ((result.get("bench") or {}).get("categories") or {}).values() for cell in by.values()
                   if (cell.get("output_tokens_per_second") or {}).get("n", 0) > 1]
        rows.append({"name": result["name"], "status": result["status"], "seconds": result.get("seconds"),
                     "decode_tok_s": overall.get("decode_tokens_per_second"),
                     "output_tok_s": overall.get("output_tokens_per_second"),
                     "acceptance_length": overall.get("acceptance_length"),
                     "max_spread": max(spreads) if spreads else None})
    spreads = [r["max_spread"] for r in rows if r["max_spread"] is not None]
    return {"rows": rows, "recommendation": record["recommendation"]["msg"],
            "out_of_door_s": float(out_s.group(1)) if out_s else None, "wall_s": float(out_s.group(2)) if out_s else None,
            # Two configurations whose medians differ by less than the widest spread of a repeated cell cannot be
            # told apart: that is the smallest speed-up a gate on these measurements can tell from noise.
            "smallest_speedup": round(1.0 + max(spreads), 3) if spreads else None}


def table(rows: list[list], header: list[str]) -> str:
    cells = [header] + [[str(c) for c in row] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in cells)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--default", type=Path, default=REPO / ".build/molecule/default-record")
    parser.add_argument("--fleet", type=Path, default=REPO / ".build/molecule/fleet-record")
    parser.add_argument("--host-every", type=float, default=4.0, help="the probe's seconds between requests to a host")
    parser.add_argument("--watchdog-every", type=float, default=10.0, help="vllm_server_watchdog_interval of the run")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    one, fleet = phases(args.default), phases(args.fleet)
    times = [deploy_times(one), deploy_times(fleet)]
    rolled = rollouts(fleet, lines(args.fleet / "probe.jsonl"), args.host_every)
    first_bytes = received(fleet, "first deploy")
    noop_bytes = received(fleet, "no-op re-run")
    wheelhouse = os.environ.get("LLMOPS_WHEELHOUSE")
    wheelhouse_bytes = sum(f.stat().st_size for f in Path(wheelhouse).iterdir()) if wheelhouse else None

    print("machine: %s, %d CPUs, Python %s" % (platform.platform(), os.cpu_count() or 0, platform.python_version()))
    print("\nDeploy wall time (s), each scenario's first deploy and a no-op re-run (the fleet's idempotence step, the "
          "one host's keyed re-run)")
    print(table([[t["hosts"], t["first_s"], t["noop_s"], "%.0f%%" % (100 * t["ratio"])] for t in times],
                ["hosts", "first deploy", "no-op re-run", "no-op / first"]))
    print("\nRollouts of the %d-host fleet while the probe sent requests (front door every 1 s, each host every %g s)"
          % (times[1]["hosts"], args.host_every))
    print(table([[r["phase"], r["rc"], r["wall_s"], "%d / %d" % (r["front_failed"], r["front_sent"]),
                  "%d / %d" % (r["untouched_failed"], r["untouched_sent"]), ",".join(r["restarted"]) or "-"]
                 for r in rolled],
                ["phase", "rc", "wall s", "front door failed/sent", "untouched hosts failed/sent", "restarted"]))
    print("\nRolling window per host (change rolled with serial 1): out of service as the probe saw it, "
          "vllm_wait's seconds to ready, requests drained before the stop")
    change = next(r for r in rolled if r["phase"] == "change")
    print(table([[h, change["down_s"][h], change["ready_s"][h], change["drained"][h]] for h in change["restarted"]],
                ["host", "down s", "to ready s", "drained"]))
    gates = gate_rows("1 host", one) + gate_rows("%d hosts" % times[1]["hosts"], fleet)
    print("\nSpeed gate after each start (vllm_bench: vllm bench serve of the serving venv, then the gates): "
          "single-stream decode tok/s, mean acceptance length, the gate's seconds against the seconds to ready")
    print(table([[g["scenario"], g["phase"], g["host"], g["status"] if g["reason"] in ("", g["status"]) else g["reason"],
                  g["tok_s"], g["acceptance_length"], g["gate_s"], g["ready_s"],
                  "%.0f%%" % (100 * g["gate_s"] / g["ready_s"]) if g["ready_s"] else "-"] for g in gates],
                ["scenario", "phase", "host", "outcome", "tok/s", "accept len", "gate s", "to ready s", "gate / ready"]))
    faults = [p for p in one if p["phase"] in ("engine killed", "engine hung", "rebooted")]
    if faults:
        print("\nFaults between deploys (1 host, no deploy run): from the fault (EngineCore SIGKILL, SIGSTOP, the "
              "container restarted) to a completion answered again")
        print(table([[p["phase"], round(p["end"] - p["start"], 1)] for p in faults], ["fault", "serving again after s"]))
    hung = next((p for p in fleet if p["phase"] == "hung" and p.get("marks")), None)
    if hung:
        print("\nA hung engine behind the front door (%d hosts, no deploy run; EngineCore SIGSTOP): seconds from the "
              "hang until" % times[1]["hosts"])
        print(table([[name, round(at - hung["start"], 1)] for name, at in sorted(hung["marks"].items(), key=lambda m: m[1])],
                    ["event", "after s"]))
    cost = args.default / "watchdog-cost.txt"
    if cost.exists():
        runs = [float(m.group(1)) * (1000.0 if m.group(2) == "s" else 1.0)
                for m in re.finditer(r"Consumed ([0-9.]+)(ms|s) CPU time", cost.read_text())]
        if runs:
            median = sorted(runs)[len(runs) // 2]
            print("\nLiveness watchdog on the host (systemd's accounting of each run): %d runs, median %.0f ms CPU per "
                  "run, %.1f s CPU per hour at one run every %g s" % (len(runs), median, median * 3600 / args.watchdog_every / 1000,
                                                                      args.watchdog_every))
    compares = {"1 host": compare_run(args.default, "compare.log")}
    for scenario, run in compares.items():
        if not run:
            continue
        print("\nCompare run (%s): each configuration started through the unit and measured on the prompt set; "
              "the canary out of its front door %s s of a %s s run" % (scenario, run["out_of_door_s"], run["wall_s"]))
        print(table([[r["name"], r["status"], r["seconds"], r["decode_tok_s"], r["output_tok_s"], r["acceptance_length"],
                      "%.0f%%" % (100 * r["max_spread"]) if r["max_spread"] is not None else "-"] for r in run["rows"]],
                    ["configuration", "status", "wall s", "decode tok/s (1)", "aggregate tok/s (1)", "accept len",
                     "widest spread"]))
        print("recommendation: %s" % run["recommendation"])
        if run["smallest_speedup"]:
            print("smallest speed-up a gate can tell from this noise: %.2fx" % run["smallest_speedup"])
    print("\nBytes each host received / sent (its eth0) during the first deploy and the no-op re-run; the "
          "controller sends the packed wheelhouse once per host, no host downloads from an index")
    print(table([[h, first_bytes[h]["rx"], first_bytes[h]["tx"], noop_bytes[h]["rx"], noop_bytes[h]["tx"]]
                 for h in first_bytes], ["host", "first rx", "first tx", "no-op rx", "no-op tx"]))
    if wheelhouse_bytes is not None:
        print("wheelhouse on the controller: %d bytes" % wheelhouse_bytes)

    misses = ["no-op re-run of %d host(s) took %.0f%% of the first deploy (goal: at most %.0f%%)"
              % (t["hosts"], 100 * t["ratio"], 100 * NOOP_GOAL) for t in times if t["ratio"] > NOOP_GOAL]
    misses += ["%s: %d request(s) failed through the front door" % (r["phase"], r["front_failed"])
               for r in rolled if r["front_failed"]]
    misses += ["%s: %d request(s) failed on hosts not restarted" % (r["phase"], r["untouched_failed"])
               for r in rolled if r["untouched_failed"]]
    if args.json:
        fault_seconds = [{"fault": p["phase"], "seconds": round(p["end"] - p["start"], 1)} for p in faults]
        args.json.write_text(json.dumps({"deploys": times, "rollouts": rolled, "gates": gates, "faults": fault_seconds,
                                         "first_deploy_bytes": first_bytes, "noop_bytes": noop_bytes,
                                         "wheelhouse_bytes": wheelhouse_bytes, "compare": compares}, indent=2))
    print("\n" + ("\n".join("MISSED: " + m for m in misses) if misses else "all goals met"))
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
