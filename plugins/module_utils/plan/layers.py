# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Settings that compose: ``vllm_server_args`` is the base mapping, and every variable named
``vllm_server_args_<layer>`` (a group's ``vllm_server_args_a100``, a host's ``vllm_server_args_host``) is merged over
it, key by key, in the order of the layers' names. One flag for one host is one line in its host_vars, without a copy
of the group's mapping. A layer's null takes the flag out, as null does in ``vllm_server_args``.

Keys are compared the way vLLM's parser reads them (``max_model_len``, ``--max-model-len`` and ``max-model-len`` are
one flag), so a layer that spells a flag another way still replaces it instead of adding a second one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

LAYER = re.compile(r"^vllm_server_args_[a-z0-9_]+$")


def _cli(key):
    return str(key).lstrip("-").replace("_", "-")


def merge(base, layers):
    """``base`` with each layer of ``layers`` ({variable name: mapping}) merged over it in name order.

    Returns (merged mapping, problems): a problem names a layer that is not a mapping, or a name that is not a layer.
    A flag keeps its place in the base and its spelling of the last layer that set it; new flags come after, in the
    order the layers add them."""
    problems = []
    if not isinstance(base, Mapping):
        return {}, ["vllm_server_args must be a mapping of vLLM CLI names to values, got %s." % type(base).__name__]
    merged = {}
    for key, value in base.items():
        merged[_cli(key)] = (key, value)
    for name in sorted(layers):
        layer = layers[name]
        if not LAYER.match(name):
            problems.append("%s is not a layer of vllm_server_args (vllm_server_args_<lower-case name>)." % name)
            continue
        if layer is None:
            continue
        if not isinstance(layer, Mapping):
            problems.append("%s must be a mapping of vLLM CLI names to values, merged over vllm_server_args, got %s."
                            % (name, type(layer).__name__))
            continue
        for key, value in layer.items():
            merged[_cli(key)] = (key, value)
    return dict(merged.values()), problems
