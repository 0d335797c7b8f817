"""The command-line filters: the serve plan's wrappers, and quoting that survives systemd's parser."""

from __future__ import annotations

import shlex

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.filter.vllm_args import (
    argv_lines,
    FilterModule,
    systemd_env_file_quote,
    systemd_quote,
    vllm_serve_argv,
    vllm_serve_plan_filter,
)


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
    assert set(FilterModule().filters()) == {
        "vllm_serve_argv", "vllm_serve_plan", "vllm_server_urls", "systemd_quote", "systemd_env_file_quote", "argv_lines",
        "vllm_liveness_probe", "vllm_runtime_hazards", "vllm_args_layers"}


def test_the_argv_filter_hands_over_to_the_plan_and_names_the_variable():
    assert vllm_serve_argv({"model": "m", "flavor": "cpu", "args": {"enforce-eager": True}}) == [
        "serve", "m", "--enforce-eager"]
    with pytest.raises(AnsibleFilterError, match="vllm_serve_argv: vllm_server_model .* must be set"):
        vllm_serve_argv({"model": ""})
    with pytest.raises(AnsibleFilterError, match="expects a mapping"):
        vllm_serve_argv(["serve", "m"])


def test_the_plan_filter_returns_problems_instead_of_failing():
    found = vllm_serve_plan_filter({"model": "", "port": 8000, "executable": "/x", "version": "0.20.2"})
    assert found["argv"] == [] and found["problems"][0].startswith("vllm_server_model")


@pytest.mark.parametrize(("value", "line"), [
    ("plain", '"plain"'),
    ('a"b', '"a\\"b"'),
    ("$HOME `id` \\n", '"\\$HOME \\`id\\` \\\\n"'),
])
def test_env_file_values_are_double_quoted_with_escapes(value, line):
    assert systemd_env_file_quote(value) == line


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


def test_the_liveness_probe_filter_refuses_an_empty_model_name():
    probe = FilterModule().filters()["vllm_liveness_probe"]
    assert probe("qwen3.6-27b")["path"] == "/v1/completions"
    with pytest.raises(AnsibleFilterError, match="served model name"):
        probe("")


def test_the_install_asks_the_hazard_table_about_a_flash_attn_without_ops():
    hazards = FilterModule().filters()["vllm_runtime_hazards"]
    assert "vllm#42675" in hazards({"release": "0.20.2", "flavor": "gpu", "flash_attn": "partial"})["problems"][0]
    assert hazards({"release": "0.24.0", "flavor": "gpu", "flash_attn": "partial"}) == {"problems": [], "warnings": []}
