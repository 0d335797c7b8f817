# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Attributes the collection's modules share: how each kind of module behaves in check mode."""

from __future__ import annotations

_CHECK_MODE = r"""
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: %s
"""
# No module of the collection returns a diff, and each reports no change when run twice with the same arguments.
_DIFF_AND_IDEMPOTENT = r"""  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
  idempotent:
    description: When run twice in a row outside check mode, with the same arguments, the second invocation indicates
      no change.
    support: full
"""


class ModuleDocFragment(object):

    # Modules that only read the host: check mode runs them exactly as a normal run, and they never change anything.
    READ_ONLY = _CHECK_MODE % "The module only reads, so check mode runs exactly as a normal run does." + _DIFF_AND_IDEMPOTENT

    # Modules that set a state: check mode says whether it would change and changes nothing.
    SETS_STATE = (_CHECK_MODE % "Check mode reads the current state, reports whether it would change, and changes nothing."
                  + _DIFF_AND_IDEMPOTENT)
