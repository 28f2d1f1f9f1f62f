# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The attributes the collection's modules share; each module states only the ones that are its own."""

from __future__ import annotations


class ModuleDocFragment:
    # Modules whose work is done by an action plugin of the same name on the controller.
    DOCUMENTATION = r"""
attributes:
  action:
    support: full
    description: Runs as an action plugin on the controller; a module run on a node only checks its arguments.
"""

    # Modules that change nothing a diff could show (what they did is in their return values).
    NO_DIFF = r"""
attributes:
  diff_mode:
    support: none
    description: Nothing to compare; the returned values say what was read, written or stopped.
"""

    # Modules that only read the node.
    READ_ONLY = r"""
attributes:
  check_mode:
    support: full
    description: The module only reads; it runs the same in check mode.
  diff_mode:
    support: none
    description: Nothing changes.
"""
