# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The server configurations a compare run measures side by side on one canary host (playbooks/compare.yml).

Each configuration is a name, the speculative decoding it runs and, optionally, vLLM arguments over the inventory's:

    - {name: no-speculation, speculative: {}}
    - {name: ngram-4, speculative: {method: ngram, num_speculative_tokens: 4, prompt_lookup_max: 4}}
    - {name: dflash-k8, speculative: {method: dflash, num_speculative_tokens: 8}}
    - {name: as-deployed}

``speculative`` holds ``--speculative-config`` keys: ``method``, ``model`` and ``num_speculative_tokens`` become the
vllm_server role's own variables, every other key goes to ``vllm_server_speculative_extra``. An empty mapping (or an
empty method) runs without speculation; without ``speculative`` the inventory's settings are kept. A DFlash
configuration without ``model`` uses the inventory's drafter; another method without one names no model (n-gram
needs none). ``args`` is merged over ``vllm_server_args``. Whether the release accepts a configuration is not decided
here: the vllm_server role's preflight (the release's rules) and staging (vLLM's own config check in the venv that
serves) check each one with these overrides, before the canary changes.

The methods that serve as a baseline are the ones that are not DFlash, unless a configuration says otherwise
(``baseline: true|false``): the compare run is there to tell whether DFlash beats them.
"""

from __future__ import annotations

from ansible_collections.llmops.vllm.plugins.module_utils.report import intervals

import re
import statistics

PREFIX = "vllm_compare_configurations"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
KEYS = ("name", "speculative", "args", "baseline")
# The --speculative-config keys the vllm_server role names as variables of its own.
OWN = {"method": "speculative_method", "model": "speculative_model", "num_speculative_tokens": "num_speculative_tokens"}
CANDIDATE_METHOD = "dflash"


def problems(configurations):
    """What is wrong with the list, each naming the variable and the entry."""
    if not isinstance(configurations, list) or not configurations:
        return ["%s must be a non-empty list of configurations ({name, speculative, args}), got %r."
                % (PREFIX, configurations)]
    out, seen = [], set()
    for index, entry in enumerate(configurations):
        where = "%s[%d]" % (PREFIX, index)
        if not isinstance(entry, dict):
            out.append("%s must be a mapping with a name, got %r." % (where, entry))
            continue
        name = entry.get("name")
        if not isinstance(name, str) or not NAME.match(name):
            out.append("%s.name must be letters, digits, '.', '_' and '-' (at most 64, a letter or digit first), got %r."
                       % (where, name))
        elif name in seen:
            out.append("%s.name %r is used twice: each configuration's results are kept under its name." % (where, name))
        else:
            seen.add(name)
            where = "%s[%d] (%s)" % (PREFIX, index, name)
        unknown = sorted(set(entry) - set(KEYS))
        if unknown:
            out.append("%s has unknown keys %s; known: %s." % (where, ", ".join(map(str, unknown)), ", ".join(KEYS)))
        spec = entry.get("speculative", {})
        if spec is not None and not isinstance(spec, dict):
            out.append("%s.speculative must be a mapping of --speculative-config keys ({} for none), got %r."
                       % (where, spec))
        elif spec:
            method = spec.get("method")
            if method is not None and not isinstance(method, str):
                out.append("%s.speculative.method must be a string, got %r." % (where, method))
            tokens = spec.get("num_speculative_tokens")
            if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1):
                out.append("%s.speculative.num_speculative_tokens must be a positive integer, got %r." % (where, tokens))
            if method and not tokens and method != CANDIDATE_METHOD:
                out.append("%s.speculative.num_speculative_tokens must be set for method %s." % (where, method))
        args = entry.get("args", {})
        if not isinstance(args, dict):
            out.append("%s.args must be a mapping of vLLM CLI names to values, merged over vllm_server_args, got %r."
                       % (where, args))
        if "baseline" in entry and not isinstance(entry["baseline"], bool):
            out.append("%s.baseline must be true or false, got %r." % (where, entry["baseline"]))
    return out


def overrides(entry, deployed):
    """The vllm_server variables (without their prefix) one configuration sets over the inventory's.

    deployed: the inventory's {speculative_method, speculative_model, num_speculative_tokens, speculative_extra,
    args}."""
    out = {"args": dict(deployed.get("args") or {}, **(entry.get("args") or {}))}
    if "speculative" not in entry:
        return out
    spec = dict(entry["speculative"] or {})
    method = spec.pop("method", None) or ""
    if not method:
        # The server role drops --speculative-config when the method is empty; its K stays the inventory's, which
        # the role's argument_specs require to be an integer.
        out.update(speculative_method="", speculative_model="", speculative_extra={})
        return out
    model = spec.pop("model", None)
    if model is None:
        model = (deployed.get("speculative_model") or "") if method == CANDIDATE_METHOD else ""
    tokens = spec.pop("num_speculative_tokens", None)
    if tokens is None and method == deployed.get("speculative_method"):
        tokens = deployed.get("num_speculative_tokens")
    out.update(speculative_method=method, speculative_model=model, num_speculative_tokens=tokens,
               speculative_extra=spec)
    return out


def settings(entry, deployed):
    """The inventory's settings with one configuration's over them: every key of ``deployed``, and ``env``, what the
    configuration adds to the server's environment (the A/A twin's marker, with_twin; a block's own, schedule)."""
    env = dict(TWIN_ENV) if entry.get("twin") else {}
    if entry.get("fresh") is not None:
        env[BLOCK_ENV] = str(entry["fresh"])
    return dict(deployed, env=env, **overrides(entry, deployed))


def describe(entry, deployed):
    """What a result keeps of its configuration: its name, method ('' for none), K and whether it is a baseline."""
    settings = overrides(entry, deployed)
    method = settings.get("speculative_method", deployed.get("speculative_method")) or ""
    tokens = settings.get("num_speculative_tokens", deployed.get("num_speculative_tokens")) if method else None
    extra = (settings.get("speculative_extra", deployed.get("speculative_extra")) or {}) if method else {}
    baseline = entry.get("baseline", method != CANDIDATE_METHOD)
    return {"name": entry["name"], "method": method, "k": int(tokens or 0) if method else 0,
            "extra": dict(extra), "baseline": bool(baseline), "args": dict(entry.get("args") or {})}


def order(configurations):
    """The order the canary runs them in: the inventory's own settings (no ``speculative``, no ``args``) last, so the
    run that ends on them needs no start of its own."""
    as_deployed = [c for c in configurations if "speculative" not in c and not c.get("args")]
    return [c for c in configurations if c not in as_deployed] + as_deployed


AA_SUFFIX = "-again"
# What sets the A/A twin apart from the configuration it repeats: one variable in the server's environment that vLLM
# does not read. Its unit differs, so the twin is started afresh in every round, as a configuration is: with the same
# unit it would be measured on the process the block before left running, and its interval would show the noise of
# one process, not the noise between starts that every other comparison of the run includes.
TWIN_ENV = {"LLMOPS_COMPARE_TWIN": "1"}
# What sets a block apart from the block before it when both measure the same configuration (a round begins on the
# one the round before ended on): its number, in one more variable vLLM does not read. So every block starts afresh,
# the A/A twin's and its original's alike. A twin always started against an original that ran on in one round of
# three read 0.71x [0.53, 0.96] in the demo, an A/A that excluded 1.00 (the original's two blocks run on read 599 and
# 674 tok/s, its four started 413-624).
BLOCK_ENV = "LLMOPS_COMPARE_BLOCK"
RUN_OPTIONS = ("vllm_compare_rounds", "vllm_compare_aa", "vllm_compare_target", "vllm_compare_budget_s")


def _plain(value):
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in ("true", "yes", "false", "no"):
            return text.lower() in ("true", "yes")
        try:
            return int(text)
        except ValueError:
            try:
                return float(text)
            except ValueError:
                return value
    return value


def run_problems(run, configurations=None):
    """What is wrong with the run's own settings (vllm_compare_rounds, _aa, _target, _budget_s), each named. ``run``
    holds those that are set."""
    out = []
    # -e name=value on the command line gives strings: read as the playbook reads them (| int, | float, | bool).
    run = dict((name, _plain(value)) for name, value in run.items())
    rounds = run.get("vllm_compare_rounds", 3)
    if isinstance(rounds, bool) or not isinstance(rounds, int) or not 1 <= rounds <= 100:
        out.append("vllm_compare_rounds must be a whole number from 1 to 100 (one round gives no interval), got %r."
                   % (rounds,))
    aa = run.get("vllm_compare_aa", True)
    if not isinstance(aa, bool):
        out.append("vllm_compare_aa must be true or false, got %r." % (aa,))
    target = run.get("vllm_compare_target", 0.05)
    if isinstance(target, bool) or not isinstance(target, (int, float)) or not 0 < target < 1:
        out.append("vllm_compare_target must be a relative half width between 0 and 1, such as 0.05, got %r." % (target,))
    budget = run.get("vllm_compare_budget_s", 0)
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or budget < 0:
        out.append("vllm_compare_budget_s must be seconds, 0 for no budget, got %r." % (budget,))
    if aa is True and isinstance(configurations, list) and configurations and isinstance(configurations[0], dict):
        twin = "%s%s" % (configurations[0].get("name"), AA_SUFFIX)
        if twin in [c.get("name") for c in configurations if isinstance(c, dict)]:
            out.append("vllm_compare_configurations has a configuration named %s, the name vllm_compare_aa gives the "
                       "A/A twin of the first one: rename it, or set vllm_compare_aa to false." % twin)
    return out


def with_twin(configurations):
    """The configurations and an A/A twin: the first one again under another name, measured in every round like the
    others, so that its interval over the first (module_utils/report/rounds.noise_floor) is this host's noise floor.
    The twin goes second: the as-deployed configuration stays last. It is marked ``twin``: its server carries TWIN_ENV,
    so it starts afresh in every round."""
    if not configurations:
        return []
    first = configurations[0]
    return [first, dict(first, name=first["name"] + AA_SUFFIX, twin=True)] + list(configurations[1:])


def schedule(configurations, rounds):
    """Each block of the run in order: {configuration, round, first} for ``rounds`` rounds, counterbalanced
    (module_utils/report/intervals.schedule) and ending on the last configuration; ``first`` marks a round's first
    block, where the run decides whether the round is needed."""
    by_name = dict((c["name"], c) for c in configurations)
    rounds = max(int(rounds), 1)
    names = [c["name"] for c in configurations]
    # The last round in the given order, so the run ends on the as-deployed configuration (order()). A round begins on
    # the configuration the one before ended on, which runs on. With two configurations each runs on at every other
    # round's start (the first block on the deploy's server), alike; with more, those between never would, so that
    # block is marked ``fresh`` (BLOCK_ENV) and starts afresh, as every other block of the run does.
    order = intervals.schedule(names if rounds % 2 else names[::-1], rounds)
    fresh = len(names) > 2
    return [{"configuration": dict(by_name[name], fresh=i) if fresh and i and order[i - 1][1] == name else by_name[name],
             "round": r, "first": i == 0 or order[i - 1][0] != r}
            for i, (r, name) in enumerate(order)]


def _serves(deployed, entry):
    """What a server started for ``entry`` runs, comparable across blocks (K as a number, as the unit has it)."""
    described = describe(entry, deployed)
    model = settings(entry, deployed).get("speculative_model") if described["method"] else ""
    return (described["method"], described["k"], sorted(described["extra"].items()), sorted(described["args"].items()),
            model or "", bool(entry.get("twin")), entry.get("fresh"))


def expected(blocks, deployed, runs_per_block, kept):
    """How long a run of ``blocks`` (schedule()) will take, timed from an earlier run of the same key (its kept
    record, or None): {seconds, starts, blocks, start_s, run_s, from_run}, or {seconds: None, why}.

    A block measures ``runs_per_block`` runs (categories x concurrencies x repeats); it starts a server first when
    its settings are not those of the block before it (the first: not the inventory's, which the canary runs), and
    the run ends on the inventory's settings. The earlier run gives the time of one measured run and of one start
    (what a block with a start took beyond its measurement): from each block's own measurement time where it kept one,
    else from its blocks without a start; the estimate is that of the earlier run's host and workload, so it says
    which run it comes from."""
    results = [(r["seconds"], max(len((r.get("bench") or {}).get("runs") or []), 1), bool(r.get("restarted")),
                r.get("measure_seconds") if isinstance(r.get("measure_seconds"), (int, float)) else None)
               for r in (kept or {}).get("results") or []
               if isinstance(r, dict) and r.get("status") == "ready" and isinstance(r.get("seconds"), (int, float))]
    timed = [(seconds, runs, measured) for seconds, runs, restarted, measured in results if restarted]
    if timed and all(measured is not None for _s, _r, _x, measured in results):
        run_s = statistics.median([measured / runs for _s, runs, _x, measured in results])
        start_s = statistics.median([seconds - measured for seconds, _r, measured in timed])
    else:
        stay = [seconds / runs for seconds, runs, restarted, _m in results if not restarted]
        if not stay or not timed:
            return {"seconds": None, "why": "no earlier run on this key timed a block with and without a start"}
        run_s = statistics.median(stay)
        start_s = statistics.median([seconds - run_s * runs for seconds, runs, _m in timed])
    inventory = _serves(deployed, {"name": ""})
    previous, starts = inventory, 0
    for block in blocks:
        now = _serves(deployed, block["configuration"])
        starts += now != previous
        previous = now
    starts += previous != inventory
    seconds = starts * max(start_s, 0.0) + len(blocks) * max(int(runs_per_block), 1) * run_s
    return {"seconds": round(seconds, 1), "starts": starts, "blocks": len(blocks), "start_s": round(start_s, 1),
            "run_s": round(run_s, 1), "from_run": (kept or {}).get("run")}
