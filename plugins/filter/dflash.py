"""The filters that ask ``module_utils/plan/dflash`` what a DFlash drafter checkpoint becomes for a given vLLM."""

from __future__ import annotations

import functools

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.module_utils.plan.dflash import (
    DFlashError,
    dflash_drafter_config,
    dflash_drafter_fields,
    dflash_layer_ids_for_vllm,
    dflash_target_layer_ids,
    plan,
)


def _filter(name, function):
    """``function`` with its errors raised as AnsibleFilterError, so a template names the filter that refused."""

    @functools.wraps(function)
    def run(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except DFlashError as e:
            raise AnsibleFilterError(f"{name}: {e}") from e

    return run


_FILTERS = {
    "dflash_target_layer_ids": dflash_target_layer_ids,
    "dflash_layer_ids_for_vllm": dflash_layer_ids_for_vllm,
    "dflash_drafter_fields": dflash_drafter_fields,
    "dflash_drafter_config": dflash_drafter_config,
    "dflash_plan": plan,
}


class FilterModule:
    """DFlash drafter filters."""

    def filters(self):
        return dict((name, _filter(name, function)) for name, function in _FILTERS.items())
