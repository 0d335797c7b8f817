"""Filters that turn structured vLLM server settings into a systemd ExecStart.

``vllm_serve_argv`` and ``vllm_serve_plan`` hand the settings to
``module_utils/plan/serve``, which owns the command and its checks.
``systemd_quote`` owns the quoting rules of systemd's ExecStart= and
Environment= lines: the JSON of ``--speculative-config`` must reach vLLM
byte for byte, and systemd would otherwise eat its quotes, ``%`` and ``$``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.module_utils.probe import liveness
from ansible_collections.llmops.vllm.plugins.module_utils.plan import serve
from ansible_collections.llmops.vllm.plugins.module_utils.plan import hazards
from ansible_collections.llmops.vllm.plugins.module_utils.plan.layers import merge
from ansible_collections.llmops.vllm.plugins.module_utils.plan.rules import parse_release

# Characters that need neither quotes nor escapes in an ExecStart= word
# (``%`` is safe once doubled).
_PLAIN_WORD = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")


def vllm_serve_argv(settings: Mapping[str, Any]) -> list[str]:
    """The arguments of ``vllm serve``, one flag or value per item (module_utils/plan/serve)."""
    if not isinstance(settings, Mapping):
        raise AnsibleFilterError(f"vllm_serve_argv expects a mapping of settings, got {type(settings).__name__}")
    try:
        return serve.argv(dict(settings))
    except ValueError as e:
        raise AnsibleFilterError(f"vllm_serve_argv: {e}") from e


def vllm_args_layers(base: Mapping[str, Any], layers: Mapping[str, Any] | None) -> dict[str, Any]:
    """vllm_server_args with its named layers merged over it (module_utils/plan/layers)."""
    merged, problems = merge(base if base is not None else {}, dict(layers or {}))
    if problems:
        raise AnsibleFilterError(" ".join(problems))
    return merged


def vllm_serve_plan_filter(settings: Mapping[str, Any], reads: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The server preflight's decision: argv, problems naming the variable, warnings."""
    if not isinstance(settings, Mapping):
        raise AnsibleFilterError(f"vllm_serve_plan expects a mapping of settings, got {type(settings).__name__}")
    return serve.plan(dict(settings), dict(reads or {}))


def vllm_runtime_hazards(facts: Mapping[str, Any]) -> dict[str, list[str]]:
    """{problems, warnings} of the runtime hazard table (module_utils/plan/hazards) for facts known outside the
    server preflight: ``release``, ``flavor`` and ``flash_attn`` (``partial``: importable without flash_attn.ops)."""
    if not isinstance(facts, Mapping):
        raise AnsibleFilterError(f"vllm_runtime_hazards expects a mapping, got {type(facts).__name__}")
    try:
        release = parse_release(facts.get("release"))
    except ValueError as e:
        raise AnsibleFilterError(f"vllm_runtime_hazards: {e}") from e
    problems, warnings = hazards.check(hazards.Facts(release, facts.get("flavor", "gpu"),
                                                     flash_attn=facts.get("flash_attn")))
    return {"problems": problems, "warnings": warnings}


def vllm_server_urls(host: Any, port: Any, public_name: str) -> dict[str, str]:
    """The health URL this host probes and the endpoint clients use (module_utils/plan/serve)."""
    return serve.server_urls(host, port, public_name)


def vllm_liveness_probe(model: Any) -> dict[str, str]:
    """The watchdog's and the front door's probe request of a server serving ``model`` (module_utils/probe/liveness)."""
    if isinstance(model, bool) or not isinstance(model, (str, int, float)) or str(model) == "":
        raise AnsibleFilterError(f"vllm_liveness_probe expects the served model name, got {model!r}")
    return liveness.request(model)


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


def systemd_env_file_quote(value: Any) -> str:
    """Quote one value for a systemd EnvironmentFile= line: double quotes, with the characters systemd
    would unescape or expand there (backslash, double quote, ``$``, backquote) escaped."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise AnsibleFilterError(f"systemd_env_file_quote expects a string or a number, got {value!r}")
    text = str(value)
    for char in ("\\", '"', "$", "`"):
        text = text.replace(char, "\\" + char)
    return '"' + text + '"'


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
            "vllm_args_layers": vllm_args_layers,
            "vllm_serve_plan": vllm_serve_plan_filter,
            "vllm_server_urls": vllm_server_urls,
            "vllm_runtime_hazards": vllm_runtime_hazards,
            "vllm_liveness_probe": vllm_liveness_probe,
            "systemd_quote": systemd_quote,
            "systemd_env_file_quote": systemd_env_file_quote,
            "argv_lines": argv_lines,
        }
