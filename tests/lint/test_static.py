"""Static gates: ansible-lint (production profile), ansible-test sanity,
rendered module docs, and role metadata kept in step with defaults."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from ansible_collections.llmops.vllm.tests.helpers.ansible_cli import ansible_env

REPO = Path(__file__).resolve().parents[2]
ROLES = sorted(p for p in (REPO / "roles").iterdir() if (p / "defaults" / "main.yml").exists())


def run(cmd: list[str], cwd: Path = REPO, timeout: int = 1800) -> subprocess.CompletedProcess:
    # ansible-lint and ansible-doc resolve llmops.vllm.* the way the other tests' Ansible runs do.
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False, env=ansible_env())


def test_ansible_lint_production_profile_is_clean():
    proc = run(["ansible-lint", "--offline", "--strict"])
    assert proc.returncode == 0, proc.stdout[-8000:] + proc.stderr[-4000:]


def _tracked_files() -> list[str]:
    out = run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"]).stdout
    return [f for f in out.split("\0") if f and (REPO / f).is_file()]


def test_ansible_test_sanity_is_clean(tmp_path):
    # ansible-test wants the collection at ansible_collections/<ns>/<name>.
    root = tmp_path / "ansible_collections" / "llmops" / "vllm"
    for rel in _tracked_files():
        dest = root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, dest)
    # ansible-test installs its pinned linters into the interpreter it runs on:
    # that is a venv of its own (scripts/bootstrap.sh), not the tool venv.
    venv_bin = Path(os.environ["LLMOPS_SANITY_VENV"]) / "bin"
    env = dict(os.environ, PATH=f"{venv_bin}{os.pathsep}{os.environ['PATH']}")
    proc = subprocess.run(
        [str(venv_bin / "ansible-test"), "sanity", "--color", "no", "--python", "3.11", "--requirements"],
        cwd=root, capture_output=True, text=True, timeout=2400, env=env, check=False,
    )
    assert proc.returncode == 0, proc.stdout[-10000:] + proc.stderr[-6000:]


def test_the_action_group_holds_every_module():
    # module_defaults for group/llmops.vllm.vllm reach only the modules listed: a module left out ignores them.
    listed = yaml.safe_load((REPO / "meta" / "runtime.yml").read_text())["action_groups"]["vllm"]
    assert sorted(listed) == sorted(p.stem for p in (REPO / "plugins" / "modules").glob("*.py") if p.stem != "__init__")


@pytest.mark.parametrize("plugin", ["llmops.vllm.vllm_wait", "llmops.vllm.vllm_model_info", "llmops.vllm.vllm_config_check",
                                    "llmops.vllm.vllm_port_owner"])
def test_module_docs_render(plugin):
    proc = run(["ansible-doc", plugin])
    assert proc.returncode == 0, proc.stderr
    assert "OPTIONS" in proc.stdout and "RETURN VALUES" in proc.stdout


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_argument_specs_match_defaults(role):
    """main declares every default; another entry point declares the same options, or the ones its tasks read."""
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text()) or {}
    specs = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    assert sorted(specs["main"].get("options", {})) == sorted(defaults), f"{role.name}:main options differ from defaults"
    for entry, spec in specs.items():
        options = spec.get("options", {})
        for name, option in options.items():
            assert name in defaults and option.get("default") == defaults[name], f"{role.name}:{entry} default of {name}"
        if entry != "main" and (role / "tasks" / f"{entry}.yml").exists():
            missing = sorted(_options_read(role, entry, set(defaults)) - set(options))
            assert missing == [], f"{role.name}:{entry} reads options its spec does not declare: {missing}"


def _options_read(role: Path, entry: str, options: set[str]) -> set[str]:
    """The role's options an entry point's tasks read: in its task files and those they include, and through the
    role's own variables (vars/main.yml, defaults/main.yml) those name."""
    variables = {}
    for name in ("vars", "defaults"):
        path = role / name / "main.yml"
        if path.exists():
            variables.update((key, yaml.safe_dump(value)) for key, value in (yaml.safe_load(path.read_text()) or {}).items())
    prefix = role.name + "_"
    found: set[str] = set()

    def names(text: str) -> None:
        for name in set(re.findall(r"\b(_?%s\w+)\b" % re.escape(prefix), text)) - found:
            found.add(name)
            names(variables.get(name, ""))

    todo, seen = [entry + ".yml"], set()
    while todo:
        path = role / "tasks" / todo.pop()
        if path in seen or not path.exists():
            continue
        seen.add(path)
        text = path.read_text()
        names(text)
        todo += re.findall(r"(?:include_tasks|import_tasks):\s*(?:\n\s*file:\s*)?([\w.]+\.yml)", text)
    return found & options


# JSON has no comment syntax, so rendered JSON files carry no header. A partial (_NAME.j2) is no file of its own: it
# is included by a template that carries the header.
COMMENTABLE_TEMPLATES = sorted(t for t in REPO.glob("roles/*/templates/*.j2")
                               if not t.name.endswith(".json.j2") and not t.name.startswith("_"))
PARTIALS = sorted(REPO.glob("roles/*/templates/_*.j2"))


@pytest.mark.parametrize("template", COMMENTABLE_TEMPLATES, ids=lambda p: p.name)
def test_templates_carry_the_managed_header(template):
    assert "ansible_managed | comment" in template.read_text().splitlines()[0]


@pytest.mark.parametrize("partial", PARTIALS, ids=lambda p: p.name)
def test_partials_are_included_by_a_template(partial):
    including = [t for t in COMMENTABLE_TEMPLATES if t.parent == partial.parent and "'%s'" % partial.name in t.read_text()]
    assert including, "%s is included by no template" % partial.name
