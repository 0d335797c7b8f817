"""docs/variables.md is every role's variables as its meta/argument_specs.yml declares them (the main entry point's
options, which hold every other entry point's), the settings apart from the wiring inputs the playbooks set, and the
playbooks' own settings.
LLMOPS_WRITE_DOCS=1 pytest -k variables_doc writes it."""

from __future__ import annotations

import os
import re
from pathlib import Path

import yaml

from ansible_collections.llmops.vllm.plugins.module_utils.plan import variables

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "variables.md"
ROLES = ["vllm_common", "vllm_install", "vllm_drafter", "vllm_server", "vllm_frontend"]


def _text(value) -> str:
    lines = value if isinstance(value, list) else [value]
    text = " ".join(str(line).strip() for line in lines).replace("|", "\\|").replace("\n", " ")
    # Ansible's doc markup, C(x) O(x) V(x) M(x) P(x), as Markdown code.
    return re.sub(r"\b[COVMP]\(([^()]*)\)", r"`\1`", text)


def _default(option) -> str:
    if "default" not in option:
        return "required" if option.get("required") else ""
    value = option["default"]
    text = yaml.safe_dump(value, default_flow_style=True, width=10000).strip().removesuffix("...").strip()
    return "`%s`" % text.replace("|", "\\|") if len(text) <= 60 else "(see the role's defaults)"


def render() -> str:
    lines = ["<!-- Written from roles/*/meta/argument_specs.yml by tests/lint/test_variables_doc.py "
             "(LLMOPS_WRITE_DOCS=1); do not edit by hand. -->", "", "# Variables", "",
             "Every variable of every role, as its `roles/<role>/meta/argument_specs.yml` declares it (also "
             "`ansible-doc -t role llmops.vllm.<role>`). The deploy's phases (main, preflight, stage, roll) take them "
             "all; each operation's entry point (status, door, prune, ...) declares the ones it reads. The wiring inputs, "
             "listed apart under each role, are set by the collection's playbooks from one role's result for another "
             "role: an inventory does not set them. A variable with one of the collection's prefixes "
             "that is not here fails the deploy's preflight, naming the closest one; `vllm_server_args_<layer>` is the "
             "one pattern ([operations.md](operations.md)).", ""]
    for role in ROLES:
        spec = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
        main = spec["main"]
        lines += ["## %s" % role, "", _text(main.get("short_description", "")) + ".", "",
                  "Entry points: %s." % ", ".join("`%s`" % name for name in spec), ""]
        options = main.get("options") or {}
        settings = [name for name in options if name not in variables.WIRING]
        wiring = [name for name in options if name in variables.WIRING]
        for title, names in (("", settings), ("Wiring inputs, set by the collection's playbooks:", wiring)):
            if not names:
                continue
            lines += ([title, ""] if title else []) + ["| variable | type | default | description |", "|---|---|---|---|"]
            for name in names:
                option = options[name]
                cells = (name, option.get("type", "str"), _default(option), _text(option.get("description", "")))
                lines.append("| `%s` | %s | %s | %s |" % cells)
            lines.append("")
    lines += ["## The playbooks' own settings", "",
              "Read by the playbooks themselves (each playbook's header says what each does):", ""]
    for title, names in (("playbooks/deploy.yml", variables.DEPLOY), ("playbooks/compare.yml", variables.COMPARE),
                         ("the operations playbooks (status, rollback, remove)", variables.OPERATIONS)):
        lines.append("- %s: %s" % (title, ", ".join("`%s`" % name for name in names)))
    return "\n".join(lines) + "\n"


def test_the_doc_is_the_argument_specs():
    if os.environ.get("LLMOPS_WRITE_DOCS") == "1":
        DOC.write_text(render())
    assert DOC.read_text() == render(), "docs/variables.md is stale: LLMOPS_WRITE_DOCS=1 pytest -k variables_doc"


def test_every_wiring_input_is_a_role_option():
    options = set()
    for role in ROLES:
        spec = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
        options.update(spec["main"].get("options") or {})
    assert sorted(set(variables.WIRING) - options) == []
