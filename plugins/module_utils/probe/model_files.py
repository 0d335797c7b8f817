# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read what a Hugging Face model directory declares, without loading weights.

A safetensors file starts with an 8-byte little-endian header length and a
JSON header that names every tensor with its dtype, shape and byte offsets;
the tensor data follows. Reading only that header tells a 50 GB checkpoint's
layer shapes in milliseconds, with the standard library alone.
"""

from __future__ import annotations

import json
import os
import struct

CONFIG_FILE = "config.json"
SINGLE_WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX_FILE = "model.safetensors.index.json"

# Real headers are kilobytes to a few megabytes; a larger length means the
# file is not safetensors (or is damaged), and must not be read into memory.
MAX_HEADER_BYTES = 100 * 1024 * 1024

_LENGTH_PREFIX = struct.Struct("<Q")


class ModelFilesError(Exception):
    """A model directory or file that cannot be read as declared."""


# A config.json or weights index is kilobytes; hub checkpoints' largest indexes are a few megabytes.
MAX_JSON_BYTES = 64 * 1024 * 1024


def _parse_json(raw, what, path):
    """``raw`` parsed; a ModelFilesError, never a RecursionError, for JSON nested past the parser's stack."""
    try:
        return json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise ModelFilesError("%s %s is nested too deep to be a model's file" % (what, path))
    except ValueError as exc:
        raise ModelFilesError("%s %s is not valid JSON: %s" % (what, path, exc))


def _load_json(path, what):
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_JSON_BYTES + 1)
    except OSError as exc:
        raise ModelFilesError("cannot read %s %s: %s" % (what, path, exc))
    if len(raw) > MAX_JSON_BYTES:
        raise ModelFilesError("%s %s is larger than %d MiB: not a model's file" % (what, path, MAX_JSON_BYTES >> 20))
    return _parse_json(raw, what, path)


def _inside(model_dir, name):
    """Whether the file ``name`` of an index lies inside ``model_dir``: a relative path without .. components, whose
    real path (links followed, as a hub cache's are) stays under the directory's. A shard named /etc/shadow, or
    ../../etc/shadow, is never opened."""
    if not name or os.path.isabs(name) or ".." in name.replace("\\", "/").split("/") or "\x00" in name:
        return False
    base = os.path.realpath(model_dir)
    return os.path.commonpath([base, os.path.realpath(os.path.join(model_dir, name))]) == base


def check_model_dir(model_dir):
    """Fail unless ``model_dir`` is an existing directory."""
    if not os.path.exists(model_dir):
        raise ModelFilesError("model directory %s does not exist" % model_dir)
    if not os.path.isdir(model_dir):
        raise ModelFilesError("model path %s is not a directory" % model_dir)


def read_config(model_dir):
    """Return the parsed ``config.json`` of ``model_dir`` (a JSON object)."""
    check_model_dir(model_dir)
    path = os.path.join(model_dir, CONFIG_FILE)
    if not os.path.isfile(path):
        raise ModelFilesError("%s has no %s" % (model_dir, CONFIG_FILE))
    config = _load_json(path, "model config")
    if not isinstance(config, dict):
        raise ModelFilesError("model config %s holds a JSON %s, not an object" % (path, type(config).__name__))
    return config


def list_entries(model_dir):
    """Sorted names of the top-level entries (files, folders, links) of ``model_dir``."""
    check_model_dir(model_dir)
    return sorted(os.listdir(model_dir))


def manifest(model_dir):
    """Every regular file under ``model_dir`` as [path relative to it, size, mtime in ns], sorted: what a copy of
    the directory would send, stated without reading a byte of it (so a 50 GB checkpoint costs one stat per file)."""
    check_model_dir(model_dir)
    out = []
    for root, dirs, files in os.walk(model_dir):
        dirs.sort()
        for name in files:
            path = os.path.join(root, name)
            if os.path.isfile(path):
                stat = os.stat(path)
                out.append([os.path.relpath(path, model_dir), stat.st_size, stat.st_mtime_ns])
    return sorted(out)


def weight_files(model_dir):
    """Safetensors files that hold the weights, relative to ``model_dir``.

    The shards named by ``model.safetensors.index.json`` when it exists,
    otherwise ``model.safetensors``, otherwise none (weights in another format).
    """
    index_path = os.path.join(model_dir, WEIGHTS_INDEX_FILE)
    if os.path.isfile(index_path):
        index = _load_json(index_path, "weights index")
        weight_map = index.get("weight_map") if isinstance(index, dict) else None
        if not isinstance(weight_map, dict) or not weight_map:
            raise ModelFilesError("weights index %s has no weight_map" % index_path)
        shards = sorted(set(str(name) for name in weight_map.values()))
        outside = [name for name in shards if not _inside(model_dir, name)]
        if outside:
            raise ModelFilesError("weights index %s names %d shard(s) outside the model directory (%s); only files "
                                  "inside it are read" % (index_path, len(outside), ", ".join(map(repr, outside[:3]))))
        missing = [name for name in shards if not os.path.isfile(os.path.join(model_dir, name))]
        if missing:
            raise ModelFilesError("weights index %s names missing shards: %s" % (index_path, ", ".join(missing)))
        return shards
    if os.path.isfile(os.path.join(model_dir, SINGLE_WEIGHTS_FILE)):
        return [SINGLE_WEIGHTS_FILE]
    return []


def read_safetensors_header(path, max_header_bytes=MAX_HEADER_BYTES):
    """Return ``{tensor_name: {"dtype": str, "shape": [int, ...], "bytes": int}}`` from a safetensors file.

    Reads the length prefix and the JSON header only; the tensor data is never touched.
    """
    try:
        with open(path, "rb") as handle:
            file_size = os.fstat(handle.fileno()).st_size
            prefix = handle.read(_LENGTH_PREFIX.size)
            if len(prefix) < _LENGTH_PREFIX.size:
                raise ModelFilesError("%s is truncated: %d bytes, shorter than the 8-byte header length" % (path, len(prefix)))
            (header_length,) = _LENGTH_PREFIX.unpack(prefix)
            if header_length == 0 or header_length > max_header_bytes:
                raise ModelFilesError(
                    "%s declares a %d-byte header (allowed: 1 to %d); it is not a safetensors file" % (path, header_length, max_header_bytes)
                )
            if header_length > file_size - _LENGTH_PREFIX.size:
                raise ModelFilesError(
                    "%s is truncated: it declares a %d-byte header but holds only %d bytes after the length"
                    % (path, header_length, file_size - _LENGTH_PREFIX.size)
                )
            raw = handle.read(header_length)
    except OSError as exc:
        raise ModelFilesError("cannot read safetensors file %s: %s" % (path, exc))
    header = _parse_json(raw, "safetensors header of", path)
    if not isinstance(header, dict):
        raise ModelFilesError("safetensors header of %s is not a JSON object" % path)
    return dict((name, _tensor_entry(path, name, entry)) for name, entry in header.items() if name != "__metadata__")


def _tensor_entry(path, name, entry):
    shape = entry.get("shape") if isinstance(entry, dict) else None
    dtype = entry.get("dtype") if isinstance(entry, dict) else None
    offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
    if not isinstance(dtype, str) or not isinstance(shape, list) or not all(isinstance(dim, int) for dim in shape):
        raise ModelFilesError("safetensors header of %s has a malformed entry for tensor %s" % (path, name))
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)
            and 0 <= offsets[0] <= offsets[1]):
        raise ModelFilesError("safetensors header of %s has malformed data_offsets for tensor %s" % (path, name))
    return {"dtype": dtype, "shape": shape, "bytes": offsets[1] - offsets[0]}


def read_tensor_index(model_dir, names=None):
    """Map tensor names to ``{"dtype", "shape", "file"}`` across all weight files of ``model_dir``.

    ``names`` limits the result to those tensors (absent ones are left out);
    None returns every tensor. Every header is still read, so a damaged shard
    is reported even when it holds none of the names.
    """
    check_model_dir(model_dir)
    wanted = None if names is None else set(names)
    index = {}
    for file_name in weight_files(model_dir):
        for name, entry in read_safetensors_header(os.path.join(model_dir, file_name)).items():
            if wanted is None or name in wanted:
                entry["file"] = file_name
                index[name] = entry
    return index


def describe_model(model_dir, tensor_names=None, all_tensors=False, read_weights=True):
    """Everything ``vllm_model_info`` returns, as one dictionary.

    Tensors are listed only when asked for (``tensor_names`` or
    ``all_tensors``), since a large model has thousands of them.
    """
    info = {
        "config": read_config(model_dir),
        "files": list_entries(model_dir),
        "manifest": manifest(model_dir),
        "weight_files": [],
        "tensors": {},
        "missing_tensors": [],
        "weight_bytes": {},
    }
    if not read_weights:
        return info
    info["weight_files"] = weight_files(model_dir)
    names = None if all_tensors else list(tensor_names or [])
    every = read_tensor_index(model_dir)
    for entry in every.values():
        info["weight_bytes"][entry["dtype"]] = info["weight_bytes"].get(entry["dtype"], 0) + entry["bytes"]
    tensors = every if names is None else dict((name, every[name]) for name in names if name in every)
    info["tensors"] = tensors
    if names is not None:
        info["missing_tensors"] = [name for name in names if name not in tensors]
    return info
