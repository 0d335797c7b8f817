"""The vllm_drafter role, run by ansible-playbook against tiny model directories on localhost."""

from __future__ import annotations

import grp
import hashlib
import json
import os
import pwd
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from ansible_collections.llmops.vllm.tests.helpers.ansible_cli import AnsibleRun, run_playbook

from ansible_collections.llmops.vllm.tests.fixtures.models.tiny_checkpoints import (
    MASK_TOKEN_ID,
    drafter_config,
    target_config,
    write_tiny_drafter,
    write_tiny_target,
)

PLAYBOOK = """\
- name: Prepare the drafter
  hosts: localhost
  gather_facts: false
  become: false
  tasks:
    # One entry point, or phases in order (the stage and roll entry points follow a preflight, as in the deploy).
    - name: Run the drafter role
      ansible.builtin.include_role:
        name: llmops.vllm.vllm_drafter
        tasks_from: "{{ phase }}"
      loop: "{{ [entry_point] if entry_point is string else entry_point }}"
      loop_control:
        loop_var: phase

    # The role keeps no backup beside the live config (the server role keeps what its last good start loaded).
    - name: Save the role's result and any backup it left
      ansible.builtin.copy:
        content: >-
          {{ {'changed': vllm_drafter_result.changed if vllm_drafter_result is defined else None,
              'backup': query('ansible.builtin.fileglob', vllm_common_drafter_dir ~ '/config.json.*') | first | default('')}
             | to_json }}
        dest: "{{ facts_file }}"
        mode: "0644"
      check_mode: false
      changed_when: false
"""

RECAP = re.compile(r"^localhost\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.MULTILINE)


@dataclass
class Run:
    returncode: int
    output: str
    changed: int
    failed: int
    facts: dict | None


@pytest.fixture
def models(tmp_path):
    """The tiny target and drafter (header-only weights) on the 'host'."""
    root = tmp_path / "models"
    return write_tiny_target(root / "tiny-qwen3"), write_tiny_drafter(root / "tiny-qwen3-dflash")


@pytest.fixture
def role_vars(tmp_path, models):
    target, drafter = models
    return {
        "vllm_drafter_target_model_dir": str(target),
        "vllm_drafter_dir": str(drafter),
        "vllm_common_drafter_dir": str(tmp_path / "render" / drafter.name),
        "vllm_common_version": "0.32.0",
        "vllm_drafter_owner": pwd.getpwuid(os.getuid()).pw_name,
        "vllm_drafter_group": grp.getgrgid(os.getgid()).gr_name,
    }


@pytest.fixture
def play(tmp_path):
    """Run the role with the given variables; returns the recap and what the role tells the server role."""
    runs = iter(range(1000))

    def run(variables: dict, check: bool = False, entry_point: str | list = "main") -> Run:
        facts_file = tmp_path / f"facts-{next(runs)}.json"
        result = run_playbook(PLAYBOOK, extra_vars={**variables, "entry_point": entry_point, "facts_file": str(facts_file)},
                              check=check, timeout=300)
        recap = RECAP.search(result.stdout)
        assert recap, result.report()
        facts = json.loads(facts_file.read_text()) if facts_file.exists() else None
        return Run(result.rc, result.output, int(recap.group(2)), int(recap.group(4)), facts)

    return run


def snapshot(directory: Path) -> dict:
    """Content, mode and mtime of every file: anything the role might have touched."""
    return {
        str(path.relative_to(directory)): (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mode, path.stat().st_mtime_ns)
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def rendered_config(role_vars: dict) -> dict:
    return json.loads((Path(role_vars["vllm_common_drafter_dir"]) / "config.json").read_text())


def test_renders_the_config_and_links_and_leaves_the_checkpoint_alone(play, role_vars, models):
    _target, drafter = models
    before = snapshot(drafter)
    render_dir = Path(role_vars["vllm_common_drafter_dir"])

    first = play(role_vars)

    assert first.returncode == 0, first.output
    assert first.facts == {"changed": True, "backup": ""}
    config = rendered_config(role_vars)
    # Two ids from fc.weight's width (2 x 64) on a 2-layer target, as vLLM >= 0.22 reads them.
    assert config["dflash_config"] == {"mask_token_id": MASK_TOKEN_ID, "target_layer_ids": [0, 1]}
    assert config["num_target_layers"] == 2
    assert config["architectures"] == ["DFlashDraftModel"]
    original = drafter_config(target_config())
    assert {key: value for key, value in config.items() if key not in ("dflash_config", "num_target_layers")} == {
        key: value for key, value in original.items() if key != "dflash_config"
    }
    assert sorted(path.name for path in render_dir.iterdir()) == ["config.json", "model.safetensors"]
    assert (render_dir / "model.safetensors").is_symlink()
    assert os.readlink(render_dir / "model.safetensors") == str(drafter / "model.safetensors")
    assert not (render_dir / "config.json").is_symlink()
    assert (render_dir / "config.json").stat().st_mode & 0o777 == 0o644
    assert render_dir.stat().st_mode & 0o777 == 0o755
    assert snapshot(drafter) == before

    second = play(role_vars)

    assert second.returncode == 0, second.output
    assert second.changed == 0, second.output
    assert second.facts == {"changed": False, "backup": ""}
    assert snapshot(drafter) == before


def test_check_mode_writes_nothing(play, role_vars):
    render_dir = Path(role_vars["vllm_common_drafter_dir"])

    planned = play(role_vars, check=True)

    assert planned.returncode == 0, planned.output
    assert planned.facts["changed"] is True
    assert not render_dir.exists()

    assert play(role_vars).returncode == 0
    rendered = snapshot(render_dir)
    overridden = {**role_vars, "vllm_drafter_config_overrides": {"max_position_embeddings": 256}}

    predicted = play(overridden, check=True)

    assert predicted.returncode == 0, predicted.output
    assert predicted.facts["changed"] is True
    assert snapshot(render_dir) == rendered
    assert play(role_vars, check=True).changed == 0


def test_staging_renders_the_new_config_beside_the_live_one(play, role_vars):
    render_dir = Path(role_vars["vllm_common_drafter_dir"])
    staged = render_dir.parent / f".{render_dir.name}.config.json.staged"
    assert play(role_vars).returncode == 0
    live = (render_dir / "config.json").read_text()
    assert staged.read_text() == live
    overridden = {**role_vars, "vllm_drafter_config_overrides": {"max_position_embeddings": 256}}

    staging = play(overridden, entry_point=["preflight", "stage"])

    assert staging.returncode == 0, staging.output
    assert staging.changed == 1, staging.output
    # vLLM still reads the live config: nothing to restart for yet.
    assert staging.facts == {"changed": False, "backup": ""}
    assert (render_dir / "config.json").read_text() == live
    assert json.loads(staged.read_text())["max_position_embeddings"] == 256

    rolled = play(overridden)

    assert rolled.returncode == 0, rolled.output
    assert rolled.facts == {"changed": True, "backup": ""}
    assert (render_dir / "config.json").read_text() == staged.read_text()
    assert rendered_config(role_vars)["max_position_embeddings"] == 256


def test_changes_follow_the_checkpoint_files(play, role_vars, models):
    _target, drafter = models
    render_dir = Path(role_vars["vllm_common_drafter_dir"])
    assert play(role_vars).returncode == 0
    previous = (render_dir / "config.json").read_text()
    (drafter / "tokenizer.json").write_text("{}")

    updated = play({**role_vars, "vllm_drafter_config_overrides": {"max_position_embeddings": 256, "dflash_config": {"block_size": 4}}})

    assert updated.returncode == 0, updated.output
    assert updated.facts == {"changed": True, "backup": ""}
    assert previous != (render_dir / "config.json").read_text()
    config = rendered_config(role_vars)
    assert config["max_position_embeddings"] == 256
    # Overrides merge recursively: the computed ids and the mask stay.
    assert config["dflash_config"] == {"block_size": 4, "mask_token_id": MASK_TOKEN_ID, "target_layer_ids": [0, 1]}
    assert os.readlink(render_dir / "tokenizer.json") == str(drafter / "tokenizer.json")

    (drafter / "tokenizer.json").unlink()
    pruned = play({**role_vars, "vllm_drafter_config_overrides": {"max_position_embeddings": 256, "dflash_config": {"block_size": 4}}})

    assert pruned.returncode == 0, pruned.output
    assert pruned.facts == {"changed": True, "backup": ""}
    assert not (render_dir / "tokenizer.json").is_symlink()


def test_copies_the_models_from_the_controller(play, role_vars, models, tmp_path):
    target, drafter = models
    host = tmp_path / "host"
    copied = {
        **role_vars,
        "vllm_drafter_target_model_src": str(target),
        "vllm_drafter_target_model_dir": str(host / "tiny-qwen3"),
        "vllm_drafter_src": str(drafter),
        "vllm_drafter_dir": str(host / "tiny-qwen3-dflash"),
    }

    planned = play(copied, check=True)

    assert planned.returncode == 0, planned.output
    assert planned.facts["changed"] is True
    assert not host.exists()

    first = play(copied)

    assert first.returncode == 0, first.output
    assert first.facts["changed"] is True
    assert snapshot(host / "tiny-qwen3-dflash").keys() == snapshot(drafter).keys()
    assert snapshot(host / "tiny-qwen3").keys() == snapshot(target).keys()
    assert {path.stat().st_mode & 0o777 for path in host.rglob("*") if path.is_file()} == {0o644}
    assert {path.stat().st_mode & 0o777 for path in host.rglob("*") if path.is_dir()} == {0o755}
    render_dir = Path(copied["vllm_common_drafter_dir"])
    assert os.readlink(render_dir / "model.safetensors") == str(host / "tiny-qwen3-dflash" / "model.safetensors")
    assert rendered_config(copied)["dflash_config"]["target_layer_ids"] == [0, 1]

    second = play(copied)

    assert second.returncode == 0, second.output
    assert second.changed == 0, second.output
    assert second.facts["changed"] is False
    # Without a checksum of either side: the note beside each directory holds what its last copy sent.
    assert "Copy the models from the controller, where they differ from the last copy" in second.output
    assert "skipping: [localhost] => (item=the target model)" in second.output, second.output
    note = json.loads((host / ".tiny-qwen3.copied.json").read_text())
    assert [entry[:2] for entry in note] == [[p.name, p.stat().st_size] for p in sorted(target.iterdir())]

    # A file new on the controller is sent, and the role says the model files changed.
    (target / "extra.txt").write_text("x")
    third = play(copied)

    assert third.returncode == 0, third.output
    assert (host / "tiny-qwen3" / "extra.txt").read_text() == "x"
    assert third.facts["changed"] is True


def test_a_bad_controller_copy_fails_before_anything_is_copied(play, role_vars, tmp_path):
    unmasked = write_tiny_drafter(tmp_path / "controller" / "drafter", dflash_config={})
    host_dir = tmp_path / "host" / "drafter"

    run = play({**role_vars, "vllm_drafter_src": str(unmasked), "vllm_drafter_dir": str(host_dir)})

    assert run.returncode != 0
    assert "vllm_drafter_mask_token_id" in run.output
    assert not host_dir.exists()
    assert not Path(role_vars["vllm_common_drafter_dir"]).exists()


def _drafter(root: Path, **changes) -> dict:
    return {"vllm_drafter_dir": str(write_tiny_drafter(root / "drafter", **changes))}


# The wiring of each kind of setting into the one check; module_utils' tests carry the cases.
@pytest.mark.parametrize(
    ("change", "named"),
    [
        pytest.param(
            lambda root: {"vllm_common_drafter_dir": str(root / "models" / "tiny-qwen3-dflash" / "vllm")}, ["vllm_common_drafter_dir"], id="render-inside"
        ),
        pytest.param(lambda root: {"vllm_drafter_target_model_dir": str(root / "absent")}, ["vllm_drafter_target_model_dir"], id="no-target"),
        pytest.param(lambda root: {"vllm_drafter_dir": ""}, ["vllm_drafter_dir"], id="drafter-unset"),
        pytest.param(lambda root: {"vllm_drafter_target_layer_ids": [0]}, ["vllm_drafter_target_layer_ids"], id="fc-width-mismatch"),
        pytest.param(
            lambda root: {**_drafter(root, architectures=["DFlash2DraftModel"]), "vllm_drafter_mask_token_id": 384},
            ["vllm_drafter_dir: architectures", "vllm_drafter_mask_token_id: the drafter config sets mask token 384"],
            id="two-problems-one-message",
        ),
    ],
)
def test_bad_inputs_fail_naming_the_variable_and_write_nothing(play, role_vars, models, tmp_path, change, named):
    _target, drafter = models
    before = snapshot(drafter)
    variables = {**role_vars, **change(tmp_path)}

    run = play(variables)

    assert run.returncode != 0
    assert run.failed == 1
    messages = [line for line in run.output.splitlines() if '"msg"' in line or "fatal:" in line]
    assert any(all(name in line for name in named) for line in messages), run.output
    assert not Path(role_vars["vllm_common_drafter_dir"]).exists()
    assert snapshot(drafter) == before


@pytest.mark.parametrize(("draft_layers", "expected"), [(1, [1]), (2, [0, 1])])
def test_without_readable_weights_one_id_per_draft_layer(play, role_vars, tmp_path, draft_layers, expected):
    drafter = write_tiny_drafter(tmp_path / "bin-drafter", weights=False, num_hidden_layers=draft_layers)
    (drafter / "pytorch_model.bin").write_bytes(b"\0")
    variables = {**role_vars, "vllm_drafter_dir": str(drafter)}

    run = play(variables)

    assert run.returncode == 0, run.output
    assert rendered_config(variables)["dflash_config"]["target_layer_ids"] == expected


@pytest.mark.parametrize(
    ("version", "explicit", "expected"),
    [
        ("0.20.2", [], [2, 5]),  # the checkpoint's ids as trained, one layer later for vLLM < 0.22
        ("0.32.0", [], [1, 4]),
        ("0.20.2", [3, 6], [3, 6]),  # an explicit list is written as is
    ],
)
def test_checkpoint_ids_are_converted_for_the_vllm_version(play, role_vars, tmp_path, version, explicit, expected):
    deep = write_tiny_target(tmp_path / "deep-target", num_hidden_layers=8)
    drafter = write_tiny_drafter(tmp_path / "trained-drafter", dflash_config={"mask_token_id": MASK_TOKEN_ID, "target_layer_ids": [1, 4]})
    variables = {
        **role_vars,
        "vllm_drafter_target_model_dir": str(deep),
        "vllm_drafter_dir": str(drafter),
        "vllm_common_version": version,
        "vllm_drafter_target_layer_ids": explicit,
    }

    run = play(variables)

    assert run.returncode == 0, run.output
    config = rendered_config(variables)
    assert config["dflash_config"]["target_layer_ids"] == expected
    assert config["num_target_layers"] == 8
    assert json.loads((drafter / "config.json").read_text())["dflash_config"]["target_layer_ids"] == [1, 4]


def test_preflight_entry_point_only_reads(play, role_vars):
    run = play(role_vars, entry_point="preflight")

    assert run.returncode == 0, run.output
    assert run.changed == 0
    assert not Path(role_vars["vllm_common_drafter_dir"]).exists()


def test_preflight_entry_point_rejects_bad_inputs_too(play, role_vars):
    run = play({**role_vars, "vllm_drafter_target_layer_ids": [0]}, entry_point="preflight")

    assert run.returncode != 0
    assert "vllm_drafter_target_layer_ids" in run.output


def run_steps(role_vars: dict, steps: list[dict]) -> AnsibleRun:
    """One play that includes the role once per step, each with its own entry point and variables.

    The variables are play vars, not extra vars, so each include's own vars can override them.
    """
    return run_playbook([{
        "name": "Check then deploy",
        "hosts": "localhost",
        "gather_facts": False,
        "vars": role_vars,
        "tasks": [
            {
                "name": f"Run the role from {step['entry_point']}",
                "ansible.builtin.include_role": {"name": "llmops.vllm.vllm_drafter", "tasks_from": step["entry_point"]},
                "vars": step.get("vars", {}),
            }
            for step in steps
        ],
    }], timeout=300)


def test_the_deploys_phases_check_once(role_vars):
    proc = run_steps(role_vars, [{"entry_point": "preflight"}, {"entry_point": "stage"}, {"entry_point": "roll"}])

    assert proc.rc == 0, proc.report()
    assert proc.stdout.count("TASK [llmops.vllm.vllm_drafter : Check the drafter, its target and the settings agree]") == 1, proc.stdout
    assert rendered_config(role_vars)["dflash_config"]["target_layer_ids"] == [0, 1]


def test_main_checks_again_when_the_settings_changed_since_preflight(role_vars):
    steps = [{"entry_point": "preflight"}, {"entry_point": "main", "vars": {"vllm_drafter_target_layer_ids": [0]}}]

    proc = run_steps(role_vars, steps)

    assert proc.rc != 0
    assert "vllm_drafter_target_layer_ids: 1 ids [0] (as set)" in proc.output
    assert not Path(role_vars["vllm_common_drafter_dir"]).exists()
