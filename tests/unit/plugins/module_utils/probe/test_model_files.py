from __future__ import annotations

import json
import struct

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.probe.model_files import (
    ModelFilesError,
    describe_model,
    list_entries,
    read_config,
    read_safetensors_header,
    read_tensor_index,
    weight_files,
)

F32 = 4


def safetensors_bytes(tensors: dict[str, list[int]], metadata: dict | None = None) -> bytes:
    """A safetensors file, built by hand: u64 LE header length, JSON header, zeroed data."""
    header: dict = {"__metadata__": metadata} if metadata is not None else {}
    offset = 0
    for name, shape in tensors.items():
        size = F32
        for dim in shape:
            size *= dim
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + bytes(offset)


def header_only(declared_length: int, body: bytes = b"") -> bytes:
    return struct.pack("<Q", declared_length) + body


def header_of(body: bytes) -> bytes:
    """A length prefix that matches ``body``, whatever ``body`` holds."""
    return header_only(len(body), body)


@pytest.fixture
def model_dir(tmp_path):
    directory = tmp_path / "drafter"
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps({"architectures": ["DFlashDraftModel"], "num_hidden_layers": 1}))
    return directory


def test_header_gives_dtype_and_shape_and_skips_metadata(tmp_path):
    path = tmp_path / "model.safetensors"
    path.write_bytes(safetensors_bytes({"fc.weight": [64, 128], "norm.weight": [64]}, metadata={"format": "pt"}))
    assert read_safetensors_header(str(path)) == {
        "fc.weight": {"dtype": "F32", "shape": [64, 128], "bytes": 32768},
        "norm.weight": {"dtype": "F32", "shape": [64], "bytes": 256},
    }


def test_header_is_read_without_the_tensor_data(tmp_path):
    # A file cut right after its header still describes the tensors: the data is never read.
    full = safetensors_bytes({"fc.weight": [1024, 1024]})
    (length,) = struct.unpack("<Q", full[:8])
    path = tmp_path / "model.safetensors"
    path.write_bytes(full[: 8 + length])
    assert read_safetensors_header(str(path)) == {"fc.weight": {"dtype": "F32", "shape": [1024, 1024], "bytes": 4194304}}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", r"truncated: 0 bytes, shorter than the 8-byte header length"),
        (b"\x10\x00\x00", r"truncated: 3 bytes"),
        (header_only(0), r"declares a 0-byte header"),
        (header_only(200 * 1024 * 1024, b"{}"), r"declares a 209715200-byte header \(allowed: 1 to 104857600\)"),
        (header_only(100, b'{"fc.weight": {"dtype"'), r"truncated: it declares a 100-byte header but holds only 22 bytes"),
        (header_of(b"not json!"), r"is not valid JSON"),
        (header_of(b"[]"), r"is not a JSON object"),
        (header_of(b"\xff\xfe"), r"is not valid JSON"),
        (header_of(b'{"fc.weight": {"dtype": "F32"}}'), r"malformed entry for tensor fc.weight"),
        (header_of(b'{"fc.weight": {"dtype": "F32", "shape": [64, "128"]}}'), r"malformed entry for tensor fc.weight"),
    ],
)
def test_damaged_files_are_reported(tmp_path, content, message):
    path = tmp_path / "model.safetensors"
    path.write_bytes(content)
    with pytest.raises(ModelFilesError, match=message):
        read_safetensors_header(str(path))


def test_header_limit_is_a_parameter(tmp_path):
    path = tmp_path / "model.safetensors"
    path.write_bytes(safetensors_bytes({"fc.weight": [2, 2]}))
    with pytest.raises(ModelFilesError, match="allowed: 1 to 16"):
        read_safetensors_header(str(path), max_header_bytes=16)


def test_config_is_parsed(model_dir):
    assert read_config(str(model_dir)) == {"architectures": ["DFlashDraftModel"], "num_hidden_layers": 1}


def test_missing_directory(tmp_path):
    with pytest.raises(ModelFilesError, match=r"model directory .*/absent does not exist"):
        read_config(str(tmp_path / "absent"))


def test_file_instead_of_directory(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(ModelFilesError, match="is not a directory"):
        list_entries(str(tmp_path / "file"))


def test_missing_config(tmp_path):
    with pytest.raises(ModelFilesError, match=r"has no config.json"):
        read_config(str(tmp_path))


@pytest.mark.parametrize(
    ("text", "message"),
    [('{"hidden_size": 64,', "is not valid JSON"), ("[1, 2]", "holds a JSON list, not an object")],
)
def test_bad_config(model_dir, text, message):
    (model_dir / "config.json").write_text(text)
    with pytest.raises(ModelFilesError, match=message):
        read_config(str(model_dir))


def test_single_file_weights(model_dir):
    (model_dir / "model.safetensors").write_bytes(safetensors_bytes({"fc.weight": [64, 128], "norm.weight": [64]}))
    assert weight_files(str(model_dir)) == ["model.safetensors"]
    assert read_tensor_index(str(model_dir), ["fc.weight", "absent"]) == {
        "fc.weight": {"dtype": "F32", "shape": [64, 128], "bytes": 32768, "file": "model.safetensors"}
    }


def write_shards(model_dir):
    shards = {
        "model-00001-of-00002.safetensors": {"layers.0.mlp.up_proj.weight": [128, 64], "norm.weight": [64]},
        "model-00002-of-00002.safetensors": {"fc.weight": [64, 128]},
    }
    weight_map = {}
    for file_name, tensors in shards.items():
        (model_dir / file_name).write_bytes(safetensors_bytes(tensors))
        weight_map.update(dict.fromkeys(tensors, file_name))
    (model_dir / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 1}, "weight_map": weight_map}))


def test_sharded_weights_follow_the_index(model_dir):
    write_shards(model_dir)
    # A stray single file next to the index is not what loaders read.
    (model_dir / "model.safetensors").write_bytes(b"")
    assert weight_files(str(model_dir)) == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    index = read_tensor_index(str(model_dir))
    assert sorted(index) == ["fc.weight", "layers.0.mlp.up_proj.weight", "norm.weight"]
    assert index["fc.weight"] == {"dtype": "F32", "shape": [64, 128], "bytes": 32768,
                                  "file": "model-00002-of-00002.safetensors"}


def test_index_naming_a_missing_shard(model_dir):
    write_shards(model_dir)
    (model_dir / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(ModelFilesError, match="names missing shards: model-00002-of-00002.safetensors"):
        weight_files(str(model_dir))


@pytest.mark.parametrize("index", ["{", '{"metadata": {}}', '{"weight_map": {}}', "[]"])
def test_unusable_index(model_dir, index):
    (model_dir / "model.safetensors.index.json").write_text(index)
    with pytest.raises(ModelFilesError, match="weights index"):
        weight_files(str(model_dir))


def test_damaged_shard_is_reported_even_when_it_holds_none_of_the_names(model_dir):
    write_shards(model_dir)
    (model_dir / "model-00001-of-00002.safetensors").write_bytes(header_only(50, b"{}"))
    with pytest.raises(ModelFilesError, match="model-00001-of-00002.safetensors is truncated"):
        read_tensor_index(str(model_dir), ["fc.weight"])


def test_no_safetensors_weights(model_dir):
    (model_dir / "pytorch_model.bin").write_bytes(b"\0")
    assert weight_files(str(model_dir)) == []
    assert describe_model(str(model_dir), ["fc.weight"])["missing_tensors"] == ["fc.weight"]


def test_describe_lists_only_the_tensors_asked_for(model_dir):
    write_shards(model_dir)
    (model_dir / "tokenizer").mkdir()
    info = describe_model(str(model_dir), ["fc.weight", "lm_head.weight"])
    assert info["config"]["num_hidden_layers"] == 1
    assert info["files"] == [
        "config.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "model.safetensors.index.json",
        "tokenizer",
    ]
    assert info["weight_files"] == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    assert list(info["tensors"]) == ["fc.weight"]
    assert info["missing_tensors"] == ["lm_head.weight"]


def test_describe_all_tensors(model_dir):
    write_shards(model_dir)
    info = describe_model(str(model_dir), all_tensors=True)
    assert len(info["tensors"]) == 3
    assert info["missing_tensors"] == []


def test_describe_without_weights_does_not_open_them(model_dir):
    (model_dir / "model.safetensors").write_bytes(b"damaged")
    info = describe_model(str(model_dir), ["fc.weight"], read_weights=False)
    assert (info["weight_files"], info["tensors"], info["missing_tensors"]) == ([], {}, [])
    with pytest.raises(ModelFilesError, match="truncated"):
        describe_model(str(model_dir), ["fc.weight"])


def test_json_nested_past_the_parser_s_stack_is_a_clear_error(tmp_path):
    (tmp_path / "config.json").write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(ModelFilesError, match="nested too deep"):
        read_config(str(tmp_path))


@pytest.mark.parametrize("shard", ["/etc/shadow", "../outside.safetensors", "sub/../../outside.safetensors", "link/x"])
def test_an_index_naming_a_shard_outside_the_model_directory_is_never_opened(tmp_path, shard):
    model = tmp_path / "model"
    model.mkdir()
    (tmp_path / "outside.safetensors").write_bytes(b"\x08" + b"\x00" * 7 + b"{}      ")
    (model / "link").symlink_to(tmp_path)
    (model / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"w": shard}}))
    with pytest.raises(ModelFilesError, match="outside the model directory"):
        weight_files(str(model))
