# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Written by scripts/vllm_intake.py; do not edit.
"""Every release taken in by scripts/vllm_intake.py, oldest first."""

from __future__ import annotations

from ansible_collections.llmops.vllm.plugins.module_utils.plan.releases import vllm_0_20_0
from ansible_collections.llmops.vllm.plugins.module_utils.plan.releases import vllm_0_20_1
from ansible_collections.llmops.vllm.plugins.module_utils.plan.releases import vllm_0_20_2
from ansible_collections.llmops.vllm.plugins.module_utils.plan.releases import vllm_0_21_0
from ansible_collections.llmops.vllm.plugins.module_utils.plan.releases import vllm_0_22_0
from ansible_collections.llmops.vllm.plugins.module_utils.plan.releases import vllm_0_22_1
from ansible_collections.llmops.vllm.plugins.module_utils.plan.releases import vllm_0_23_0
from ansible_collections.llmops.vllm.plugins.module_utils.plan.releases import vllm_0_24_0
from ansible_collections.llmops.vllm.plugins.module_utils.plan.releases import vllm_0_25_0
from ansible_collections.llmops.vllm.plugins.module_utils.plan.releases import vllm_0_25_1
from ansible_collections.llmops.vllm.plugins.module_utils.plan.releases import vllm_0_26_0
from ansible_collections.llmops.vllm.plugins.module_utils.plan.releases import vllm_0_27_0
from ansible_collections.llmops.vllm.plugins.module_utils.plan.releases import vllm_0_27_1
from ansible_collections.llmops.vllm.plugins.module_utils.plan.releases import vllm_0_28_0
from ansible_collections.llmops.vllm.plugins.module_utils.plan.releases import vllm_0_29_0
from ansible_collections.llmops.vllm.plugins.module_utils.plan.releases import vllm_0_30_0
from ansible_collections.llmops.vllm.plugins.module_utils.plan.releases import vllm_0_31_0
from ansible_collections.llmops.vllm.plugins.module_utils.plan.releases import vllm_0_32_0
from ansible_collections.llmops.vllm.plugins.module_utils.plan.releases import vllm_0_33_0
from ansible_collections.llmops.vllm.plugins.module_utils.plan.releases import vllm_0_34_0
from ansible_collections.llmops.vllm.plugins.module_utils.plan.releases import vllm_cpu_0_31_0
from ansible_collections.llmops.vllm.plugins.module_utils.plan.releases import vllm_cpu_0_32_0

ALL = (
    vllm_0_20_0.DATA, vllm_0_20_1.DATA, vllm_0_20_2.DATA, vllm_0_21_0.DATA, vllm_0_22_0.DATA, vllm_0_22_1.DATA,
    vllm_0_23_0.DATA, vllm_0_24_0.DATA, vllm_0_25_0.DATA, vllm_0_25_1.DATA, vllm_0_26_0.DATA, vllm_0_27_0.DATA,
    vllm_0_27_1.DATA, vllm_0_28_0.DATA, vllm_0_29_0.DATA, vllm_0_30_0.DATA, vllm_0_31_0.DATA, vllm_0_32_0.DATA,
    vllm_0_33_0.DATA, vllm_0_34_0.DATA, vllm_cpu_0_31_0.DATA, vllm_cpu_0_32_0.DATA,
)
