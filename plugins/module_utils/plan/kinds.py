# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kind of value of every option of every entry point, and the one check that holds each option to its kind.

Every option a role's ``meta/argument_specs.yml`` declares has a kind here (a unit test fails for one that has not),
and each kind is a rule of ``module_utils/plan/values``. Before it, every value at any depth passes
``values.text_problem``: no control character, newline or line separator, no string over 4,096 characters, no nesting
over 12 levels. A kind ending in ``?`` also takes an empty string or null, which those options read as "unset".

Argument specs say ``str`` or ``int``; that is not enough: Ansible turns a YAML ``true`` into ``"True"`` for a
``str`` option and into 1 for an ``int`` one, and a ``str`` takes a newline. The kinds say what each value is for.
What a kind cannot see (an option against another, a value against the host) stays in the role's own plan.
"""

from __future__ import annotations

from ansible_collections.llmops.vllm.plugins.module_utils.plan import values

# kind name: (rule, extra arguments)
RULES = {
    "flag": (values.flag, ()),
    "count": (values.bounded_count, (0,)),
    "positive": (values.bounded_count, (1,)),
    "port": (values.port, ()),
    "number": (values.number, ()),
    "word": (values.word, ()),
    "name": (values.unit_name, ()),
    "user": (values.user, ()),
    "path": (values.abs_path, (False,)),
    "render_dir": (values.render_dir, ()),
    "controller_path": (values.controller_path, ()),
    "model": (values.model, ()),
    "host": (values.host, ()),
    "address": (values.ip_address, ()),
    "interface": (values.interface, ()),
    "token": (values.api_key, ()),
    "url": (values.url, ()),
    "wheel": (values.wheel, ()),
    "command": (values.command, ()),
    "haproxy_time": (values.haproxy_time, ()),
    "size": (values.logrotate_size, ()),
    "url_paths": (values.url_paths, ()),
    "env": (values.env, ()),
    "env_names": (values.env_name_list, ()),
    "mapping": (values.mapping, ()),
    "records": (values.records, ()),
    "words": (values.each(values.word, "words"), ()),
    "urls": (values.each(values.url, "URLs"), ()),
    "paths": (values.each(values.abs_path, "absolute paths"), (False,)),
    "counts": (values.each(values.bounded_count, "whole numbers"), (0,)),
    "positives": (values.each(values.bounded_count, "whole numbers of 1 or more"), (1,)),
    "devices": (values.each(values.device, "devices"), ()),
    "lines": (values.each(values.line, "lines of text"), ()),
    "arguments": (values.each(values.argument, "arguments"), ()),
}

KIND = {
    # vllm_common
    "vllm_common_flavor": "word", "vllm_common_package": "word", "vllm_common_version": "word",
    "vllm_common_user": "user", "vllm_common_group": "name", "vllm_common_base_dir": "path",
    "vllm_common_venv_dir": "path", "vllm_common_cpu_cli_name": "word", "vllm_common_executable": "path",
    "vllm_common_drafter_dir": "render_dir",
    # vllm_drafter
    "vllm_drafter_target_model_dir": "path?", "vllm_drafter_target_model_src": "controller_path?",
    "vllm_drafter_dir": "path?", "vllm_drafter_src": "controller_path?", "vllm_drafter_target_layer_ids": "counts",
    "vllm_drafter_mask_token_id": "count?", "vllm_drafter_config_overrides": "mapping",
    "vllm_drafter_owner": "name", "vllm_drafter_group": "name",
    # vllm_frontend
    "vllm_frontend_bind_address": "address", "vllm_frontend_port": "port", "vllm_frontend_paths": "url_paths",
    "vllm_frontend_maxconn": "positive", "vllm_frontend_http_request_timeout": "haproxy_time",
    "vllm_frontend_tls_certificate": "path?", "vllm_frontend_servers": "records", "vllm_frontend_hosts": "words",
    "vllm_frontend_backend": "name", "vllm_frontend_socket": "path", "vllm_frontend_config_path": "path",
    "vllm_frontend_health_check": "word", "vllm_frontend_check_interval": "haproxy_time",
    "vllm_frontend_check_fast_interval": "haproxy_time", "vllm_frontend_check_down_interval": "haproxy_time",
    "vllm_frontend_check_timeout": "haproxy_time", "vllm_frontend_api_key": "token?",
    "vllm_frontend_api_key_previous": "token?", "vllm_frontend_timeout": "haproxy_time", "vllm_frontend_retries": "count",
    "vllm_frontend_metrics_port": "count", "vllm_frontend_metrics_address": "address",
    # vllm_install
    "vllm_install_python": "path", "vllm_install_home": "path", "vllm_install_system_packages": "words",
    "vllm_install_index_url": "url?", "vllm_install_extra_index_urls": "urls",
    "vllm_install_wheelhouse_src": "controller_path?", "vllm_install_wheelhouse_dir": "path?",
    "vllm_install_bootstrap_packages": "words", "vllm_install_cpu_remove_packages": "words",
    "vllm_install_flash_attn": "word", "vllm_install_flash_attn_wheel": "wheel?", "vllm_install_flash_attn_version": "word",
    "vllm_install_flash_attn_build_jobs": "positive", "vllm_install_controller_cache_dir": "controller_path",
    "vllm_install_prune_keep": "count", "vllm_install_starts": "mapping",
    # vllm_server: what the playbooks hand over
    "vllm_server_pending_reasons": "lines", "vllm_server_model_sources": "mapping", "vllm_server_arriving_paths": "paths",
    "vllm_server_staged_trees": "mapping", "vllm_server_front_doors": "records",
    # vllm_server: where it lives
    "vllm_server_service_name": "name", "vllm_server_unit_dir": "path", "vllm_server_config_dir": "path",
    "vllm_server_log_dir": "path", "vllm_server_state_dir": "path", "vllm_server_cache_dir": "path",
    "vllm_server_private_dir": "path", "vllm_server_textfile_dir": "path",
    # vllm_server: the command
    "vllm_server_model": "model?", "vllm_server_served_model_name": "model?", "vllm_server_host": "host",
    "vllm_server_public_address": "host", "vllm_server_port": "port", "vllm_server_tensor_parallel_size": "positive?",
    "vllm_server_max_num_batched_tokens": "positive?", "vllm_server_max_num_seqs": "positive?",
    "vllm_server_shutdown_timeout": "count", "vllm_server_args": "mapping", "vllm_server_extra_args": "arguments",
    "vllm_server_speculative_method": "word?", "vllm_server_speculative_model": "model?",
    "vllm_server_num_speculative_tokens": "positive?", "vllm_server_speculative_extra": "mapping",
    # vllm_server: its environment and secrets
    "vllm_server_env": "env", "vllm_server_unset_env": "env_names", "vllm_server_internal_address": "address",
    "vllm_server_internal_interface": "interface", "vllm_server_api_key": "token?",
    "vllm_server_serving_group": "word?", "vllm_server_serving_group_rank": "count?",
    "vllm_server_serving_group_backend": "word", "vllm_server_serving_group_master_port": "port",
    "vllm_server_api_key_previous": "token?", "vllm_server_hf_token": "token?", "vllm_server_metrics_token": "token?",
    "vllm_server_require_api_key": "flag", "vllm_server_device_allow": "devices",
    "vllm_server_gpu_count_command": "command", "vllm_server_gpu_memory_command": "command",
    # vllm_server: the start, its checks and its gate
    "vllm_server_wait_timeout": "positive", "vllm_server_wait_slice": "positive",
    "vllm_server_wait_reconnect_retries": "count", "vllm_server_smoke_enabled": "flag",
    "vllm_server_bench_enabled": "flag", "vllm_server_bench_tokenizer": "model?",
    "vllm_server_bench_concurrency": "positives", "vllm_server_bench_num_prompts": "positive",
    "vllm_server_bench_input_len": "positive", "vllm_server_bench_output_len": "positive",
    "vllm_server_bench_warmups": "count", "vllm_server_bench_timeout": "positive",
    "vllm_server_bench_dataset": "controller_path?", "vllm_server_bench_categories": "words",
    "vllm_server_bench_repeats": "positive", "vllm_server_bench_dataset_output_len": "count",
    "vllm_server_bench_ignore_eos": "flag", "vllm_server_gate_min_decode_tokens_per_second": "number?",
    "vllm_server_gate_min_acceptance_length": "number?", "vllm_server_gate_baseline_tokens_per_second": "number?",
    "vllm_server_gate_min_speedup": "number?", "vllm_server_gate_inconclusive": "word",
    "vllm_server_gate_baseline_config": "word?",
    "vllm_server_compare_dir": "controller_path", "vllm_server_door_state": "word",
    # vllm_server: keeping it serving, and the operations
    "vllm_server_watchdog_enabled": "flag", "vllm_server_watchdog_interval": "positive",
    "vllm_server_watchdog_deadline": "positive", "vllm_server_watchdog_failures": "positive",
    "vllm_server_watchdog_backoff": "count", "vllm_server_log_rotate_size": "size",
    "vllm_server_log_rotate_keep": "positive", "vllm_server_log_rotate_max_age": "positive",
    "vllm_server_remove_files": "flag",
}


def problem(name, value):
    """The sentence naming ``name`` and what is wrong with ``value`` for its kind; None when it fits, or when the
    name has no kind (the unknown-variable check names those)."""
    kind = KIND.get(name)
    if kind is None:
        return None
    found = values.text_problem(name, value)
    if found:
        return found
    if kind.endswith("?"):
        if value is None or value == "":
            return None
        kind = kind[:-1]
    rule, args = RULES[kind]
    return rule(name, value, *args)


def problems(values):
    """One sentence per option of ``values`` (a mapping by option name) that does not fit its kind, in name order."""
    out = []
    for name in sorted(values or {}):
        found = problem(name, values[name])
        if found:
            out.append(found)
    return out
