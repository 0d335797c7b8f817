"""Each release's rules on both sides of their boundary, as read from that release's source."""

from __future__ import annotations

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.plan.rules import (
    ServeSettings,
    draft_room,
    env_problems,
    parse_release,
    problems,
    speculative_keys,
)


def check(release, flavor="gpu", **settings):
    base = dict(speculative_method="dflash", speculative_model="/opt/vllm/drafters/d", num_speculative_tokens=4)
    base.update(settings)
    return problems(ServeSettings(release, flavor, **base))


@pytest.mark.parametrize("release", ["0.20.0", "0.20.2", "0.24.0", "0.27.1"])
@pytest.mark.parametrize("batched, seqs, tokens, accepted", [
    (512, 8, 4, True),
    (20, 8, 4, False),             # 20 - 3 x 8 < 0
    (25, 8, 4, True),              # 25 - 3 x 8 = 1
    (24, 8, 4, False),             # 24 - 3 x 8 = 0
    (8192, 1024, 15, False),       # the user's first launch on 0.20: 8192 - 14 x 1024 = -6144
    (32768, 1024, 15, True),
    (14337, 1024, 15, True),
    (14336, 1024, 15, False),
])
def test_0_20_to_0_27_count_k_minus_1_slots_per_sequence(release, batched, seqs, tokens, accepted):
    found = check(release, max_num_batched_tokens=batched, max_num_seqs=seqs, num_speculative_tokens=tokens)
    assert (found == []) is accepted, found
    if not accepted:
        assert "vllm_server_max_num_batched_tokens is too small" in found[0]
        assert "at least %d" % ((tokens - 1) * seqs + 1) in found[0]


@pytest.mark.parametrize("release, flavor", [("0.28.0", "gpu"), ("0.32.0", "gpu"), ("0.32.0+cpu", "cpu")])
@pytest.mark.parametrize("batched, seqs, tokens, accepted", [
    (512, 8, 4, True),
    (20, 8, 4, True),              # 0.20 refuses it; 0.28 on reserves K slots, not per sequence
    (8192, 1024, 15, True),        # vLLM's defaults with 15 tokens: fine from 0.28 on
    (5, 1, 4, True),
    (4, 1, 4, False),              # "does not have enough slots ... max_num_batched_tokens=4 and scheduled_token_delta=4"
])
def test_0_28_to_0_32_and_the_cpu_build_reserve_k_slots(release, flavor, batched, seqs, tokens, accepted):
    found = check(release, flavor, max_num_batched_tokens=batched, max_num_seqs=seqs, num_speculative_tokens=tokens)
    assert (found == []) is accepted, found
    if not accepted:
        assert "does not have enough slots" in found[0] and "at least 5" in found[0]


@pytest.mark.parametrize("batched, accepted", [(5, False), (6, True)])
def test_0_33_reserves_k_plus_1_lookahead_tokens_for_dflash(batched, accepted):
    assert (check("0.33.0", max_num_batched_tokens=batched, max_num_seqs=1) == []) is accepted


def test_vllms_defaults_count_when_the_flags_are_unset():
    found = check("0.20.2", num_speculative_tokens=15)
    assert "8192 (vLLM's default) - 14 x 1024 (vLLM's default) = -6144" in found[0]
    assert check("0.32.0", num_speculative_tokens=15) == []
    # the CPU engine: 2048 and 128 per rank
    assert check("0.20.2", "cpu", num_speculative_tokens=17, tensor_parallel_size=1) != []
    assert check("0.20.2", "cpu", num_speculative_tokens=16, tensor_parallel_size=1) == []


def test_max_num_batched_tokens_below_max_num_seqs():
    assert "must be at least vllm_server_max_num_seqs" in check("0.32.0", max_num_batched_tokens=64, max_num_seqs=128)[0]
    # an unset max_num_seqs follows a small max_num_batched_tokens down
    assert check("0.32.0", max_num_batched_tokens=64) == []


@pytest.mark.parametrize("release, method, tokens, room", [
    ("0.20.2", "dflash", 15, (14, True)),
    ("0.20.2", "eagle3", 15, (0, True)),
    ("0.20.2", "draft_model", 5, (1, True)),
    ("0.32.0", "dflash", 15, (15, False)),
    ("0.32.0", "dspark", 15, (14, False)),
    ("0.32.0", "ngram", 5, (0, False)),
    ("0.33.0", "dflash", 15, (16, False)),
    ("0.33.0", "qwen3_5_mtp", 3, (3, False)),
])
def test_draft_room_by_method(release, method, tokens, room):
    assert draft_room(parse_release(release), method, tokens) == room


@pytest.mark.parametrize("release, key, known", [
    ("0.20.2", "attention_backend", False),
    ("0.21.0", "attention_backend", True),
    ("0.20.2", "speculative_token_tree", True),
    ("0.21.0", "speculative_token_tree", False),
    ("0.25.0", "use_heterogeneous_vocab", True),
    ("0.24.0", "use_heterogeneous_vocab", False),
    ("0.32.0", "enable_adaptive_verification", True),
    ("0.33.0", "fly_window_size", True),
    ("0.32.0", "fly_window_size", False),
    # 0.34.0 dropped two keys (its SpeculativeConfig no longer has them)
    ("0.33.0", "disable_padded_drafter_batch", True),
    ("0.34.0", "disable_padded_drafter_batch", False),
    ("0.34.0", "use_heterogeneous_vocab", False),
    ("0.34.0", "speculator_options", True),
])
def test_speculative_keys_by_release(release, key, known):
    assert (key in speculative_keys(parse_release(release))) is known


def test_a_key_a_release_dropped_names_the_last_release_that_took_it():
    found = check("0.34.0", max_num_batched_tokens=32768, speculative_extra={"disable_padded_drafter_batch": True})
    assert "does not accept: disable_padded_drafter_batch" in found[0]
    assert "disable_padded_drafter_batch was last accepted by vLLM 0.33.0." in found[0]


def test_unknown_and_forbidden_speculative_keys_name_the_variable():
    found = check("0.20.2", max_num_batched_tokens=32768, speculative_extra={"attention_backend": "flash_attn"})
    assert "vllm_server_speculative_extra has keys vLLM 0.20.2 does not accept: attention_backend" in found[0]
    found = check("0.32.0", speculative_extra={"tensor_parallel_size": 2})
    assert "must not set tensor_parallel_size" in found[0] and "draft_tensor_parallel_size" in found[0]


def test_speculative_tokens_drafter_and_release():
    assert "num_speculative_tokens must be greater than 0" in check("0.20.2", num_speculative_tokens=0)[0]
    assert "needs vllm_server_speculative_model" in check("0.20.2", speculative_model="")[0]
    assert "vLLM 0.20.0 or later" in check("0.19.1")[0]
    assert problems(ServeSettings("0.19.1", speculative_method="")) == []


def test_a_release_newer_than_those_read_gets_the_newest_rule_and_says_so():
    found = check("0.40.0", max_num_batched_tokens=4, max_num_seqs=1)
    assert "rules read up to vLLM 0.34.0; 0.40.0 is newer" in found[0]


@pytest.mark.parametrize("text, release", [("0.20.2", (0, 20, 2)), ("0.32.0+cpu", (0, 32, 0)), ("v0.21.0rc1", (0, 21, 0)),
                                           ("0.33", (0, 33, 0))])
def test_parse_release(text, release):
    assert parse_release(text) == release
    with pytest.raises(ValueError):
        parse_release("latest")


@pytest.mark.parametrize("release, value, refused", [
    ("0.34.0", "0", True), ("0.34.0", "1", False), ("0.33.0", "0", False), ("0.40.0", "0", True)])
def test_the_v1_model_runner_switch_is_refused_where_the_release_removed_it(release, value, refused):
    found = env_problems(parse_release(release), {"VLLM_USE_V2_MODEL_RUNNER": value})
    assert bool(found) is refused
    if refused:
        assert "vllm_server_env.VLLM_USE_V2_MODEL_RUNNER=0" in found[0] and "0.33.0 read it last" in found[0]
