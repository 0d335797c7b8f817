"""vllm_server_inputs as a user runs it: a task in a playbook, its result as the controller got it."""

from __future__ import annotations

import json

from ansible_collections.llmops.vllm.tests.helpers.ansible_cli import RC_HOST_FAILED, run_module


def inputs(check=False, **args):
    run = run_module("llmops.vllm.vllm_server_inputs", args, check=check, timeout=60)
    return run.rc, run.result()


def test_the_digest_names_the_parts_and_reads_the_records(tmp_path):
    (tmp_path / "unit").write_text("[Service]\n")
    (tmp_path / "drafter").mkdir()
    (tmp_path / "drafter" / "config.json").write_text("{}")
    (tmp_path / "history.json").write_text(json.dumps({"d0": {"unit": "u0"}}))
    (tmp_path / "checked").write_text("d0\n")
    parts = {"unit": {"files": [str(tmp_path / "unit")]}, "drafter or model files": {"trees": [str(tmp_path / "drafter")]}}
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    present = [str(tmp_path / "drafter" / "config.json"), str(tmp_path / "model"), str(tmp_path / "dangling")]
    rc, out = inputs(parts=parts, history_path=str(tmp_path / "history.json"), checked_path=str(tmp_path / "checked"),
                     present=present)
    assert rc == 0, out
    # What staging needs before vLLM can check the command: the missing model, not the link (present, unfollowed).
    assert out["absent"] == [str(tmp_path / "model")]
    assert out["changed"] is False and len(out["digest"]) == 64
    assert set(out["parts"]) == {"unit", "drafter or model files"}
    assert (out["running_pid"], out["running_digest"]) == (0, "")
    assert out["history"] == {"d0": {"unit": "u0"}} and out["checked"] == "d0"
    # Check mode reads the same.
    rc, planned = inputs(check=True, parts=parts)
    assert rc == 0 and planned["digest"] == out["digest"] and planned["history"] == {} and planned["checked"] == ""


def test_a_part_that_is_not_files_and_trees_fails_naming_it(tmp_path):
    rc, out = inputs(parts={"unit": {"file": ["/etc/x"]}})
    assert rc == RC_HOST_FAILED
    assert "parts['unit'] must be a mapping of files and trees" in out["msg"]
