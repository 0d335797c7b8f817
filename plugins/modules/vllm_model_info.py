#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_model_info
short_description: Read a model directory's config and weight shapes without loading the weights
version_added: "0.1.0"
description:
  - Returns the parsed C(config.json) of a Hugging Face style model directory, the names of its entries, and the dtype and
    shape of selected tensors.
  - Shapes come from the JSON header at the start of each safetensors file (C(model.safetensors), or the shards named in
    C(model.safetensors.index.json)). Only that header is read, never the tensor data, so it takes milliseconds even for a
    large model and needs nothing beyond Python's standard library.
  - Used to check a speculative-decoding drafter against its target before vLLM spends a minute loading them.
  - This module never changes anything.
options:
  path:
    description:
      - Absolute path of the model directory on the managed host.
    type: path
    required: true
  tensors:
    description:
      - Names of the tensors to return, for example V(fc.weight).
      - Names absent from the weights are listed in RV(missing_tensors).
      - Cannot be combined with O(all_tensors=true).
    type: list
    elements: str
    default: []
  all_tensors:
    description:
      - Return every tensor. A large model has thousands; prefer O(tensors).
    type: bool
    default: false
  read_weights:
    description:
      - Read the safetensors headers. Every header is checked, even when no tensor is asked for.
      - Set to V(false) to return only the config and the entry names.
    type: bool
    default: true
  read_as:
    description:
      - The account the files are read as when the module runs as root, normally the account the server runs as.
      - The read then runs in a child process with that account's uid, gid and groups, so it follows only the links
        and opens only the files the server itself could; a file it cannot read fails here, naming the account, and
        not later in vLLM.
      - When the host has no such account yet (before the install role creates it) nobody can have placed links as
        it, and the module reads as the user it runs as. A module not running as root always reads as itself.
    type: str
extends_documentation_fragment:
  - llmops.vllm.attributes.read_only
notes:
  - Safetensors headers longer than 100 MB are rejected as damaged.
  - Weights stored in other formats (C(*.bin), C(*.pt)) are not read; RV(weight_files) is then empty.
author:
  - llmops.vllm maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Read the drafter's config and the shape of its fc layer
  llmops.vllm.vllm_model_info:
    path: /srv/models/Qwen3.6-27B-DFlash
    tensors:
      - fc.weight
  register: drafter

- name: Show the number of target layers the drafter's fc layer takes
  ansible.builtin.debug:
    msg: "{{ (drafter.tensors['fc.weight'].shape[1] / 5120) | int }}"

- name: Read only the target's config
  llmops.vllm.vllm_model_info:
    path: /srv/models/Qwen3.6-27B
    read_weights: false
  register: target
"""

RETURN = r"""
config:
  description: The parsed C(config.json).
  returned: success
  type: dict
  sample: {"architectures": ["DFlashDraftModel"], "num_hidden_layers": 5, "dflash_config": {"mask_token_id": 248070}}
files:
  description: Sorted names of the entries at the top of the directory (files, folders and links).
  returned: success
  type: list
  elements: str
  sample: ["config.json", "model.safetensors"]
manifest:
  description:
    - Every regular file under O(path), recursively, as C([relative path, size, mtime in nanoseconds]), sorted. Only
      stat() is called, no file is read. The drafter role compares it with what its last copy to a host sent.
  returned: success
  type: list
  elements: list
  sample: [["config.json", 820, 1796100000000000000], ["model.safetensors", 495784, 1796100000000000000]]
read_by:
  description: The account that read the files, or null when the module read them as the user it runs as.
  returned: success
  type: str
  sample: vllm
weight_files:
  description: The safetensors files holding the weights, relative to O(path). Empty when O(read_weights=false).
  returned: success
  type: list
  elements: str
  sample: ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
tensors:
  description: The tensors asked for (or all of them with O(all_tensors=true)), by name.
  returned: success
  type: dict
  sample: {"fc.weight": {"dtype": "BF16", "shape": [5120, 25600], "file": "model.safetensors"}}
  contains:
    dtype:
      description: The safetensors dtype, for example C(BF16) or C(F32).
      type: str
    shape:
      description: The tensor's shape.
      type: list
      elements: int
    file:
      description: The weight file that holds the tensor.
      type: str
    bytes:
      description: The tensor's size in the file, in bytes.
      type: int
weight_bytes:
  description:
    - The bytes the weights take on disk, by safetensors dtype, summed over every tensor of every weight file (from
      each tensor's C(data_offsets) in the header). Empty when O(read_weights=false).
    - The vllm_server preflight checks from it that the weights fit in each GPU's memory.
  returned: success
  type: dict
  sample: {"BF16": 53807212544, "F32": 1048576}
missing_tensors:
  description: Names listed in O(tensors) that no weight file holds.
  returned: success
  type: list
  elements: str
  sample: []
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.vllm.plugins.module_utils.probe.as_user import ReadAsUserError, read_as
from ansible_collections.llmops.vllm.plugins.module_utils.probe.model_files import ModelFilesError, describe_model


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            tensors=dict(type="list", elements="str", default=[]),
            all_tensors=dict(type="bool", default=False),
            read_weights=dict(type="bool", default=True),
            read_as=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if params["all_tensors"] and params["tensors"]:
        module.fail_json(msg="tensors and all_tensors=true are mutually exclusive: list the tensors or ask for all of them")
    try:
        info, reader = read_as(
            params["read_as"], describe_model,
            (params["path"], params["tensors"], params["all_tensors"], params["read_weights"]),
            error_types=(ModelFilesError,),
        )
    except ModelFilesError as exc:
        module.fail_json(msg=str(exc))
    except ReadAsUserError as exc:
        module.fail_json(msg="cannot read %s as %s: %s" % (params["path"], params["read_as"], exc))
    module.exit_json(changed=False, read_by=reader, **info)


if __name__ == "__main__":
    main()
