"""vllm_serve_argv renders flags in a fixed order; systemd_quote survives systemd's parser."""

from __future__ import annotations

import json
import shlex

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.filter.vllm_args import (
    argv_lines,
    FilterModule,
    systemd_quote,
    vllm_serve_argv,
)

DRAFTER = "/srv/models/Qwen3.6-27B-DFlash-vllm"

# The hand-written command of the Qwen3.6-27B + DFlash deployment, as structured settings.
QWEN_OPTIONS = {
    "model": "/srv/models/Qwen3.6-27B",
    "tensor_parallel_size": 2,
    "max_model_len": 32768,
    "max_num_batched_tokens": 32768,
    "reasoning_parser": "qwen3",
    "tool_call_parser": "qwen3_coder",
    "language_model_only": True,
    "trust_remote_code": True,
    "speculative_method": "dflash",
    "speculative_model": DRAFTER,
    "num_speculative_tokens": 15,
}


def systemd_words(line: str) -> list[str]:
    """Split an ExecStart= value the way systemd does for the syntax systemd_quote emits.

    Whitespace separates words; single or double quotes group; inside quotes a
    backslash starts a C escape (\\\\, \\', \\", \\n, \\t, \\xHH). Then %% and $$
    collapse to % and $, as specifier and variable expansion do.
    """
    words: list[str] = []
    word: list[str] | None = None
    quote = ""
    i = 0
    while i < len(line):
        char = line[i]
        if quote:
            if char == "\\":
                nxt = line[i + 1]
                if nxt == "x":
                    word.append(chr(int(line[i + 2:i + 4], 16)))
                    i += 4
                    continue
                word.append({"n": "\n", "t": "\t"}.get(nxt, nxt))
                i += 2
                continue
            if char == quote:
                quote = ""
            else:
                word.append(char)
        elif char in " \t":
            if word is not None:
                words.append("".join(word))
                word = None
        else:
            if word is None:
                word = []
            if char in "'\"":
                quote = char
            else:
                word.append(char)
        i += 1
    assert not quote, f"unbalanced quotes in {line!r}"
    if word is not None:
        words.append("".join(word))
    return [w.replace("%%", "\0").replace("$$", "$").replace("\0", "%") for w in words]


def test_filters_are_registered():
    assert set(FilterModule().filters()) == {"vllm_serve_argv", "systemd_quote", "argv_lines"}


def test_user_command_renders_in_hand_written_order():
    assert vllm_serve_argv(QWEN_OPTIONS) == [
        "serve", "/srv/models/Qwen3.6-27B",
        "--tensor-parallel-size", "2",
        "--max-model-len", "32768",
        "--max-num-batched-tokens", "32768",
        "--reasoning-parser", "qwen3",
        "--tool-call-parser", "qwen3_coder",
        "--language-model-only",
        "--trust-remote-code",
        "--speculative-config",
        '{"method":"dflash","model":"/srv/models/Qwen3.6-27B-DFlash-vllm","num_speculative_tokens":15}',
    ]


def test_every_flag_has_its_place():
    argv = vllm_serve_argv({
        "model": "m", "host": "0.0.0.0", "port": 8000, "served_model_name": "tiny",
        "tensor_parallel_size": 1, "max_model_len": 256, "max_num_batched_tokens": 512, "max_num_seqs": 8,
        "dtype": "float32", "kv_cache_memory_bytes": 268435456, "enforce_eager": True, "reasoning_parser": "qwen3",
        "enable_auto_tool_choice": True, "tool_call_parser": "qwen3_coder", "language_model_only": True,
        "trust_remote_code": True, "attention_backend": "flash_attn", "speculative_method": "dflash",
        "speculative_model": "d", "num_speculative_tokens": 4, "extra_args": ["--seed", "0"],
    })
    assert argv == [
        "serve", "m", "--host", "0.0.0.0", "--port", "8000", "--served-model-name", "tiny",
        "--tensor-parallel-size", "1", "--max-model-len", "256", "--max-num-batched-tokens", "512",
        "--max-num-seqs", "8", "--dtype", "float32", "--kv-cache-memory-bytes", "268435456", "--enforce-eager",
        "--reasoning-parser", "qwen3", "--enable-auto-tool-choice", "--tool-call-parser", "qwen3_coder",
        "--language-model-only", "--trust-remote-code", "--attention-backend", "flash_attn",
        "--speculative-config", '{"method":"dflash","model":"d","num_speculative_tokens":4}', "--seed", "0",
    ]


def test_unset_values_and_false_switches_are_left_to_vllm():
    argv = vllm_serve_argv({
        "model": "m", "host": "", "port": None, "max_num_seqs": None, "dtype": "",
        "enforce_eager": False, "trust_remote_code": None, "speculative_method": "", "extra_args": [],
    })
    assert argv == ["serve", "m"]


def test_empty_method_drops_the_whole_speculative_config():
    argv = vllm_serve_argv({"model": "m", "speculative_method": "", "speculative_model": "d", "num_speculative_tokens": 15})
    assert "--speculative-config" not in argv


def test_speculative_keys_come_in_fixed_order_then_extras_in_theirs():
    argv = vllm_serve_argv({
        "model": "m",
        "speculative_extra": {"max_model_len": 4096, "draft_tensor_parallel_size": 1},
        "num_speculative_tokens": 15, "speculative_model": "d", "speculative_method": "dflash",
    })
    text = argv[argv.index("--speculative-config") + 1]
    assert text == '{"method":"dflash","model":"d","num_speculative_tokens":15,"max_model_len":4096,"draft_tensor_parallel_size":1}'
    assert list(json.loads(text)) == ["method", "model", "num_speculative_tokens", "max_model_len", "draft_tensor_parallel_size"]


def test_method_without_drafter_leaves_model_out():
    argv = vllm_serve_argv({"model": "m", "speculative_method": "mtp", "speculative_model": "", "num_speculative_tokens": 2})
    assert argv[-1] == '{"method":"mtp","num_speculative_tokens":2}'


def test_served_model_name_may_list_several_names():
    argv = vllm_serve_argv({"model": "m", "served_model_name": ["a", "b"]})
    assert argv == ["serve", "m", "--served-model-name", "a", "b"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"host": "x"}, "model is required"),
        ({"model": "m", "max_modle_len": 1}, "unknown options ['max_modle_len']"),
        ({"model": "m", "enforce_eager": "yes"}, "enforce_eager must be a boolean"),
        ({"model": "m", "port": True}, "port must be a string or an integer"),
        ({"model": "m", "extra_args": "--seed 0"}, "extra_args must be a list"),
        ({"model": "m", "speculative_method": "dflash", "speculative_extra": {"method": "eagle"}}, "must not set 'method'"),
        ({"model": "m", "speculative_method": "dflash", "speculative_extra": ["x"]}, "speculative_extra must be a mapping"),
        ({"model": "m", "speculative_method": "dflash", "num_speculative_tokens": "15"}, "num_speculative_tokens must be an integer"),
    ],
)
def test_bad_options_fail_with_the_option_named(options, message):
    with pytest.raises(AnsibleFilterError, match=message.replace("[", r"\[").replace("]", r"\]")):
        vllm_serve_argv(options)


def test_rejects_a_non_mapping():
    with pytest.raises(AnsibleFilterError, match="expects a mapping"):
        vllm_serve_argv(["serve", "m"])


@pytest.mark.parametrize(
    ("word", "quoted"),
    [
        ("--max-model-len", "--max-model-len"),
        ("/opt/vllm/venvs/vllm-0.20.2/bin/vllm", "/opt/vllm/venvs/vllm-0.20.2/bin/vllm"),
        (32768, "32768"),
        ("", "''"),
        ("a b", "'a b'"),
        ('{"method":"dflash"}', "'{\"method\":\"dflash\"}'"),
        ("50%", "50%%"),
        ("$HOME", "'$$HOME'"),
        ("it's", "'it\\'s'"),
        ("C:\\x", "'C:\\\\x'"),
        ("line\nbreak", "'line\\x0abreak'"),
        (";", "';'"),
    ],
)
def test_systemd_quote_examples(word, quoted):
    assert systemd_quote(word) == quoted


def test_environment_lines_keep_a_single_dollar():
    assert systemd_quote("KEY=a$b", escape_dollar=False) == "'KEY=a$b'"
    assert systemd_quote("KEY=50%", escape_dollar=False) == "KEY=50%%"


@pytest.mark.parametrize(
    "word",
    [
        '{"method":"dflash","model":"/srv/models/x y","num_speculative_tokens":15}',
        "it's a \"test\"",
        "back\\slash\\",
        "%n %% $FOO ${BAR} $$",
        "tab\there",
        "",
        "plain",
        "ünïcode path",
    ],
)
def test_quoted_words_round_trip_through_systemd_splitting(word):
    argv = ["/usr/bin/vllm", "serve", word, "--port", "8000"]
    line = " ".join(systemd_quote(item) for item in argv)
    assert systemd_words(line) == argv


def test_quoting_agrees_with_shlex_for_json_and_spaces():
    """For words without backslashes or single quotes, systemd's and the shell's splitting agree."""
    argv = ["serve", '{"method":"dflash","model":"/a b","num_speculative_tokens":15}', "x y"]
    assert shlex.split(" ".join(systemd_quote(item) for item in argv)) == argv


def test_systemd_quote_rejects_containers():
    with pytest.raises(AnsibleFilterError, match="expects a string"):
        systemd_quote(["a"])


def test_argv_lines_keeps_each_flag_with_its_values():
    argv = ["serve", "/srv/models/m", "--port", "8000", "--enforce-eager", "--speculative-config", '{"a": 1}']
    assert argv_lines(argv) == [["serve", "/srv/models/m"], ["--port", "8000"], ["--enforce-eager"],
                                ["--speculative-config", '{"a": 1}']]
    assert [w for line in argv_lines(argv) for w in line] == argv


def test_argv_lines_rejects_a_string():
    with pytest.raises(AnsibleFilterError):
        argv_lines("serve --port 8000")
