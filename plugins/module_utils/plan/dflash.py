# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a DFlash drafter checkpoint becomes for a given vLLM, and whether it fits its target.

Four facts live here and nowhere else:

* the z-lab ``build_target_layer_ids`` spread, extended to tiny targets;
* the vLLM release that changed how ``target_layer_ids`` are read (0.22.0);
* where the two drafter ``config.json`` formats (z-lab native and
  speculators) keep the layer ids, the mask token and the layer sizes;
* what the vllm_drafter role checks before it writes anything (:func:`plan`):
  every problem is a sentence that starts with the variable to change.
"""

from __future__ import annotations

import copy
import posixpath
from collections.abc import Mapping
from typing import Any

from ansible_collections.llmops.vllm.plugins.module_utils.plan import rules

DEFAULT_VLLM_VERSION = "0.20.2"

# From this release on vLLM adds 1 to every id itself (PR #40727), so it reads
# the output of decoder layer ``id`` as the reference implementation does.
# Older releases read the residual *before* layer ``id``: one layer too early.
VLLM_READS_LAYER_OUTPUT_FROM = (0, 22, 0)

# vLLM builds the drafter's fc layer as Linear(target hidden size x number of layer ids -> hidden size).
FC_TENSOR = "fc.weight"
DFLASH_ARCHITECTURES = ["DFlashDraftModel"]
TARGET_SIZES = ("num_hidden_layers", "hidden_size", "vocab_size")

# The role variables a problem can name besides the model paths, which the caller names.
LAYER_IDS_VAR = "vllm_drafter_target_layer_ids"
MASK_TOKEN_VAR = "vllm_drafter_mask_token_id"
VERSION_VAR = "vllm_common_version"
OVERRIDES_VAR = "vllm_drafter_config_overrides"
RENDER_DIR_VAR = "vllm_common_drafter_dir"

_TARGET_HINT = "Point it at the target model directory, the one holding the model's config.json."
_CHECKPOINT_HINT = "Point it at the DFlash drafter checkpoint directory, the one holding its config.json and weights."
_OTHER_TARGET = "The drafter was trained for another target model."


class DFlashError(ValueError):
    """Input the DFlash helpers cannot work with."""


def _is_int(value: Any) -> bool:
    # JSON and YAML booleans are ints to Python, never layer ids or sizes.
    return isinstance(value, int) and not isinstance(value, bool)


def vllm_version_tuple(version: Any) -> tuple[int, int, int]:
    """Return (major, minor, patch) of a vLLM version string.

    Pre-release, dev and local parts are ignored on purpose: ``0.22.0rc1`` is
    cut from the 0.22 branch and already reads ids the 0.22 way.
    """
    try:
        return rules.parse_release(version)
    except ValueError:
        raise DFlashError(f"not a vLLM version: {version!r} (expected something like 0.20.2 or 0.22.0rc1)") from None


def _layer_id_offset(vllm_version: Any) -> int:
    """How much to add to a reference id so this vLLM reads the same layer."""
    return 0 if vllm_version_tuple(vllm_version) >= VLLM_READS_LAYER_OUTPUT_FROM else 1


def _positive_int(value: Any, what: str) -> int:
    if not _is_int(value) or value < 1:
        raise DFlashError(f"{what} must be a positive integer, got {value!r}")
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
        raise DFlashError(f"cannot pick {k} distinct layer ids from a target with {n} decoder layers")
    span = end - start
    return [round(start + i * span / (k - 1)) for i in range(k)]


def dflash_layer_ids_for_vllm(reference_ids: list[int], vllm_version: Any = DEFAULT_VLLM_VERSION) -> list[int]:
    """Convert ids in training semantics (checkpoint, reference) to what this vLLM must be given.

    vLLM < 0.22 reads one layer early, so it is given id+1; 0.22 and later add
    the 1 themselves. Range checks are left to the caller, which knows the
    target and can name the setting to change.
    """
    if not isinstance(reference_ids, (list, tuple)):
        raise DFlashError(f"layer ids must be a list, got {reference_ids!r}")
    offset = _layer_id_offset(vllm_version)
    return [layer_id + offset for layer_id in reference_ids]


def dflash_target_layer_ids(num_target_layers: int, num_ids: int, vllm_version: Any = DEFAULT_VLLM_VERSION) -> list[int]:
    """Ids to write into ``dflash_config.target_layer_ids`` for this vLLM.

    ``num_ids`` is the number of target layers the drafter's ``fc`` layer
    takes (z-lab uses the number of draft layers).
    """
    ids = dflash_layer_ids_for_vllm(reference_layer_ids(num_target_layers, num_ids), vllm_version)
    if ids[-1] >= num_target_layers:
        raise DFlashError(
            f"vLLM {vllm_version} cannot feed the drafter the output of the last decoder layer "
            f"({num_target_layers - 1}) of a {num_target_layers}-layer target: before 0.22 vLLM captures hidden "
            f"states before each layer only. Use vLLM 0.22 or later, or set the layer ids explicitly."
        )
    return ids


def _is_speculators(config: Mapping) -> bool:
    return "speculators_model_type" in config or "transformer_layer_config" in config


def _first_present(*candidates: Any) -> Any:
    return next((value for value in candidates if value is not None), None)


def _mapping(value: Any) -> Mapping:
    return value if isinstance(value, Mapping) else {}


def dflash_drafter_fields(config: Mapping) -> dict:
    """The fields vLLM takes from a drafter config.json, whatever its format.

    The layer ids are looked up in vLLM's own order of precedence
    (``eagle_aux_hidden_state_layer_ids`` wins over ``dflash_config``).
    """
    if not isinstance(config, Mapping):
        raise DFlashError(f"a drafter config must be a mapping, got {type(config).__name__}")
    speculators = _is_speculators(config)
    layer = _mapping(config.get("transformer_layer_config")) if speculators else config
    dflash = _mapping(config.get("dflash_config"))
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
    config: Mapping, target_layer_ids: list[int], mask_token_id: int | None, num_target_layers: int
) -> dict:
    """A copy of ``config`` with the layer ids and mask token written where its format keeps them.

    Every key that already holds layer ids gets the new list, so no stale
    copy can win inside vLLM. ``mask_token_id`` None keeps the checkpoint's.
    """
    fields = dflash_drafter_fields(config)
    rendered = copy.deepcopy(dict(config))
    if fields["format"] == "speculators":
        rendered["aux_hidden_state_layer_ids"] = list(target_layer_ids)
        if mask_token_id is not None:
            rendered["mask_token_id"] = mask_token_id
    else:
        dflash = dict(_mapping(rendered.get("dflash_config")))
        dflash["target_layer_ids"] = list(target_layer_ids)
        if "layer_ids" in dflash:
            dflash["layer_ids"] = list(target_layer_ids)
        if mask_token_id is not None:
            dflash["mask_token_id"] = mask_token_id
        rendered["dflash_config"] = dflash
        rendered["num_target_layers"] = num_target_layers
        rendered.setdefault("architectures", list(DFLASH_ARCHITECTURES))
    if "eagle_aux_hidden_state_layer_ids" in rendered:
        rendered["eagle_aux_hidden_state_layer_ids"] = list(target_layer_ids)
    return rendered


def merge_recursive(base: Mapping, overrides: Mapping) -> dict:
    """``base | combine(overrides, recursive=true)``: mappings on both sides merge, any other value replaces.

    Lists are replaced, not merged, and a None override sets the key to null.
    """
    merged = dict(base)
    for key, value in overrides.items():
        if isinstance(merged.get(key), Mapping) and isinstance(value, Mapping):
            merged[key] = merge_recursive(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def path_problems(paths: Mapping[str, Any]) -> list[str]:
    """Every path must be absolute, and the render directory must lie outside the others.

    The others are model directories whose config.json must stay as it is.
    Paths are compared as written (normalised, links not followed): the host
    may not have them yet.
    """
    problems = [
        f"{var} must be the absolute path of a directory on the host, got '{path}'." for var, path in paths.items() if not _absolute(path)
    ]
    render = paths.get(RENDER_DIR_VAR)
    if not _absolute(render):
        return problems
    for var, path in paths.items():
        if var != RENDER_DIR_VAR and _absolute(path) and _inside(render, path):
            problems.append(
                f"{RENDER_DIR_VAR} ({render}) lies inside {var} ({path}), whose config.json must stay as it is. "
                "Choose a directory of its own."
            )
        elif var != RENDER_DIR_VAR and _absolute(path) and _inside(path, render):
            # The role removes what it did not render from its directory: a models directory holding the target
            # would lose it (and every link an operator put there).
            problems.append(
                f"{RENDER_DIR_VAR} ({render}) holds {var} ({path}): the role removes every entry it did not render "
                "there. Choose a directory of its own."
            )
    return problems


def _absolute(path: Any) -> bool:
    return isinstance(path, str) and posixpath.isabs(path)


def _inside(path: str, directory: str) -> bool:
    # The trailing slash keeps /srv/models/d-vllm from counting as inside /srv/models/d.
    return (posixpath.normpath(path) + "/").startswith(posixpath.normpath(directory).rstrip("/") + "/")


def _read_problem(read: Any, var: str, hint: str) -> str | None:
    """Why a vllm_model_info result holds no config, or None when it does."""
    if isinstance(read, Mapping) and isinstance(read.get("config"), Mapping):
        return None
    msg = read.get("msg") if isinstance(read, Mapping) else read
    return f"{var}: {str(msg or 'not readable').rstrip('.')}. {hint}"


def _language_model(config: Mapping) -> Mapping:
    # Multimodal targets (Qwen3.5/3.6) keep the language model's sizes under text_config.
    text_config = config.get("text_config")
    return text_config if isinstance(text_config, Mapping) else config


def _fc_width(checkpoint_read: Mapping, fc_tensor: str) -> int:
    """Inputs of the drafter's fc layer, 0 when its weights could not be read (not safetensors)."""
    shape = _mapping(_mapping(checkpoint_read.get("tensors")).get(fc_tensor)).get("shape") or [0]
    return shape[-1] if _is_int(shape[-1]) else 0


def _ids_set(value: Any) -> bool:
    return not (value is None or (isinstance(value, (list, tuple, str, Mapping)) and len(value) == 0))


def _choose_layer_ids(explicit, checkpoint_ids, id_count, layers, vllm_version, target_var):
    """(ids, origin, problem): the ids to render and where they come from, or the one problem that stops the plan."""
    if _ids_set(explicit):
        if not isinstance(explicit, (list, tuple)):
            return None, None, f"{LAYER_IDS_VAR} must be a list of target layer ids, got {explicit!r}."
        return list(explicit), "as set", None
    try:
        offset = _layer_id_offset(vllm_version)
    except DFlashError as e:
        return None, None, f"{VERSION_VAR}: {e}."
    if checkpoint_ids is not None:
        origin = f"from the checkpoint, for vLLM {vllm_version}"
        if not isinstance(checkpoint_ids, (list, tuple)):
            return None, None, (
                f"{LAYER_IDS_VAR}: the checkpoint's target layer ids {checkpoint_ids!r} are not a list. "
                f"Set {LAYER_IDS_VAR} to the ids the drafter was trained with."
            )
        # Anything but an integer is left as it is for the range check to name.
        return [layer_id + offset if _is_int(layer_id) else layer_id for layer_id in checkpoint_ids], origin, None
    if not (_is_int(id_count) and 1 <= id_count <= layers):
        return None, None, (
            f"{LAYER_IDS_VAR}: the drafter reads {id_count} target layers but the target at {target_var} has {layers}, "
            f"so no ids can be computed. Set {LAYER_IDS_VAR}, or check the two models belong together."
        )
    try:
        return dflash_target_layer_ids(layers, id_count, vllm_version), f"computed for vLLM {vllm_version}", None
    except DFlashError as e:
        return None, None, f"{LAYER_IDS_VAR}: {e}"


def _overridden(overrides: Any, *keys: str) -> str | None:
    """The overrides variable's key that set the first of ``keys`` present in it (top level or dflash_config), or
    None when the checkpoint's own config did: a value an override set is the override's to fix."""
    overrides = overrides if isinstance(overrides, Mapping) else {}
    nested = overrides.get("dflash_config") if isinstance(overrides.get("dflash_config"), Mapping) else {}
    for key in keys:
        if key in overrides:
            return f"{OVERRIDES_VAR}.{key}"
        if key in nested:
            return f"{OVERRIDES_VAR}.dflash_config.{key}"
    return None


def _rendered_problems(fields, target, origin, fc_width, fc_tensor, target_var, checkpoint_var, overrides=None):
    """What vLLM would refuse in the config it will get, overrides included; each named after where its value came
    from, the checkpoint or the overrides."""
    problems = []
    layers, hidden, vocab = (target[size] for size in TARGET_SIZES)
    if fields["architectures"] != DFLASH_ARCHITECTURES:
        by = _overridden(overrides, "architectures")
        problems.append(
            f"{by or checkpoint_var}: architectures is {fields['architectures']}, but vLLM runs only "
            f"{DFLASH_ARCHITECTURES} drafters with method dflash. "
            + (f"Remove {by} or set it to {DFLASH_ARCHITECTURES}." if by else
               f"Use a DFlash checkpoint, or set {OVERRIDES_VAR}.architectures if the checkpoint merely misnames it.")
        )
    ids = fields["target_layer_ids"]
    id_list = isinstance(ids, (list, tuple))
    if not (id_list and ids and all(_is_int(i) for i in ids) and min(ids) >= 0 and max(ids) < layers
            and len(set(ids)) == len(ids) and list(ids) == sorted(ids)):
        problems.append(
            f"{LAYER_IDS_VAR}: the ids {ids} ({origin}) must be distinct integers in ascending order, "
            f"each from 0 to {layers - 1} for this {layers}-layer target."
        )
    expects = _first_present(fields["target_hidden_size"], fields["hidden_size"])
    if expects != hidden:
        by = _overridden(overrides, "target_hidden_size", "hidden_size")
        problems.append(
            f"{by or checkpoint_var}: the drafter expects target hidden states of size {expects}, but the target at "
            f"{target_var} has hidden_size {hidden}. " + (f"Remove {by}." if by else _OTHER_TARGET)
        )
    if fields["draft_vocab_size"] is None and fields["vocab_size"] != vocab:
        by = _overridden(overrides, "vocab_size")
        problems.append(
            f"{by or checkpoint_var}: the drafter's vocab_size {fields['vocab_size']} differs from the target's {vocab} "
            f"({target_var}) and it sets no draft_vocab_size. " + (f"Remove {by}." if by else _OTHER_TARGET)
        )
    mask = fields["mask_token_id"]
    if not (_is_int(mask) and 0 <= mask < vocab):
        sets = "sets no mask token" if mask is None else f"sets mask token {mask}"
        problems.append(
            f"{MASK_TOKEN_VAR}: the drafter config {sets}, and vLLM needs one below the target's vocab_size {vocab}. "
            f"Set {MASK_TOKEN_VAR} to the mask token id the drafter was trained with."
        )
    if fc_width and id_list and len(ids) * hidden != fc_width:
        problems.append(
            f"{LAYER_IDS_VAR}: {len(ids)} ids {ids} ({origin}) make vLLM build an fc layer taking {len(ids) * hidden} "
            f"inputs, but the checkpoint's {fc_tensor} takes {fc_width}, so loading would fail. Give {fc_width // hidden} ids."
        )
    return problems


def plan(
    target_read: Mapping,
    checkpoint_read: Mapping,
    *,
    target_var: str = "vllm_drafter_target_model_dir",
    checkpoint_var: str = "vllm_drafter_dir",
    paths: Mapping[str, Any] | None = None,
    target_layer_ids: Any = None,
    mask_token_id: Any = None,
    vllm_version: Any = DEFAULT_VLLM_VERSION,
    config_overrides: Any = None,
    fc_tensor: str = FC_TENSOR,
) -> dict:
    """Check a drafter checkpoint against its target and the role's settings, and render its config.

    ``target_read`` and ``checkpoint_read`` are ``vllm_model_info`` results
    (``config``, ``files``, ``tensors``; or a failure's ``msg``), read from
    the paths named ``target_var`` and ``checkpoint_var``. ``paths`` maps the
    variables that hold host paths to their values. The other arguments are
    the role's settings of the same names.

    Returns ``problems`` (one sentence each, starting with the variable to
    change; empty when vLLM will take the drafter) and, when the checks got
    that far, ``layer_ids`` and their ``origin``, the rendered ``config``
    (overrides merged), the ``fields`` vLLM reads from it and the ``links``,
    the checkpoint files to link beside it. A problem that leaves the later
    checks nothing sound to work on (an unreadable config, a target without
    sizes, ids that cannot be chosen) ends the checks there.
    """
    paths = dict(paths or {})
    problems = path_problems(paths)
    result = {"problems": problems, "layer_ids": None, "origin": None, "config": None, "fields": None, "links": []}
    refused = set(var for var, path in paths.items() if not _absolute(path))
    readable = True
    for read, var, hint in ((target_read, target_var, _TARGET_HINT), (checkpoint_read, checkpoint_var, _CHECKPOINT_HINT)):
        problem = _read_problem(read, var, hint)
        readable = readable and not problem
        # A path refused above was read as written: its read failing says nothing more.
        if problem and var not in refused:
            problems.append(problem)
    if not readable:
        return result

    target = _language_model(target_read["config"])
    bad_sizes = [size for size in TARGET_SIZES if not (_is_int(target.get(size)) and target[size] > 0)]
    problems.extend(
        f"{target_var}: the target config.json has no positive integer {size} (got {target.get(size, 'nothing')}). "
        "Point it at the target model the drafter was trained for."
        for size in bad_sizes
    )
    if bad_sizes:
        return result
    layers, hidden = target["num_hidden_layers"], target["hidden_size"]

    fc_width = _fc_width(checkpoint_read, fc_tensor)
    if fc_width % hidden:
        problems.append(
            f"{checkpoint_var}: the drafter's {fc_tensor} takes {fc_width} inputs, not a multiple of the target's hidden "
            f"size {hidden} ({target_var}). This drafter was trained for another target model."
        )
        return result

    checkpoint = dflash_drafter_fields(checkpoint_read["config"])
    # The fc width is what vLLM will load; the z-lab convention (one id per draft layer) is only the fallback.
    id_count = fc_width // hidden if fc_width else checkpoint["num_hidden_layers"]
    ids, origin, problem = _choose_layer_ids(
        target_layer_ids, checkpoint["target_layer_ids"], id_count, layers, vllm_version, target_var)
    if problem:
        problems.append(problem)
        return result
    if config_overrides is not None and not isinstance(config_overrides, Mapping):
        problems.append(f"{OVERRIDES_VAR} must be a mapping of config.json keys, got {config_overrides!r}.")
        return result

    config = merge_recursive(
        dflash_drafter_config(checkpoint_read["config"], ids, mask_token_id, layers), config_overrides or {})
    fields = dflash_drafter_fields(config)
    problems.extend(_rendered_problems(fields, target, origin, fc_width, fc_tensor, target_var, checkpoint_var,
                                       config_overrides))
    result.update(
        layer_ids=ids, origin=origin, config=config, fields=fields,
        links=[name for name in checkpoint_read.get("files") or [] if name != "config.json"],
    )
    return result
