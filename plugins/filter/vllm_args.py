"""Filters that turn structured vLLM server settings into a systemd ExecStart.

``vllm_serve_argv`` owns the order of the ``vllm serve`` flags, so a unit
rendered from variables can equal a command written by hand, item for item.
``systemd_quote`` owns the quoting rules of systemd's ExecStart= and
Environment= lines: the JSON of ``--speculative-config`` must reach vLLM
byte for byte, and systemd would otherwise eat its quotes, ``%`` and ``$``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

# (option, flag) pairs in the order they are rendered, after ``serve MODEL``.
# Options left unset (None or "") are not rendered, so vLLM's default applies.
VALUE_FLAGS = (
    ("host", "--host"),
    ("port", "--port"),
    ("served_model_name", "--served-model-name"),
    ("tensor_parallel_size", "--tensor-parallel-size"),
    ("max_model_len", "--max-model-len"),
    ("max_num_batched_tokens", "--max-num-batched-tokens"),
    ("max_num_seqs", "--max-num-seqs"),
    ("dtype", "--dtype"),
    ("kv_cache_memory_bytes", "--kv-cache-memory-bytes"),
)
# Switches and the value flags that follow them, still in rendering order.
TAIL_FLAGS = (
    ("enforce_eager", "--enforce-eager", "switch"),
    ("reasoning_parser", "--reasoning-parser", "value"),
    ("enable_auto_tool_choice", "--enable-auto-tool-choice", "switch"),
    ("tool_call_parser", "--tool-call-parser", "value"),
    ("language_model_only", "--language-model-only", "switch"),
    ("trust_remote_code", "--trust-remote-code", "switch"),
    ("attention_backend", "--attention-backend", "value"),
)
SPECULATIVE_OPTIONS = ("speculative_method", "speculative_model", "num_speculative_tokens", "speculative_extra")
# Keys of the speculative config that have their own option and come first, in this order.
SPECULATIVE_LEADING_KEYS = ("method", "model", "num_speculative_tokens")

KNOWN_OPTIONS = frozenset(
    ["model", "extra_args", *SPECULATIVE_OPTIONS]
    + [name for name, _flag in VALUE_FLAGS]
    + [name for name, _flag, _kind in TAIL_FLAGS]
)

# Characters that need neither quotes nor escapes in an ExecStart= word
# (``%`` is safe once doubled).
_PLAIN_WORD = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")


def _is_unset(value: Any) -> bool:
    return value is None or value == ""


def _scalar(name: str, value: Any) -> str:
    """Render one flag value; only strings and integers make sense on a command line."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise AnsibleFilterError(f"vllm_serve_argv: {name} must be a string or an integer, got {value!r}")
    return str(value)


def _switch(name: str, value: Any) -> bool:
    if _is_unset(value):
        return False
    if not isinstance(value, bool):
        raise AnsibleFilterError(f"vllm_serve_argv: {name} must be a boolean, got {value!r}")
    return value


def speculative_config(options: Mapping[str, Any]) -> dict[str, Any] | None:
    """Build the speculative config in its fixed key order, or None when no method is set."""
    method = options.get("speculative_method")
    if _is_unset(method):
        return None
    config: dict[str, Any] = {"method": _scalar("speculative_method", method)}
    model = options.get("speculative_model")
    if not _is_unset(model):
        config["model"] = _scalar("speculative_model", model)
    tokens = options.get("num_speculative_tokens")
    if not _is_unset(tokens):
        if isinstance(tokens, bool) or not isinstance(tokens, int):
            raise AnsibleFilterError(f"vllm_serve_argv: num_speculative_tokens must be an integer, got {tokens!r}")
        config["num_speculative_tokens"] = tokens
    extra = options.get("speculative_extra") or {}
    if not isinstance(extra, Mapping):
        raise AnsibleFilterError(f"vllm_serve_argv: speculative_extra must be a mapping, got {extra!r}")
    for key, value in extra.items():
        if key in SPECULATIVE_LEADING_KEYS:
            raise AnsibleFilterError(
                f"vllm_serve_argv: speculative_extra must not set {key!r}; it has its own option"
            )
        config[key] = value
    return config


def vllm_serve_argv(options: Mapping[str, Any]) -> list[str]:
    """Return the arguments of ``vllm serve`` (without the executable), one flag per item.

    Order: ``serve``, the model, the value flags of VALUE_FLAGS, the flags of
    TAIL_FLAGS, ``--speculative-config`` (compact JSON), then ``extra_args``
    verbatim.
    """
    if not isinstance(options, Mapping):
        raise AnsibleFilterError(f"vllm_serve_argv expects a mapping of options, got {type(options).__name__}")
    unknown = sorted(set(options) - KNOWN_OPTIONS)
    if unknown:
        raise AnsibleFilterError(f"vllm_serve_argv: unknown options {unknown}; known: {sorted(KNOWN_OPTIONS)}")
    model = options.get("model")
    if _is_unset(model):
        raise AnsibleFilterError("vllm_serve_argv: model is required")

    argv = ["serve", _scalar("model", model)]
    for name, flag in VALUE_FLAGS:
        value = options.get(name)
        if _is_unset(value):
            continue
        if name == "served_model_name" and isinstance(value, list):
            argv += [flag, *(_scalar(name, item) for item in value)]
        else:
            argv += [flag, _scalar(name, value)]
    for name, flag, kind in TAIL_FLAGS:
        value = options.get(name)
        if kind == "switch":
            if _switch(name, value):
                argv.append(flag)
        elif not _is_unset(value):
            argv += [flag, _scalar(name, value)]

    config = speculative_config(options)
    if config is not None:
        argv += ["--speculative-config", json.dumps(config, separators=(",", ":"), ensure_ascii=False)]

    extra_args = options.get("extra_args") or []
    if isinstance(extra_args, (str, bytes)) or not isinstance(extra_args, list):
        raise AnsibleFilterError(f"vllm_serve_argv: extra_args must be a list of arguments, got {extra_args!r}")
    argv += [_scalar("extra_args item", item) for item in extra_args]
    return argv


def _escape_in_quotes(char: str) -> str:
    """C-style escape systemd undoes inside quotes; control characters would break the unit line."""
    if char in ("\\", "'"):
        return "\\" + char
    if ord(char) < 0x20 or ord(char) == 0x7F:
        return f"\\x{ord(char):02x}"
    return char


def systemd_quote(value: Any, escape_dollar: bool = True) -> str:
    """Quote one word for a systemd ExecStart= (or, with escape_dollar=False, Environment=) line.

    ``%`` always becomes ``%%`` (specifiers are expanded everywhere, quotes or
    not). ``$`` becomes ``$$`` on ExecStart=, where systemd expands variables;
    Environment= does not expand them, so there it must stay single.
    """
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise AnsibleFilterError(f"systemd_quote expects a string or a number, got {value!r}")
    text = str(value).replace("%", "%%")
    if escape_dollar:
        text = text.replace("$", "$$")
    if _PLAIN_WORD.fullmatch(text):
        return text
    return "'" + "".join(_escape_in_quotes(char) for char in text) + "'"


def argv_lines(argv: list[Any]) -> list[list[str]]:
    """Group a command line for display: the leading words, then each flag with the values that follow it."""
    if not isinstance(argv, (list, tuple)):
        raise AnsibleFilterError(f"argv_lines expects a list of words, got {argv!r}")
    lines: list[list[str]] = []
    for word in map(str, argv):
        if word.startswith("--") or not lines:
            lines.append([word])
        else:
            lines[-1].append(word)
    return lines


class FilterModule:
    """vLLM command line filters."""

    def filters(self):
        return {
            "vllm_serve_argv": vllm_serve_argv,
            "systemd_quote": systemd_quote,
            "argv_lines": argv_lines,
        }
