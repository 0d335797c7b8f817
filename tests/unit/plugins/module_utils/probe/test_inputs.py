"""The identity of a server's inputs: what changes it, what does not, and how the running process's is read."""

from __future__ import annotations

import os

from ansible_collections.llmops.vllm.plugins.module_utils.probe import inputs


def parts(tmp_path, unit="unit", env="env"):
    return {"unit": {"files": [str(tmp_path / unit)]}, "env file": {"files": [str(tmp_path / env)]},
            "drafter or model files": {"trees": [str(tmp_path / "drafter")]},
            "virtualenv": {"files": [str(tmp_path / "venv" / "lib" / "python*" / "site-packages" / "*.dist-info" / "RECORD")]}}


def host(tmp_path):
    (tmp_path / "unit").write_text("[Service]\nExecStart=/opt/vllm serve\n")
    (tmp_path / "env").write_text("VLLM_API_KEY=k\n")
    drafter = tmp_path / "drafter"
    drafter.mkdir()
    (drafter / "config.json").write_text('{"a": 1}')
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    (checkpoint / "model.safetensors").write_bytes(b"x" * (inputs.SMALL + 1))
    os.symlink(checkpoint / "model.safetensors", drafter / "model.safetensors")
    record = tmp_path / "venv" / "lib" / "python3.12" / "site-packages" / "vllm-0.32.0.dist-info"
    record.mkdir(parents=True)
    (record / "RECORD").write_text("vllm/__init__.py,sha256=abc,10\n")
    return tmp_path


def test_the_same_inputs_give_the_same_digest_and_each_part_its_own(tmp_path):
    host(tmp_path)
    first, second = inputs.identity(parts(tmp_path)), inputs.identity(parts(tmp_path))
    assert first == second
    assert set(first["parts"]) == {"unit", "env file", "drafter or model files", "virtualenv"}
    assert len(set(first["parts"].values())) == 4


def test_a_staged_copy_identifies_as_the_live_file_it_will_become(tmp_path):
    host(tmp_path)
    (tmp_path / "staged-unit").write_text((tmp_path / "unit").read_text())
    (tmp_path / "staged-env").write_text((tmp_path / "env").read_text())
    assert inputs.identity(parts(tmp_path, "staged-unit", "staged-env")) == inputs.identity(parts(tmp_path))


def test_each_input_changes_only_its_part(tmp_path):
    host(tmp_path)
    before = inputs.identity(parts(tmp_path))
    changes = {
        "unit": lambda: (tmp_path / "unit").write_text("[Service]\nExecStart=/opt/vllm serve --x\n"),
        "env file": lambda: (tmp_path / "env").write_text("VLLM_API_KEY=other\n"),
        "drafter or model files": lambda: (tmp_path / "drafter" / "config.json").write_text('{"a": 2}'),
        "virtualenv": lambda: (tmp_path / "venv" / "lib" / "python3.12" / "site-packages" / "flash_attn-2.8.dist-info").mkdir()
        or (tmp_path / "venv" / "lib" / "python3.12" / "site-packages" / "flash_attn-2.8.dist-info" / "RECORD").write_text("f\n"),
    }
    for name, change in changes.items():
        change()
        after = inputs.identity(parts(tmp_path))
        assert after["digest"] != before["digest"], name
        assert [part for part in after["parts"] if after["parts"][part] != before["parts"][part]] == [name]
        before = after


def test_a_large_file_counts_by_size_and_mtime_through_its_link(tmp_path):
    host(tmp_path)
    before = inputs.identity(parts(tmp_path))
    big = tmp_path / "checkpoint" / "model.safetensors"
    os.utime(big, ns=(big.stat().st_atime_ns, big.stat().st_mtime_ns + 10**9))
    assert inputs.identity(parts(tmp_path))["parts"]["drafter or model files"] != before["parts"]["drafter or model files"]


def test_a_missing_file_and_a_new_file_in_a_tree_count(tmp_path):
    host(tmp_path)
    before = inputs.identity(parts(tmp_path))
    (tmp_path / "drafter" / "tokenizer.json").write_text("{}")
    assert inputs.identity(parts(tmp_path))["digest"] != before["digest"]
    (tmp_path / "env").unlink()
    assert inputs.part_digest({"files": [str(tmp_path / "env")]}) != before["parts"]["env file"]


def test_content_is_read_without_following_a_link(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("root only")
    os.symlink(secret, tmp_path / "link")
    assert inputs.files_entries([str(tmp_path / "link")])[0][1].startswith("link to ")
    assert inputs._content(str(tmp_path / "link")) is None


def test_the_running_digest_comes_from_the_process_environment(tmp_path):
    proc = tmp_path / "proc" / "42"
    proc.mkdir(parents=True)
    (proc / "environ").write_bytes(b"HOME=/var/lib/vllm\0LLMOPS_VLLM_INPUTS=abc123\0VLLM_API_KEY=k\0")
    assert inputs.running_digest(42, proc=str(tmp_path / "proc")) == "abc123"
    (proc / "environ").write_bytes(b"HOME=/var/lib/vllm\0")
    assert inputs.running_digest(42, proc=str(tmp_path / "proc")) is None
    assert inputs.running_digest(0) is None
    assert inputs.running_digest(43, proc=str(tmp_path / "proc")) is None
    assert inputs.running_digest(os.getpid()) is None or isinstance(inputs.running_digest(os.getpid()), str)


def test_where_root_may_not_read_the_environment_the_reader_given_reads_it(tmp_path, monkeypatch):
    real_open = open

    def refuse(path, *args, **kwargs):
        if str(path).endswith("/environ"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", refuse)
    asked = []

    def reader(path):
        asked.append(path)
        return b"LLMOPS_VLLM_INPUTS=fromuser\0"

    assert inputs.running_digest(42, proc="/proc", read=reader) == "fromuser"
    assert asked == ["/proc/42/environ"]
    assert inputs.running_digest(42, proc="/proc") is None


def test_the_history_keeps_the_newest_identities_last():
    history = {}
    for n in range(10):
        history = inputs.remember(history, {"digest": "d%d" % n, "parts": {"unit": str(n)}})
    assert list(history) == ["d%d" % n for n in range(2, 10)]
    history = inputs.remember(history, {"digest": "d3", "parts": {"unit": "3"}})
    assert list(history)[-1] == "d3" and len(history) == 8
    assert inputs.env_file("d3") == "LLMOPS_VLLM_INPUTS=d3\n"


def roll(drafter, staged):
    """What the drafter role's roll does to its render directory: links made, other links removed, config copied."""
    for name in os.listdir(drafter):
        if os.path.islink(drafter / name) and name not in staged["links"]:
            os.unlink(drafter / name)
    for name, target in staged["links"].items():
        if os.path.lexists(drafter / name):
            os.unlink(drafter / name)
        os.symlink(target, drafter / name)
    for name, path in staged["files"].items():
        (drafter / name).write_bytes(open(path, "rb").read())


def test_a_staged_tree_identifies_as_the_tree_the_roll_will_leave(tmp_path):
    host(tmp_path)
    drafter, checkpoint = tmp_path / "drafter", tmp_path / "checkpoint"
    (checkpoint / "extra.json").write_text("{}")
    os.symlink(checkpoint / "gone.bin", drafter / "stale.bin")
    (drafter / "sub").mkdir()
    (drafter / "sub" / "kept.txt").write_text("kept")
    (tmp_path / ".config.json.staged").write_text('{"a": 2}')
    staged = {"files": {"config.json": str(tmp_path / ".config.json.staged")},
              "links": {"model.safetensors": str(checkpoint / "model.safetensors"), "extra.json": str(checkpoint / "extra.json")}}
    before = inputs.identity(parts(tmp_path))
    predicted = inputs.identity(parts(tmp_path), {str(drafter) + "/": staged})
    assert predicted["digest"] != before["digest"]
    assert predicted["parts"]["unit"] == before["parts"]["unit"]
    roll(drafter, staged)
    assert inputs.identity(parts(tmp_path)) == predicted


def test_a_staged_tree_that_changes_nothing_keeps_the_identity(tmp_path):
    host(tmp_path)
    drafter = tmp_path / "drafter"
    (tmp_path / ".config.json.staged").write_text((drafter / "config.json").read_text())
    staged = {"files": {"config.json": str(tmp_path / ".config.json.staged")},
              "links": {"model.safetensors": os.readlink(drafter / "model.safetensors")}}
    assert inputs.identity(parts(tmp_path), {str(drafter): staged}) == inputs.identity(parts(tmp_path))
    # A link the roll would point elsewhere, or one it would add, is a change.
    other = dict(staged, links={"model.safetensors": str(tmp_path / "checkpoint")})
    assert inputs.identity(parts(tmp_path), {str(drafter): other}) != inputs.identity(parts(tmp_path))


def test_a_staged_tree_not_made_yet_identifies_as_its_first_roll(tmp_path):
    host(tmp_path)
    drafter = tmp_path / "drafter"
    staged = {"files": {"config.json": str(drafter / "config.json")},
              "links": {"model.safetensors": os.readlink(drafter / "model.safetensors")}}
    expected = inputs.identity(parts(tmp_path))
    (tmp_path / "saved.json").write_text((drafter / "config.json").read_text())
    os.unlink(drafter / "model.safetensors")
    os.unlink(drafter / "config.json")
    os.rmdir(drafter)
    staged["files"]["config.json"] = str(tmp_path / "saved.json")
    assert inputs.identity(parts(tmp_path), {str(drafter): staged}) == expected
