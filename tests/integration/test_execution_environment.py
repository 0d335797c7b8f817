"""The execution environment: ansible-builder makes a valid build context from docs/execution-environment.yml, and
the collection it installs there declares its own dependencies (meta/execution-environment.yml)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def run(cmd, cwd):
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, "%s\n%s\n%s" % (" ".join(str(c) for c in cmd), done.stdout[-3000:], done.stderr[-3000:])
    return done.stdout


def test_ansible_builder_makes_a_context_that_installs_the_collection_and_its_dependencies(tmp_path):
    version = yaml.safe_load((REPO / "galaxy.yml").read_text())["version"]
    definition = yaml.safe_load((REPO / "docs" / "execution-environment.yml").read_text())
    tarball = "llmops-vllm-%s.tar.gz" % version
    # The definition names the tarball ansible-galaxy builds from this version.
    assert definition["additional_build_files"] == [{"src": tarball, "dest": "collections"}]
    assert definition["dependencies"]["galaxy"]["collections"] == [{"name": "collections/" + tarball, "type": "file"}]

    run(["ansible-galaxy", "collection", "build", "--output-path", tmp_path, REPO], REPO)
    shutil.copy(REPO / "docs" / "execution-environment.yml", tmp_path)
    run(["ansible-builder", "create", "-f", "execution-environment.yml", "-c", "context", "--output-filename", "Containerfile"], tmp_path)

    context = tmp_path / "context"
    containerfile = (context / "Containerfile").read_text()
    assert "ansible-galaxy collection install" in containerfile and "-r requirements.yml" in containerfile
    assert 'ANSIBLE_INSTALL_REFS="ansible-core>=2.19,<2.20 ansible-runner"' in containerfile
    assert (context / "_build" / "collections" / tarball).is_file()

    # What the image's galaxy stage runs (from the context's _build, as /build in the image), then the introspection
    # its builder stage runs on what it installed.
    installed = tmp_path / "installed"
    run(["ansible-galaxy", "collection", "install", "--force", "-r", "requirements.yml", "-p", installed], context / "_build")
    assert (installed / "ansible_collections" / "llmops" / "vllm" / "plugins" / "modules" / "vllm_bench.py").is_file()
    found = yaml.safe_load(run(["ansible-builder", "introspect", "--sanitize", installed], tmp_path).split("\n", 1)[1])
    assert [line.split("  #")[0] for line in found["python"]] == ["matplotlib>=3.8"]
    assert [line.split("  #")[0] for line in found["system"]] == ["openssh-clients [platform:rpm]", "openssh-client [platform:dpkg]"]
