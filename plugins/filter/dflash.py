"""Filters that turn a DFlash drafter checkpoint into what a given vLLM reads.

Three facts live here and nowhere else:

* the z-lab ``build_target_layer_ids`` spread, extended to tiny targets;
* the vLLM release that changed how ``target_layer_ids`` are read (0.22.0);
* where the two drafter ``config.json`` formats (z-lab native and
  speculators) keep the layer ids, the mask token and the layer sizes.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from ansible.errors import AnsibleFilterError

DEFAULT_VLLM_VERSION = "0.20.2"

# From this release on vLLM adds 1 to every id itself (PR #40727), so it reads
# the output of decoder layer ``id`` as the reference implementation does.
# Older releases read the residual *before* layer ``id``: one layer too early.
VLLM_READS_LAYER_OUTPUT_FROM = (0, 22, 0)

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


def vllm_version_tuple(version: Any) -> tuple[int, int, int]:
    """Return (major, minor, patch) of a vLLM version string.

    Pre-release, dev and local parts are ignored on purpose: ``0.22.0rc1`` is
    cut from the 0.22 branch and already reads ids the 0.22 way.
    """
    match = _VERSION.match(str(version).strip())
    if not match:
        raise AnsibleFilterError(f"not a vLLM version: {version!r} (expected something like 0.20.2 or 0.22.0rc1)")
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


def _layer_id_offset(vllm_version: Any) -> int:
    """How much to add to a reference id so this vLLM reads the same layer."""
    return 0 if vllm_version_tuple(vllm_version) >= VLLM_READS_LAYER_OUTPUT_FROM else 1


def _positive_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise AnsibleFilterError(f"{what} must be a positive integer, got {value!r}")
    return value


def reference_layer_ids(num_target_layers: int, count: int) -> list[int]:
    """Target layers whose outputs feed the drafter, as the drafter was trained.

    This is z-lab's ``build_target_layer_ids`` (ids spread over layers 1 to
    n-3, Python's banker's ``round``). Targets too shallow for that range
    (under about k+3 layers, such as the two-layer test model) spread over
    every layer instead, 0 to n-1.
    """
    n = _positive_int(num_target_layers, "num_target_layers")
    k = _positive_int(count, "the number of layer ids")
    if k == 1:
        return [n // 2]
    start, end = 1, n - 3
    if end - start < k - 1:
        start, end = 0, n - 1
    if end - start < k - 1:
        raise AnsibleFilterError(f"cannot pick {k} distinct layer ids from a target with {n} decoder layers")
    span = end - start
    return [round(start + i * span / (k - 1)) for i in range(k)]


def dflash_layer_ids_for_vllm(reference_ids: list[int], vllm_version: Any = DEFAULT_VLLM_VERSION) -> list[int]:
    """Convert ids in training semantics (checkpoint, reference) to what this vLLM must be given.

    vLLM < 0.22 reads one layer early, so it is given id+1; 0.22 and later add
    the 1 themselves. Range checks are left to the caller, which knows the
    target and can name the setting to change.
    """
    if not isinstance(reference_ids, (list, tuple)):
        raise AnsibleFilterError(f"layer ids must be a list, got {reference_ids!r}")
    offset = _layer_id_offset(vllm_version)
    return [layer_id + offset for layer_id in reference_ids]


def dflash_target_layer_ids(num_target_layers: int, num_ids: int, vllm_version: Any = DEFAULT_VLLM_VERSION) -> list[int]:
    """Ids to write into ``dflash_config.target_layer_ids`` for this vLLM.

    ``num_ids`` is the number of target layers the drafter's ``fc`` layer
    takes (z-lab uses the number of draft layers).
    """
    ids = dflash_layer_ids_for_vllm(reference_layer_ids(num_target_layers, num_ids), vllm_version)
    if ids[-1] >= num_target_layers:
        raise AnsibleFilterError(
            f"vLLM {vllm_version} cannot feed the drafter the output of the last decoder layer "
            f"({num_target_layers - 1}) of a {num_target_layers}-layer target: before 0.22 vLLM captures hidden "
            f"states before each layer only. Use vLLM 0.22 or later, or set the layer ids explicitly."
        )
    return ids


def _is_speculators(config: dict) -> bool:
    return "speculators_model_type" in config or "transformer_layer_config" in config


def _first_present(*candidates: Any) -> Any:
    return next((value for value in candidates if value is not None), None)


def dflash_drafter_fields(config: dict) -> dict:
    """The fields vLLM takes from a drafter config.json, whatever its format.

    The layer ids are looked up in vLLM's own order of precedence
    (``eagle_aux_hidden_state_layer_ids`` wins over ``dflash_config``).
    """
    if not isinstance(config, dict):
        raise AnsibleFilterError(f"a drafter config must be a mapping, got {type(config).__name__}")
    speculators = _is_speculators(config)
    layer = (config.get("transformer_layer_config") or {}) if speculators else config
    dflash = config.get("dflash_config") or {}
    return {
        "format": "speculators" if speculators else "dflash",
        "architectures": config.get("architectures"),
        "num_hidden_layers": layer.get("num_hidden_layers"),
        "hidden_size": layer.get("hidden_size"),
        "vocab_size": layer.get("vocab_size"),
        "target_hidden_size": _first_present(config.get("target_hidden_size"), layer.get("target_hidden_size")),
        "draft_vocab_size": _first_present(config.get("draft_vocab_size"), layer.get("draft_vocab_size")),
        "mask_token_id": _first_present(dflash.get("mask_token_id"), config.get("mask_token_id")),
        "target_layer_ids": _first_present(
            config.get("eagle_aux_hidden_state_layer_ids"),
            dflash.get("target_layer_ids"),
            dflash.get("layer_ids"),
            config.get("aux_hidden_state_layer_ids"),
        ),
    }


def dflash_drafter_config(
    config: dict, target_layer_ids: list[int], mask_token_id: int | None, num_target_layers: int
) -> dict:
    """A copy of ``config`` with the layer ids and mask token written where its format keeps them.

    Every key that already holds layer ids gets the new list, so no stale
    copy can win inside vLLM. ``mask_token_id`` None keeps the checkpoint's.
    """
    fields = dflash_drafter_fields(config)
    rendered = copy.deepcopy(config)
    if fields["format"] == "speculators":
        rendered["aux_hidden_state_layer_ids"] = list(target_layer_ids)
        if mask_token_id is not None:
            rendered["mask_token_id"] = mask_token_id
    else:
        dflash = dict(rendered.get("dflash_config") or {})
        dflash["target_layer_ids"] = list(target_layer_ids)
        if "layer_ids" in dflash:
            dflash["layer_ids"] = list(target_layer_ids)
        if mask_token_id is not None:
            dflash["mask_token_id"] = mask_token_id
        rendered["dflash_config"] = dflash
        rendered["num_target_layers"] = num_target_layers
        rendered.setdefault("architectures", ["DFlashDraftModel"])
    if "eagle_aux_hidden_state_layer_ids" in rendered:
        rendered["eagle_aux_hidden_state_layer_ids"] = list(target_layer_ids)
    return rendered


class FilterModule:
    """DFlash drafter filters."""

    def filters(self):
        return {
            "dflash_target_layer_ids": dflash_target_layer_ids,
            "dflash_layer_ids_for_vllm": dflash_layer_ids_for_vllm,
            "dflash_drafter_fields": dflash_drafter_fields,
            "dflash_drafter_config": dflash_drafter_config,
        }
