"""How the venv check reads what vLLM printed."""

from __future__ import annotations

import json

from ansible_collections.llmops.vllm.plugins.module_utils.probe.engine_check import MARK, interpret, message


def test_an_accepted_command():
    out = "WARNING noise\n" + MARK + json.dumps({"ok": True, "vllm": "0.32.0+cpu", "max_num_batched_tokens": 20}) + "\n"
    result = interpret(0, out, 8.123)
    assert (result["status"], result["seconds"], result["accepted"]["max_num_batched_tokens"]) == ("accepted", 8.12, 20)
    assert "accepts the command" in message(result, "/v/bin/python")


def test_a_refusal_is_classified_as_vllm_wait_would():
    out = "\n".join([
        "Traceback (most recent call last):",
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig",
        "bogus_key",
        "  Unexpected keyword argument [type=unexpected_keyword_argument, input_value=1, input_type=int]",
    ])
    result = interpret(1, out, 9.0)
    assert (result["status"], result["reason"]) == ("refused", "config_error")
    assert result["detail"] == "SpeculativeConfig.bogus_key: Unexpected keyword argument"
    assert "Unexpected keyword argument" in result["root_cause_line"]
    assert "remove 'bogus_key'" in result["hint"]


def test_an_argparse_error_and_a_silent_exit():
    result = interpret(2, "usage: vllm [-h] [-v]\nvllm: error: unrecognized arguments: --no-such-flag\n", 7.0)
    assert (result["reason"], result["detail"]) == ("config_error", "unrecognized arguments: --no-such-flag")
    result = interpret(-11, "", 1.0)
    assert (result["status"], result["reason"]) == ("refused", "process_exited")
    assert "did not run to its end (exit -11, no verdict)" in result["detail"]
    result = interpret(3, "", 1.0)
    assert (result["reason"], result["detail"]) == ("config_error", "vLLM's check exited with 3 and printed nothing")


def test_a_check_the_host_rebooted_under_is_no_verdict_on_the_settings():
    # systemd-run reports 0 when the host goes down under the check: no verdict line, no error printed.
    result = interpret(0, "INFO Loading the model\n", 40.0)
    assert (result["status"], result["reason"]) == ("refused", "process_exited")
    assert "says nothing of the settings" in result["detail"] and "fix the setting" not in result["hint"]
    assert "run the deploy again" in result["hint"]


def test_a_check_that_hangs_is_a_timeout_and_nothing_to_check_with_is_no_failure():
    assert interpret(124, "Loading", 300.0, timeout=300)["reason"] == "timeout"
    result = interpret(0, MARK + json.dumps({"unavailable": "vLLM 0.6.3 has no serve subcommand"}), 3.0)
    assert result["status"] == "unavailable" and "not checked" in message(result, "p")


def test_the_sandboxed_check_is_a_transient_service_under_the_units_own_lines():
    from ansible_collections.llmops.vllm.plugins.module_utils.probe.engine_check import sandboxed
    argv = sandboxed(["/venv/bin/python", "-c", "probe", "/venv/bin/vllm", "serve", "m"],
                     ["ProtectSystem=strict", "ReadWritePaths=/var/lib/vllm /var/cache/vllm", "CapabilityBoundingSet="],
                     "vllm", "vllm", {"HOME": "/var/lib/vllm", "HF_HUB_OFFLINE": "1"}, "/var/lib/vllm", 300)
    assert argv[:5] == ["systemd-run", "--quiet", "--wait", "--pipe", "--collect"]
    pairs = [argv[i + 1] for i, word in enumerate(argv) if word == "-p"]
    assert pairs == ["User=vllm", "Group=vllm", "RuntimeMaxSec=300", "ProtectSystem=strict",
                     "ReadWritePaths=/var/lib/vllm /var/cache/vllm", "CapabilityBoundingSet="]
    assert "--setenv=HOME=/var/lib/vllm" in argv and "--working-directory=/var/lib/vllm" in argv
    assert argv[argv.index("--") + 1:] == ["/venv/bin/python", "-c", "probe", "/venv/bin/vllm", "serve", "m"]
