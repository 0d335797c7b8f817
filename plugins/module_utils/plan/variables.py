# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Inventory variables with the collection's prefixes that no entry point reads: a misspelt name is silently ignored
by Ansible, so the deploy would run with the default instead. Each is named with the closest known name.

The known names are the options of every role's ``meta/argument_specs.yml`` (read by the caller), the playbooks' own
settings (DEPLOY, COMPARE, TUNE), and the facts the roles publish for each other (PUBLISHED).
"""

from __future__ import annotations

import difflib
import re

from ansible_collections.llmops.vllm.plugins.module_utils.plan.candidates import RUN_OPTIONS
from ansible_collections.llmops.vllm.plugins.module_utils.plan.layers import LAYER

PREFIXES = re.compile(r"^vllm_(common|install|drafter|server|frontend|deploy|compare|tune|status|rollback|remove)_")
# playbooks/deploy.yml's own settings.
DEPLOY = ("vllm_deploy_serial", "vllm_deploy_max_fail_percentage", "vllm_deploy_report_path",
          "vllm_deploy_prometheus_targets_path", "vllm_deploy_prometheus_rules_path", "vllm_deploy_alerts",
          "vllm_deploy_grafana_dashboard_path",
          "vllm_deploy_speed_report_dir")
# playbooks/compare.yml's own settings.
COMPARE = ("vllm_compare_canary", "vllm_compare_configurations", "vllm_compare_concurrency", "vllm_compare_repeats",
           "vllm_compare_target_concurrency", "vllm_compare_mix", "vllm_compare_finish", "vllm_compare_dir") + RUN_OPTIONS
# playbooks/tune.yml's own settings (with the compare run's).
TUNE = ("vllm_tune_vars_file",)
# The operations playbooks' own settings (status.yml, rollback.yml, remove.yml).
OPERATIONS = ("vllm_status_path", "vllm_rollback_report_path", "vllm_rollback_hosts", "vllm_remove_hosts")
# Role options the collection's playbooks set, wiring one role's result into another's input: an inventory does not
# set them (docs/variables.md lists them apart from the settings).
WIRING = ("vllm_server_pending_reasons", "vllm_server_model_sources", "vllm_server_arriving_paths",
          "vllm_server_staged_trees", "vllm_server_front_doors", "vllm_server_door_state", "vllm_install_starts")
# Facts a role or the playbook sets for a later play, a later role or another host.
PUBLISHED = ("vllm_deploy_failed", "vllm_deploy_not_rolled", "vllm_deploy_reached", "vllm_drafter_arriving_paths",
             "vllm_drafter_model_sources", "vllm_remove_plan", "vllm_rollback_plan",
             "vllm_drafter_result", "vllm_frontend_door", "vllm_install_result", "vllm_server_backend",
             "vllm_server_result", "vllm_drafter_staged_tree", "vllm_server_roll_restarts", "vllm_server_compare_key",
             "vllm_server_bench_workload", "vllm_server_bench_result", "vllm_server_status",
             "vllm_install_pruned", "vllm_server_starts", "vllm_server_plan", "vllm_drafter_plan",
             "vllm_server_serving_group_member", "vllm_server_gates")


def known_names(argument_specs):
    """Every option name of the argument specs given (each a parsed meta/argument_specs.yml), with DEPLOY,
    COMPARE, TUNE, OPERATIONS and PUBLISHED."""
    names = set(DEPLOY) | set(COMPARE) | set(TUNE) | set(OPERATIONS) | set(PUBLISHED)
    for spec in argument_specs:
        for entry in ((spec or {}).get("argument_specs") or {}).values():
            names.update(((entry or {}).get("options") or {}).keys())
    return names


def unknown(names, known, ignored=()):
    """A sentence per name with a collection prefix that is neither known nor ``ignored`` (handled elsewhere, such
    as a variable of an earlier release), with the closest known name when there is one."""
    out = []
    for name in sorted(set(names)):
        # A layer of vllm_server_args (module_utils/plan/layers) is read by its pattern, not by its name.
        if not PREFIXES.match(name) or name in known or name in ignored or LAYER.match(name):
            continue
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
        out.append("%s is not a variable of this collection, so it would be ignored%s" % (
            name, "; did you mean %s?" % close[0] if close else "."))
    return out
