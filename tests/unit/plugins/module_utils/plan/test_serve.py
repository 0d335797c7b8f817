"""The serve plan: the command, one problem per bad setting naming its variable, and the host checks."""

from __future__ import annotations

import json

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.plan.serve import argv, argv_problems, cli_name, plan, server_urls

DRAFTER = "/opt/vllm/drafter"

# The user's hand-written command on vLLM 0.20, as the example inventory sets it.
QWEN = {
    "model": "/srv/models/Qwen3.6-27B",
    "host": "127.0.0.1",
    "port": 8000,
    "tensor_parallel_size": 2,
    "max_num_batched_tokens": 32768,
    "args": {"max-model-len": 32768, "reasoning-parser": "qwen3", "tool-call-parser": "qwen3_coder",
             "language-model-only": True, "trust-remote-code": True},
    "speculative_method": "dflash",
    "speculative_model": DRAFTER,
    "num_speculative_tokens": 15,
    "extra_args": [],
}
CONTEXT = {"executable": "/opt/vllm/venvs/vllm-0.20.2/bin/vllm", "version": "0.20.2", "flavor": "gpu",
           "service_name": "vllm", "api_key_set": False, "require_api_key": False}
TWO_GPUS = {"gpus": {"rc": 0, "stdout_lines": ["GPU 0: H200 (UUID: a)", "GPU 1: H200 (UUID: b)"]},
            "port_owner": {"kind": "none"}}


def settings(**changes):
    return {**QWEN, **CONTEXT, **changes}


def test_the_users_command_item_for_item():
    assert argv(QWEN) == [
        "serve", "/srv/models/Qwen3.6-27B", "--host", "127.0.0.1", "--port", "8000",
        "--tensor-parallel-size", "2", "--max-num-batched-tokens", "32768",
        "--max-model-len", "32768", "--reasoning-parser", "qwen3", "--tool-call-parser", "qwen3_coder",
        "--language-model-only", "--trust-remote-code",
        # not in the user's command: vLLM's default up to 0.33, explicit so that 0.34 does not take the whole GPU
        "--gpu-memory-utilization", "0.92",
        "--speculative-config", '{"method":"dflash","model":"/opt/vllm/drafter","num_speculative_tokens":15}',
    ]


def test_a_shutdown_timeout_lets_the_requests_in_flight_finish():
    out = argv(dict(QWEN, shutdown_timeout=120))
    assert out[out.index("--shutdown-timeout") + 1] == "120" and out.index("--shutdown-timeout") < out.index("--max-model-len")
    assert "--shutdown-timeout" not in argv(dict(QWEN, shutdown_timeout=0))   # vLLM's own 0: abort them
    assert "vllm_server_shutdown_timeout must be the seconds" in argv_problems(dict(QWEN, shutdown_timeout=-1))[0]
    found = plan(settings(shutdown_timeout=60, version="0.17.1"), TWO_GPUS)["problems"]
    assert any("vllm_server_shutdown_timeout: vLLM 0.17.1 has no --shutdown-timeout" in p for p in found), found


def test_the_plan_of_the_users_deploy_has_no_problem():
    found = plan(settings(), TWO_GPUS)
    assert found == {"argv": argv(QWEN), "problems": [], "warnings": [], "gate_baseline": None, "gate_baseline_blocks": [],
                     "memory": None}


@pytest.mark.parametrize("key", ["max-model-len", "max_model_len", "--max-model-len"])
def test_args_take_any_spelling_of_the_cli_name(key):
    assert cli_name(key) == "max-model-len"
    assert argv(dict(QWEN, args={key: 256}))[10:12] == ["--max-model-len", "256"]


@pytest.mark.parametrize("value, words", [
    (True, ["--enforce-eager"]),
    (False, ["--no-enforce-eager"]),
    (None, []),
    (0, ["--enforce-eager", "0"]),
    (["a", "b"], ["--enforce-eager", "a", "b"]),
    ({"level": 3}, ["--enforce-eager", '{"level":3}']),
])
def test_args_values_render_as_vllm_parses_them(value, words):
    out = argv({"model": "m", "flavor": "cpu", "args": {"enforce-eager": value}})
    assert out == ["serve", "m", *words]


def test_args_keep_their_order_and_come_before_the_speculative_config_and_extra_args():
    out = argv(dict(QWEN, args={"zeta": 1, "omega": 2}, extra_args=["--seed", "0"]))
    assert out[out.index("--zeta"):] == [
        "--zeta", "1", "--omega", "2", "--gpu-memory-utilization", "0.92", "--speculative-config", out[-3], "--seed", "0"]
    assert json.loads(out[-3])["method"] == "dflash"


def test_speculative_keys_come_in_fixed_order_then_extras_in_theirs():
    out = argv({"model": "m", "speculative_method": "dflash", "speculative_model": "d", "num_speculative_tokens": "15",
                "speculative_extra": {"max_model_len": 4096, "draft_tensor_parallel_size": 1}})
    assert list(json.loads(out[-1]).items()) == [
        ("method", "dflash"), ("model", "d"), ("num_speculative_tokens", 15), ("max_model_len", 4096),
        ("draft_tensor_parallel_size", 1)]


def test_unset_values_are_left_to_vllm_and_an_empty_method_drops_the_speculative_config():
    assert argv({"model": "m", "flavor": "cpu", "host": "", "port": None, "max_num_seqs": None,
                 "speculative_method": "", "speculative_model": "d"}) == ["serve", "m"]


def test_served_model_name_may_list_several_names():
    assert argv({"model": "m", "flavor": "cpu", "served_model_name": ["a", "b"]}) == [
        "serve", "m", "--served-model-name", "a", "b"]


@pytest.mark.parametrize("changes, named", [
    ({"model": ""}, "vllm_server_model (the model path or id to serve) must be set"),
    ({"port": 0}, "vllm_server_port must be between 1 and 65535"),
    ({"port": "http"}, "vllm_server_port must be between 1 and 65535"),
    ({"max_num_seqs": -1}, "vllm_server_max_num_seqs must be a positive integer"),
    ({"tensor_parallel_size": True}, "vllm_server_tensor_parallel_size must be a positive integer"),
    ({"num_speculative_tokens": "many"}, "vllm_server_num_speculative_tokens must be an integer"),
    ({"speculative_extra": ["x"]}, "vllm_server_speculative_extra must be a mapping"),
    ({"speculative_extra": {"method": "eagle"}}, "vllm_server_speculative_extra must not set method: use vllm_server_speculative_method"),
    ({"args": ["--x"]}, "vllm_server_args must be a mapping"),
    ({"args": {"port": 9000}}, "vllm_server_args.port: --port has its own variable; set vllm_server_port"),
    ({"args": {"tp": 2}}, "set vllm_server_tensor_parallel_size"),
    ({"args": {"api_key": "s"}}, "set vllm_server_api_key"),
    ({"args": {"speculative-config": {}}}, "set vllm_server_speculative_method"),
    ({"args": {"Max Len": 1}}, "vllm_server_args.Max Len: 'Max Len' is not a vLLM CLI name"),
    ({"args": {"seed": {1, 2}}}, "vllm_server_args.seed must be a string, a number"),
    ({"extra_args": "--seed 0"}, "vllm_server_extra_args must be a list"),
    ({"extra_args": ["--api-key=s"]}, "vllm_server_extra_args must not carry --api-key"),
    # Matched as vLLM's parser matches flags: _ for -, an abbreviation, a dotted key, a list value that is a flag.
    ({"extra_args": ["--api_key", "s"]}, "must not carry --api-key ('--api_key' sets it)"),
    ({"extra_args": ["--api-ke=s"]}, "must not carry --api-key ('--api-ke=s' sets it)"),
    ({"extra_args": ["--ho", "0.0.0.0"]}, "'--ho' sets --host, which has its own variable; set vllm_server_host"),
    ({"extra_args": ["-tp", "4"]}, "--tp has its own variable; set vllm_server_tensor_parallel_size"),
    ({"args": {"seed": ["1", "--host", "0.0.0.0"]}}, "vllm_server_args.seed: --host has its own variable; set vllm_server_host"),
    ({"args": {"served_model_nam": "x"}}, "sets --served-model-name"),
    ({"args": {"speculative-config.method": "x"}},
     "vllm_server_args.speculative-config.method: 'speculative-config.method' is not a vLLM CLI name"),
    ({"extra_args": ["--speculative_config.num_speculative_tokens=3"]}, "sets --speculative-config"),
    ({"extra_args": ["--config", "/etc/x.yaml"]}, "'--config' is refused: a --config file could set any flag"),
    ({"extra_args": [True]}, "vllm_server_extra_args items must be strings or numbers"),
    ({"max_modle_len": 1}, "unknown settings max_modle_len"),
])
def test_each_bad_setting_is_named(changes, named):
    found = argv_problems(dict(QWEN, **changes))
    assert any(named in problem for problem in found), found
    with pytest.raises(ValueError, match="vllm_server_|unknown settings"):
        argv(dict(QWEN, **changes))
    assert plan(settings(**changes), TWO_GPUS)["argv"] == []


def test_an_integer_given_as_a_string_counts():
    assert argv_problems(dict(QWEN, port="8000", max_num_seqs="8")) == []


def test_the_release_rules_apply_the_release_that_will_serve():
    small = settings(max_num_batched_tokens=8192, max_num_seqs=1024)
    assert "vllm_server_max_num_batched_tokens is too small for 15" in plan(small, TWO_GPUS)["problems"][0]
    assert plan(dict(small, version="0.32.0", flavor="cpu"), TWO_GPUS)["problems"] == []
    # On GPUs 0.32 starts with it too; the runtime hazard table (module_utils/plan/hazards) refuses it for what follows.
    (problem,) = plan(dict(small, version="0.32.0"), TWO_GPUS)["problems"]
    assert "(hazard dflash-draft-budget)" in problem


def test_a_relative_executable_names_the_shared_variable():
    assert "vllm_common_executable must be the absolute path" in plan(settings(executable="vllm"), TWO_GPUS)["problems"][0]


def test_a_bad_release_names_the_shared_variable():
    assert plan(settings(version="latest"), TWO_GPUS)["problems"][0].startswith("vllm_common_version:")


@pytest.mark.parametrize("gpus, named", [
    ({"rc": 0, "stdout_lines": ["GPU 0: H200 (UUID: a)"]}, "tensor_parallel_size is 2 but this host has 1 GPU(s)"),
    ({"rc": 0, "stdout_lines": ["No devices found."]}, "this host has 0 GPU(s)"),
    ({"rc": 2, "msg": "[Errno 2] No such file or directory: b'nvidia-smi'"}, "No GPU found: 'nvidia-smi -L' failed ([Errno 2]"),
])
def test_the_gpus_must_cover_the_tensor_parallel_size(gpus, named):
    found = plan(settings(), dict(TWO_GPUS, gpus=gpus))["problems"]
    assert len(found) == 1 and named in found[0], found


def test_gpus_are_not_counted_on_the_cpu_flavor():
    assert plan(settings(version="0.32.0", flavor="cpu"), {"gpus": None})["problems"] == []


def test_a_model_without_config_json_is_named():
    found = plan(settings(), dict(TWO_GPUS, model_config_exists=False))["problems"]
    assert found and found[0].startswith("vllm_server_model '/srv/models/Qwen3.6-27B' has no config.json")
    assert plan(settings(), dict(TWO_GPUS, model_config_exists=None))["problems"] == []


@pytest.mark.parametrize("owner, named", [
    ({"kind": "other", "detail": "nginx", "pids": [42]}, "vllm_server_port 8000 is already in use outside vllm.service: nginx (pid=42)"),
    ({"kind": "unknown", "detail": "ss is missing"}, "Cannot check whether vllm_server_port 8000 is free: ss is missing."),
    ({"kind": "foreign", "detail": "port 8000 is held by pid 42 (nginx), not by the watched process", "pids": [42]},
     "vllm_server_port 8000 is already in use outside vllm.service: port 8000 is held by pid 42 (nginx), not by the "
     "watched process. vLLM"),
])
def test_a_port_held_by_another_process_is_named(owner, named):
    found = plan(settings(), dict(TWO_GPUS, port_owner=owner))["problems"]
    assert found == [found[0]] and found[0].startswith(named), found
    assert plan(settings(), dict(TWO_GPUS, port_owner={"kind": "ours"}))["problems"] == []


def test_listening_beyond_loopback_without_a_key_warns_or_fails():
    open_host = settings(host="0.0.0.0")
    assert plan(open_host, TWO_GPUS)["warnings"][0].startswith("vllm_server_host is 0.0.0.0 and vllm_server_api_key is empty")
    assert plan(dict(open_host, api_key_set=True), TWO_GPUS)["warnings"] == []
    strict = plan(dict(open_host, require_api_key=True), TWO_GPUS)
    assert strict["warnings"] == [] and "vllm_server_require_api_key is true" in strict["problems"][0]


@pytest.mark.parametrize("host, health, endpoint", [
    ("127.0.0.1", "http://127.0.0.1:8000/health", "http://127.0.0.1:8000"),
    ("0.0.0.0", "http://127.0.0.1:8000/health", "http://gpu-node-1:8000"),
    ("::", "http://127.0.0.1:8000/health", "http://gpu-node-1:8000"),
    ("", "http://127.0.0.1:8000/health", "http://gpu-node-1:8000"),
    ("::1", "http://[::1]:8000/health", "http://[::1]:8000"),
    ("10.0.0.7", "http://10.0.0.7:8000/health", "http://10.0.0.7:8000"),
])
def test_the_health_url_and_the_endpoint(host, health, endpoint):
    urls = server_urls(host, 8000, "gpu-node-1")
    assert (urls["health_url"], urls["endpoint"], urls["port"]) == (health, endpoint, 8000)
    assert urls["local_url"] + "/health" == health
    assert "http://" + ("[%s]" % urls["address"] if ":" in urls["address"] else urls["address"]) + ":8000" == endpoint


def test_a_key_loads_the_middleware_that_guards_every_path():
    keyed = argv(dict(QWEN, api_key_set=True))
    assert keyed[keyed.index("--middleware") + 1] == "llmops_vllm_auth.RequireKey"
    assert keyed.index("--middleware") < keyed.index("--speculative-config")
    assert "--middleware" not in argv(dict(QWEN, api_key_set=False))
    # A user's own middleware is theirs to add, beside the collection's.
    assert argv_problems(dict(QWEN, args={"middleware": "my.Mw"})) == []


def test_an_ipv6_public_address_behind_a_wildcard_makes_a_valid_endpoint_and_target():
    from ansible_collections.llmops.vllm.plugins.module_utils.report.prometheus import target_of
    urls = server_urls("0.0.0.0", 8000, "2001:db8::1")
    assert urls["endpoint"] == "http://[2001:db8::1]:8000" and urls["address"] == "2001:db8::1"
    assert target_of(urls["endpoint"]) == "[2001:db8::1]:8000"


BUILTIN = __import__("pathlib").Path(__file__).resolve().parents[5] / "roles/vllm_server/files/workloads/llmops-builtin.json"
PROMPT_SET = json.dumps([{"category": "code", "conversations": [{"value": "Write a loop"}, {"value": "for x in y: pass"}]}])


def bench(text, **changes):
    return plan(settings(**dict({"bench_enabled": True, "bench_dataset": "/home/me/prompts.json", "bench_repeats": 3,
                                 "bench_dataset_output_len": 0, "bench_categories": []}, **changes)),
                dict(TWO_GPUS, bench_dataset_text=text))["problems"]


def test_a_readable_prompt_set_and_the_builtin_one_have_no_problem():
    assert bench(PROMPT_SET) == []
    assert bench(BUILTIN.read_text(), bench_dataset="builtin", bench_categories=["code", "summary"]) == []
    # The fixed workload reads nothing, and a disabled gate checks nothing.
    assert bench(None, bench_dataset="") == [] and bench("", bench_enabled=False) == []


@pytest.mark.parametrize("text, changes, words", [
    ("", {}, "vllm_server_bench_dataset /home/me/prompts.json cannot be read on the controller"),
    ("{not json", {}, "vllm_server_bench_dataset /home/me/prompts.json is not a prompt set vLLM's client reads as meant"),
    (json.dumps([{"conversations": [{"value": "only a prompt"}]}]), {}, "entry 0: conversations needs at least two turns"),
    (PROMPT_SET, {"bench_categories": ["code", "prose"]}, "vllm_server_bench_categories names prose, which"),
    (PROMPT_SET, {"bench_repeats": 0}, "vllm_server_bench_repeats must be a whole number of at least 1"),
    (PROMPT_SET, {"bench_dataset_output_len": -1}, "vllm_server_bench_dataset_output_len must be a whole number"),
])
def test_a_prompt_set_the_gate_could_not_use_fails_preflight_naming_the_variable(text, changes, words):
    problems = bench(text, **changes)
    assert len(problems) == 1 and words in problems[0], problems


def test_the_gate_takes_the_baseline_a_compare_run_measured():
    s = settings(bench_enabled=True, gate_baseline_config="no-speculation")
    got = plan(s, dict(TWO_GPUS, measured_baseline={"tokens_per_second": 73.5, "problem": None, "blocks": [72.0, 75.0]}))
    assert got["problems"] == [] and got["gate_baseline"] == 73.5 and got["gate_baseline_blocks"] == [72.0, 75.0]
    assert plan(settings(bench_enabled=True), TWO_GPUS)["gate_baseline"] is None


def test_a_measured_baseline_that_is_not_there_is_named():
    s = settings(bench_enabled=True, gate_baseline_config="mtp")
    problem = "the kept compare run has no configuration named mtp (it has: none)"
    got = plan(s, dict(TWO_GPUS, measured_baseline={"tokens_per_second": None, "problem": problem}))
    assert got["problems"] == ["vllm_server_gate_baseline_config mtp: %s." % problem]
    got = plan(dict(s, gate_baseline_tokens_per_second=73.5),
               dict(TWO_GPUS, measured_baseline={"tokens_per_second": 70.0, "problem": None}))
    assert "gate_baseline_config (mtp) and vllm_server_gate_baseline_tokens_per_second are both set" in got["problems"][0]


# What the preflight reads of the user's models (vllm_model_info) and GPUs (nvidia-smi's memory.total in MiB).
QWEN36_READ = {"config": {"architectures": ["Qwen3_5ForConditionalGeneration"], "text_config": {
    "num_hidden_layers": 8, "layer_types": ["linear_attention"] * 6 + ["full_attention"] * 2, "num_key_value_heads": 4,
    "num_attention_heads": 24, "head_dim": 256, "hidden_size": 5120, "dtype": "bfloat16",
    "max_position_embeddings": 262144}}, "weight_bytes": {"BF16": 54 * 10 ** 9}}
DRAFTER_READ = {"config": {"architectures": ["DFlashDraftModel"], "num_hidden_layers": 5, "num_key_value_heads": 8,
                           "num_attention_heads": 32, "head_dim": 128, "hidden_size": 5120, "dtype": "bfloat16"},
                "weight_bytes": {"BF16": 3 * 10 ** 9}}
H200S = {"rc": 0, "stdout_lines": ["143771", "143771"]}


def test_the_users_own_configuration_is_refused_for_its_known_crash():
    found = plan(settings(), dict(TWO_GPUS, models={"target": QWEN36_READ, "drafter": DRAFTER_READ}, gpu_memory=H200S))
    (problem,) = found["problems"]
    assert "vllm#42084" in problem and "vllm_server_args: {enable-prefix-caching: false}" in problem
    fixed = dict(QWEN["args"], **{"enable-prefix-caching": False})
    assert plan(settings(args=fixed), dict(TWO_GPUS, models={"target": QWEN36_READ, "drafter": DRAFTER_READ},
                                           gpu_memory=H200S))["problems"] == []


def test_the_memory_check_reads_the_models_and_gpus_and_names_the_variables():
    args = dict(QWEN["args"], **{"enable-prefix-caching": False, "max-model-len": 262144, "gpu-memory-utilization": 0.2})
    reads = dict(TWO_GPUS, models={"target": QWEN36_READ, "drafter": DRAFTER_READ}, gpu_memory=H200S)
    found = plan(settings(args=args), reads)
    (problem,) = found["problems"]
    assert "Out of memory before the first request" in problem and "vllm_server_args.max-model-len" in problem
    assert "vllm_server_args.gpu-memory-utilization 0.20" in problem
    assert found["memory"]["weight_bytes_per_gpu"] == (54 + 3) * 10 ** 9 // 2


@pytest.mark.parametrize("version, args, utilization", [
    ("0.20.2", {}, 0.92),                         # the wheel's default up to 0.33 (not 0.9), rendered
    ("0.34.0", {}, 0.92),                         # not 0.34's 1.0 of an unset share under its extensible KV cache
    ("0.34.0", {"gpu-memory-utilization": 0.85}, 0.85),
    ("0.34.0", {"device-memory-utilization": 0.8}, 0.8),   # 0.31's alias
])
def test_the_gpu_memory_share_is_always_explicit_and_the_memory_check_counts_it(version, args, utilization):
    args = dict(QWEN["args"], **{"enable-prefix-caching": False}, **args)
    reads = dict(TWO_GPUS, models={"target": QWEN36_READ, "drafter": DRAFTER_READ}, gpu_memory=H200S)
    found = plan(settings(version=version, args=args), reads)
    assert found["memory"]["budget_bytes"] == int(143771 * 1024 * 1024 * utilization) - (54 + 3) * 10 ** 9 // 2
    words = found["argv"]
    shares = [words[i + 1] for i, word in enumerate(words) if word in ("--gpu-memory-utilization", "--device-memory-utilization")]
    assert shares == [str(utilization)], words


def test_the_cpu_engine_gets_no_gpu_memory_share():
    assert "--gpu-memory-utilization" not in plan(settings(flavor="cpu", version="0.32.0"), {})["argv"]


def test_a_flag_the_release_removed_is_refused_before_the_install():
    args = dict(QWEN["args"], **{"calculate-kv-scales": True})         # removed after 0.20.x's releases had it
    found = plan(settings(version="0.33.0", args=args), TWO_GPUS)
    assert any("vllm_server_args.calculate-kv-scales: vLLM 0.33.0 has no --calculate-kv-scales any more" in p
               for p in found["problems"])
    assert not any("calculate-kv-scales" in p for p in plan(settings(version="0.20.2", args=args), TWO_GPUS)["problems"])
    # a flag no release taken in has is left to the new venv's own check
    unknown = dict(QWEN["args"], **{"no-such-flag": True})
    assert not any("no-such-flag" in p for p in plan(settings(version="0.33.0", args=unknown), TWO_GPUS)["problems"])


def test_a_model_not_read_is_not_checked():
    found = plan(settings(), dict(TWO_GPUS, models={"target": {"failed": True, "msg": "no such directory"}},
                                  gpu_memory=H200S))
    assert found["problems"] == [] and found["memory"] is None


CPU = {"version": "0.32.0", "flavor": "cpu", "max_num_batched_tokens": 4096, "max_num_seqs": 8, "num_speculative_tokens": 4}


@pytest.mark.parametrize("nodes, tp, env, named", [
    ("0", 1, {}, None),
    ("0", 4, {}, "Not enough allowed NUMA nodes to bind threads of 4 local CPUWorkers"),
    ("0-3", 4, {}, None),
    ("0", 2, {"VLLM_CPU_OMP_THREADS_BIND": "0|1"}, None),
    ("0", 2, {"VLLM_CPU_OMP_THREADS_BIND": "0-1"}, "vllm_server_env.VLLM_CPU_OMP_THREADS_BIND gives 1 core list(s)"),
    ("0", 4, {"VLLM_CPU_OMP_THREADS_BIND": "nobind"}, None),
])
def test_the_cpu_engine_needs_a_numa_node_or_a_core_list_per_rank(nodes, tp, env, named):
    found = plan(settings(**CPU, tensor_parallel_size=tp, values={"vllm_server_env": env}),
                 dict(TWO_GPUS, numa_nodes={"rc": 0, "stdout": nodes + "\n"}))["problems"]
    assert (found == []) if named is None else (len(found) == 1 and named in found[0]), found


def test_a_serving_groups_host_needs_the_devices_of_its_own_ranks_only():
    # Tensor parallel 2 over two hosts of one GPU each (vLLM's local world size): each host runs its share.
    one_gpu = dict(TWO_GPUS, gpus={"rc": 0, "stdout_lines": ["GPU 0: H200 (UUID: a)"]})
    assert plan(settings(nnodes=2), one_gpu)["problems"] == []
    found = plan(settings(nnodes=2, args={"pipeline_parallel_size": 2}), one_gpu)["problems"]
    assert len(found) == 1 and "this host runs 2 of its ranks but has 1 GPU(s)" in found[0], found
    cpu = plan(settings(**CPU, tensor_parallel_size=2, nnodes=2), dict(TWO_GPUS, numa_nodes={"rc": 0, "stdout": "0\n"}))
    assert cpu["problems"] == []
