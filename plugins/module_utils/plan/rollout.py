# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The roll's decisions for one host, from what is on it: restart or not and why, check the command again or not,
the result record, and what a failed start says.

A restart has three reasons only, all read on the host (module_utils/probe/inputs): the running process was
started with other inputs than those the host holds now, it is not running, or it failed. None of them depends on
what an earlier step of the same run did, so a run killed anywhere leaves a reason the next run finds.

The checks after a start (the wait, the smoke run, the speed gate, the return to traffic, the last-good record) are
part of what should run: a server whose inputs are not those of the last start that passed them (the last-good
record's digest) gets them again, without a restart, and is rolled back if it fails them. A run killed between the
start and the record leaves that reason too.
"""

from __future__ import annotations

import re

# The part names of roles/vllm_server's inputs (its vars' _vllm_server_input_parts), in the order a reason names
# them; "<part> changed" is the reason a changed part gives (changed()).
PARTS = ("unit", "env file", "drafter or model files", "virtualenv")
# systemd states in which the unit's process serves or is about to (a reload keeps the process).
RUNNING = ("active", "reloading")
# Why a server that needs no restart goes through the checks after a start.
UNCHECKED = "its checks after the start did not finish (a run stopped between its start and its last-good record)"


def failed_reason(status, failed_why=None):
    """Why a unit in the failed state stopped: a crash loop its start limit ended, or one failed start, with the
    reason vllm_wait read from the end of its log."""
    status = status or {}
    result = str(status.get("Result") or "")
    restarts = int(status.get("NRestarts") or 0)
    if restarts > 0:
        text = "was in a crash loop (%s after %d restarts, stopped by its start limit)" % (result, restarts)
    else:
        text = "was failed (%s)" % result
    why = failed_why or {}
    if why.get("reason"):
        line = str(why.get("root_cause_line") or "")
        text += ": " + str(why["reason"]) + ((", " + (line if len(line) <= 160 else line[:157] + "...")) if line else "")
    return text


def changed_parts(inputs, history):
    """The parts whose digest differs between the running process's inputs (when recorded) and the host's; None
    when the running process's parts are not known."""
    running = (history or {}).get(inputs.get("running_digest") or "")
    if not isinstance(running, dict):
        return None
    wanted = inputs.get("parts") or {}
    names = [name for name in PARTS if running.get(name) != wanted.get(name)]
    names += sorted(name for name in set(wanted) | set(running) if name not in PARTS and running.get(name) != wanted.get(name))
    return names


def restart_reasons(status, inputs, history=None, failed_why=None, previews=()):
    """Why the server must start (again), or [] when it runs exactly the inputs on the host.

    status: the unit's systemd properties; inputs: vllm_server_inputs's result; history: {digest: parts} of the
    identities recorded before starts; previews: check mode's own reasons (the files a real run would install)."""
    status = status or {}
    inputs = inputs or {}
    state = str(status.get("ActiveState") or "inactive")
    reasons = list(previews)
    if state == "failed":
        reasons.append(failed_reason(status, failed_why))
    elif state not in RUNNING:
        reasons.append("not running")
    elif not inputs.get("running_digest"):
        reasons.append("its inputs are not known (started by hand or by a release that did not record them)")
    elif inputs["running_digest"] != inputs.get("digest"):
        names = changed_parts(inputs, history)
        if names:
            reasons.extend(changed(dict((name, True) for name in names), strict=False))
        else:
            reasons.append("its inputs changed since it started")
    unique = []
    for reason in reasons:
        if reason not in unique:
            unique.append(reason)
    return unique


def changed(parts, strict=True):
    """"<part> changed" for each part flagged true, in PARTS' order, then any other part named: the reason a real
    run reads from the host's digests (restart_reasons), and check mode's for the files a real run would install.
    strict: a name that is not one of PARTS is a ValueError naming it."""
    unknown = sorted(name for name in parts if name not in PARTS)
    if strict and unknown:
        raise ValueError("not a part of the server's inputs: %s (the parts: %s)" % (", ".join(unknown), ", ".join(PARTS)))
    return ["%s changed" % name for name in list(PARTS) + unknown if name in parts and flag(parts[name])]


def unchecked(status, inputs):
    """The unit runs a process started with the host's inputs, and no start of those inputs passed its checks."""
    inputs = inputs or {}
    return _serves(status, inputs.get("running_digest"), inputs) and inputs.get("running_digest") != inputs.get(
        "confirmed", inputs.get("running_digest"))


def plan(status, inputs, history=None, checked="", failed_why=None, previews=(), check_mode=False):
    """The roll's decision: {'restart': bool, 'reasons': [...], 'check': bool, 'checks': bool}.

    check: run vLLM's config check before the start, unless the same inputs were checked already (staging records
    the digest it checked). Check mode always checks, with the venv that is there. checks: run the checks after a
    start (a restart, or a server that never passed them: UNCHECKED)."""
    reasons = restart_reasons(status, inputs, history, failed_why, previews)
    digest = (inputs or {}).get("digest") or ""
    due = not reasons and unchecked(status, inputs)
    return {"restart": bool(reasons), "reasons": reasons or ([UNCHECKED] if due else []),
            "check": bool(reasons) and (check_mode or not digest or digest != (checked or "").strip()),
            "checks": bool(reasons) or due}


def _serves(status, digest, inputs):
    """The unit runs a process started with exactly this digest."""
    return (str((status or {}).get("ActiveState") or "") in RUNNING
            and bool(inputs.get("running_digest")) and inputs.get("running_digest") == digest)


def stage_check(status, inputs, check_mode=False):
    """Staging checks the new command unless the host serves these very inputs already (the running server is
    the proof; the check takes 20-30 s, the longest step of a no-op re-run)."""
    inputs = inputs or {}
    return check_mode or not _serves(status, inputs.get("digest"), inputs)


def stage_restarts(status, inputs, check_mode=False):
    """Whether the roll will start this host's server again, or take it through the checks after a start, as
    staging can tell: the host's identity once the roll has installed what staging left (staged_digest) against
    the running server's. Such hosts roll in batches, never all at once. Check mode starts nothing."""
    inputs = inputs or {}
    staged = inputs.get("staged_digest") or inputs.get("digest")
    return not check_mode and (not _serves(status, staged, inputs) or unchecked(status, inputs))


def batches(hosts, restarts, groups=None, serial=1):
    """The hosts of a rollout in two lists, in the order given: those whose roll only confirms their server (all at
    once) and those it starts again (in batches). restarts: {host: its vllm_server_roll_restarts}; a host without
    one (it was not staged: unreachable, or left out by --limit) is left to the batches, which skip what did not
    answer, so nothing is started at once that was not known not to start.

    groups: {host: its serving group, or ""}: a group's hosts are one unit (module_utils/plan/group). They are
    confirmed only all together, rolled next to each other in one batch (a group starts as one), and count as one
    toward ``serial`` (vllm_deploy_serial: a number of units, or a percentage of them). serial: the batch sizes in
    hosts for the play's ``serial:``; without a group, ``serial`` as given."""
    groups = groups or {}
    units, index = [], {}
    for host in hosts:
        name = groups.get(host) or ""
        if name and name in index:
            units[index[name]].append(host)
        else:
            if name:
                index[name] = len(units)
            units.append([host])
    confirm = [host for unit in units if all(restarts.get(h) is False for h in unit) for host in unit]
    rolled = [unit for unit in units if any(h not in confirm for h in unit)]
    out = {"confirm": confirm, "roll": [host for unit in rolled for host in unit], "serial": [serial]}
    if any(len(unit) > 1 for unit in rolled):
        out["serial"] = _unit_batches([len(unit) for unit in rolled], serial)
    return out


def _unit_batches(sizes, serial):
    """Batch sizes in hosts, ``serial`` units at a time (a whole number, or a percentage of the units)."""
    text = str(serial).strip()
    if text.endswith("%") and text[:-1].strip().isdigit():
        per = max(1, len(sizes) * int(text[:-1]) // 100)
    elif text.isdigit() and int(text) > 0:
        per = int(text)
    else:
        per = 1
    return [sum(sizes[i:i + per]) for i in range(0, len(sizes), per)] or [1]


def result(outcome, decision, facts, failure=None):
    """The one record a host publishes as vllm_server_result, for a start, a confirmation or a failure.

    outcome: vllm_wait's result (the start's or the confirmation's); decision: plan()'s; facts: endpoint, version,
    model, speculative_method, drained, bench, elapsed (a start's seconds to ready), check_mode; failure:
    {status, reason, elapsed, phases, hint, bench, refused, rolled_back} of a failed start."""
    outcome = outcome or {}
    facts = facts or {}
    decision = decision or {"restart": False, "reasons": []}
    record = {
        "restart_reasons": list(decision.get("reasons") or []),
        "endpoint": facts.get("endpoint", ""),
        "drained": int(facts.get("drained") or 0),
        "version": facts.get("version", ""),
    }
    if facts.get("group"):
        # A rank of a serving group (module_utils/plan/group): its name, rank and head, a failed start's too.
        record["group"] = dict(facts["group"])
    if failure:
        record.update(status=failure.get("status") or "failed", reason=failure.get("reason") or "the start failed",
                      elapsed=failure.get("elapsed") or 0, phases=failure.get("phases") or {}, pid=0,
                      restarted=not flag(failure.get("refused")), rolled_back=flag(failure.get("rolled_back")),
                      hint=failure.get("hint") or "", bench=failure.get("bench") or {})
        return record
    check_mode = flag(facts.get("check_mode"))
    restarted = bool(decision.get("restart")) and not check_mode
    started = _number(facts.get("elapsed"))
    record.update(
        status="check mode" if check_mode else outcome.get("status") or "unknown",
        reason=outcome.get("reason") or "",
        elapsed=started if restarted and started is not None else outcome.get("elapsed") or 0,
        phases=outcome.get("phases") or {}, pid=int(outcome.get("pid") or 0), restarted=restarted,
        rolled_back=False, bench=facts.get("bench") or {},
        # What this server serves, for the fleet's Prometheus targets.
        model=facts.get("model", ""), speculative_method=facts.get("speculative_method", ""))
    return record


def _number(value):
    try:
        return float(value) if value not in (None, "", "None") else None
    except (TypeError, ValueError):
        return None


def flag(value):
    """A boolean that may have come through a template as text."""
    return value is True or str(value).lower() in ("true", "yes", "1")


def failure_message(failure, service, venv, restored, refused, rollback_wait=None):
    """What a failed start says: why, its root cause and hint, and what the rollback did."""
    failure = failure or {}
    # A group's rank failed by another rank has no detail of its own: its reason names that rank and why.
    head = "%s%s | root cause: %s | hint: %s | " % (
        failure.get("reason") or "the start failed", (": " + failure["detail"]) if failure.get("detail") else "",
        failure.get("root_cause_line") or "not found in the log", failure.get("hint") or "none")
    files = ", ".join(restored)
    if refused:
        tail = "Refused before any restart by the vLLM of %s%s; %s was not restarted." % (
            venv, (": put back the previous " + files) if restored else "", service)
    elif not restored:
        tail = "%s was stopped: there was no previous unit, env file or drafter config to go back to." % service
    elif (rollback_wait or {}).get("status") == "ready":
        tail = "Rolled back to the previous %s; the previous server is ready again." % files
    else:
        wait = rollback_wait or {}
        tail = "Rolled back to the previous %s, but the previous server is not ready either: %s: %s." % (
            files, wait.get("reason") or "unknown", wait.get("detail") or wait.get("msg") or "")
    return head + tail


# What a host's inventory name may hold: it is written into the front door's configuration (HAProxy's server names
# take letters, digits, '-', '_', '.' and ':'), the Prometheus targets' labels and the alert rules' expressions.
HOST_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,255}$")


def host_name_problems(hosts, group):
    """Sentences naming each host of ``group`` whose inventory name could not be written where the deploy writes it."""
    bad = [host for host in hosts or [] if not isinstance(host, str) or not HOST_NAME.match(host)]
    return ["The inventory names the host%s %s in %s: a host's name is written into the front door's configuration, "
            "the Prometheus targets and the alert rules, so it may hold only letters, digits, '-', '_', '.' and ':' "
            "(give its address in ansible_host)." % ("s" if len(bad) > 1 else "", ", ".join(repr(h) for h in bad), group)
            ] if bad else []


def chosen(value, group, variable):
    """The hosts an operation names (vllm_remove_hosts, vllm_rollback_hosts: a list, or a comma-separated string)
    against the group's hosts. Returns {'chosen': [...], 'others': [...] in the group's order, 'problems': [...]}
    naming ``variable``. (Not --limit: it would leave out the front doors and the controller's report.)"""
    if isinstance(value, str):
        names = [name.strip() for name in value.split(",") if name.strip()]
    elif isinstance(value, (list, tuple)) and all(isinstance(name, str) for name in value):
        names = [name.strip() for name in value if name.strip()]
    else:
        return {"chosen": [], "others": list(group), "problems": [
            "%s must be a list of host names (or one string, comma-separated), got %r." % (variable, value)]}
    problems = []
    if not names:
        problems.append("%s names no host: say which hosts, e.g. -e %s=gpu-node-2." % (variable, variable))
    unknown = [name for name in names if name not in group]
    if unknown:
        problems.append("%s names %s, not in the group vllm_servers (it has: %s)."
                        % (variable, ", ".join(unknown), ", ".join(group) or "no host"))
    return {"chosen": [host for host in group if host in names], "others": [host for host in group if host not in names],
            "problems": problems}
