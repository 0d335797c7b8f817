"""What the Galaxy tarball holds: the collection and its guide, nothing a checkout's runs wrote, and every path the
README and the guide cite, unless the README names its folder as part of the source checkout only. And the
changelog: an entry for the version galaxy.yml says."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

from ansible_collections.llmops.vllm.tests.helpers.ansible_cli import ansible_env

REPO = Path(__file__).resolve().parents[2]
VERSION = yaml.safe_load((REPO / "galaxy.yml").read_text())["version"]
# What a deploy, status, rollback or compare run, the changelog tool and Python write in a checkout.
RUN_OUTPUT = ["vllm-deploy-report.json", "vllm-prometheus-targets.json", "vllm-status.json", "vllm-rollback-report.json",
              "vllm-speed-reports/20261205T000000Z/report.md", "vllm-compare/key/latest.json",
              "changelogs/.plugin-cache.yaml", "plugins/module_utils/__pycache__/layers.cpython-311.pyc"]
DOCS = [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))
CITED = re.compile(r"(?<![\w./-])((?:playbooks|roles|plugins|docs|inventories|meta|changelogs|scripts|bench|tests|molecule|"
                   r"\.ci|requirements)/[\w./-]*)")


@pytest.fixture(scope="module")
def shipped(tmp_path_factory) -> set[str]:
    """The names in the tarball built from a copy of the checkout in which every kind of run output exists."""
    src = tmp_path_factory.mktemp("checkout") / "llmops-vllm"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".build", ".git", "output", "*.tar.gz"))
    for name in RUN_OUTPUT:
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text("{}\n")
    out = tmp_path_factory.mktemp("built")
    proc = subprocess.run(["ansible-galaxy", "collection", "build", "--output-path", str(out), str(src)],
                          capture_output=True, text=True, timeout=300, check=False, env=ansible_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with tarfile.open(out / ("llmops-vllm-%s.tar.gz" % VERSION)) as tar:
        return {member.name.rstrip("/") for member in tar.getmembers()}


def test_no_run_output_is_shipped(shipped):
    assert [output for output in RUN_OUTPUT if output in shipped] == []
    assert [name for name in shipped if name.split("/")[0] in ("vllm-speed-reports", "vllm-compare")
            or name.endswith((".pyc", ".plugin-cache.yaml"))] == []


def test_the_operations_and_their_guide_are_shipped(shipped):
    for name in ("playbooks/deploy.yml", "playbooks/status.yml", "playbooks/rollback.yml", "playbooks/remove.yml",
                 "playbooks/prune.yml", "playbooks/compare.yml", "playbooks/tune.yml", "docs/operations.md", "docs/getting-started.md",
                 "inventories/example/hosts.yml", "CHANGELOG.rst", "README.md"):
        assert name in shipped, name


def checkout_only() -> set[str]:
    """The folders the README names as part of the source checkout only."""
    line = next(para for para in (REPO / "README.md").read_text().split("\n\n") if "source checkout only" in para)
    return {name.strip("/") for name in re.findall(r"`([^`]+/)`", line.split("source checkout only")[0])}


def test_every_path_the_docs_cite_ships_or_is_named_checkout_only(shipped):
    only = checkout_only()
    assert {"scripts", "bench", "tests", "molecule", ".ci"} <= only
    missing = []
    for doc in DOCS:
        for path in CITED.findall(doc.read_text()):
            path = path.rstrip("./")
            if not path or "*" in path or path.split("/")[0] in only:
                continue
            if path not in shipped and not any(name.startswith(path + "/") for name in shipped):
                missing.append("%s: %s" % (doc.name, path))
    assert missing == []


def test_the_changelog_has_an_entry_for_this_version():
    # Made from changelogs/fragments by antsibull-changelog; ansible-test sanity's changelog test lints the fragments.
    assert re.search(r"^v%s\n=+$" % re.escape(VERSION), (REPO / "CHANGELOG.rst").read_text(), re.M), VERSION


def test_the_guide_states_the_stage_budgets_the_suite_prints():
    budgets = ast.literal_eval(re.search(r"STAGE_BUDGET_MINUTES = (\{[^}]*\})", (REPO / "tests" / "conftest.py").read_text(),
                                         re.S).group(1))
    guide = (REPO / "docs" / "development.md").read_text().split("### Time", 1)[1].split("\n\n")[2]
    rows = dict(re.findall(r"^\| (.+?)(?: \(.*\))? \| (\d+) min \|", guide, re.M))
    named = {name.replace("`", ""): int(minutes) for name, minutes in rows.items()}
    wall = int(re.search(r"^WALL_BUDGET_MINUTES = (\d+)$", (REPO / "tests" / "conftest.py").read_text(), re.M).group(1))
    assert named.pop("wall") == wall == 45, named
    assert named == {name.split(" (")[0]: minutes for name, minutes in budgets.items()}, (named, budgets)
    # molecule default runs beside lint, unit and integration: the wall is the set-up, the longer of the two, then
    # molecule fleet.
    b = {name.split(" (")[0]: minutes for name, minutes in budgets.items()}
    assert b["set-up"] + max(b["lint"] + b["unit"] + b["integration"], b["molecule default"]) + b["molecule fleet"] == wall


def test_the_guide_maps_every_module_filter_and_playbook():
    """docs/development.md's layout names each file under plugins/ and playbooks/ on the line of its folder."""
    block = (REPO / "docs" / "development.md").read_text().split("## Layout", 1)[1].split("```")[1]
    lines, folder = {}, None
    for line in block.splitlines():
        if line[:1].strip():
            folder = line.split()[0].rstrip(",")
            lines[folder] = line[len(folder):]
        elif folder:
            lines[folder] += " " + line.strip()
    files = [(p, "plugins/module_utils/%s/" % p.parent.name) for p in (REPO / "plugins" / "module_utils").glob("*/*.py")]
    files += [(p, "plugins/modules/") for p in (REPO / "plugins" / "modules").glob("*.py")]
    files += [(p, "plugins/filter/") for p in (REPO / "plugins" / "filter").glob("*.py")]
    missing = [str(p.relative_to(REPO)) for p, folder in files
               if p.stem != "__init__" and not re.search(r"\b%s\b" % p.stem, lines.get(folder, ""))]
    missing += [str(p.relative_to(REPO)) for p in (REPO / "playbooks").glob("*.yml") if p.name not in block]
    assert missing == [], missing
