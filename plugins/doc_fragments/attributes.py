# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Attributes the collection's modules share: they only read, so check mode behaves as a normal run."""

from __future__ import annotations


# ansible-test's linters read each fragment as one string literal, so the two share their text by copy.
class ModuleDocFragment(object):

    # Modules that only read the host: check mode runs them exactly as a normal run, and they never change anything.
    READ_ONLY = r"""
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: The module only reads, so check mode runs exactly as a normal run does.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
  idempotent:
    description: When run twice in a row outside check mode, with the same arguments, the second invocation indicates
      no change.
    support: full
"""

    # Modules that set a state: check mode says whether it would change and changes nothing.
    SETS_STATE = r"""
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: Check mode reads the current state, reports whether it would change, and changes nothing.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
  idempotent:
    description: When run twice in a row outside check mode, with the same arguments, the second invocation indicates
      no change.
    support: full
"""

    # Modules that measure a server: they send it requests, change nothing on the host but their result files.
    MEASURES = r"""
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: Check mode sends no request and measures nothing.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
  idempotent:
    description: When run twice in a row outside check mode, with the same arguments, the second invocation indicates
      no change.
    support: full
    details: It always reports C(changed=false); each run measures again.
"""

    # Modules that write a report on the controller.
    REPORT = r"""
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: Check mode writes nothing.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
  idempotent:
    description: When run twice in a row outside check mode, with the same arguments, the second invocation indicates
      no change.
    support: none
    details: Each run writes its report files again.
"""
