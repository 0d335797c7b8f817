"""The filter that asks ``module_utils/vllm_rules`` what a vLLM release would refuse in the server settings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.module_utils.vllm_rules import ServeSettings, problems

_READ = ("speculative_method", "speculative_model", "num_speculative_tokens", "max_num_batched_tokens", "max_num_seqs",
         "speculative_extra", "tensor_parallel_size")


def vllm_serve_problems(options: Mapping[str, Any], release: str, flavor: str = "gpu") -> list[str]:
    try:
        settings = ServeSettings(release, flavor, **dict((key, options.get(key)) for key in _READ))
    except (TypeError, ValueError) as e:
        raise AnsibleFilterError("vllm_serve_problems: %s" % e)
    return problems(settings)


class FilterModule:
    """vLLM start-up rule filters."""

    def filters(self):
        return {"vllm_serve_problems": vllm_serve_problems}
