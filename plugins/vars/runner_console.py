# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Vars plugin cvs.cluster.runner_console: keep the ansible.cfg console under ansible-runner and AWX."""

from __future__ import annotations

DOCUMENTATION = r"""
name: runner_console
author: cvs.cluster developers (@cvs-cluster)
version_added: "0.2.0"
short_description: Keep the stdout callback chosen in ansible.cfg when the job runs under ansible-runner or AWX
description:
  - ansible-runner (and so AWX) runs its own C(awx_display) stdout callback and wraps the callback named by the
    environment variable C(ANSIBLE_STDOUT_CALLBACK) at launch. A C(stdout_callback) set only in an C(ansible.cfg)
    is not seen by it, and the job output falls back to the default callback (one C(FAILED - RETRYING) line per
    M(cvs.cluster.log_poll) round).
  - Enabled in that same C(ansible.cfg), this plugin hands the configured C(stdout_callback) (for example
    C(cvs.cluster.cvs)) to the wrapper before the callbacks load. It does nothing outside ansible-runner, when the
    environment already names a callback, and it returns no variables.
  - It also warns, as early as a run can, when the running ansible-core is not a release the collection is tested
    with, naming the release found and the tested ones.
options:
  stage:
    ini:
      - key: stage
        section: vars_runner_console
    env:
      - name: ANSIBLE_VARS_PLUGIN_STAGE
extends_documentation_fragment:
  - ansible.builtin.vars_plugin_staging
notes:
  - "Enable it with C(vars_plugins_enabled = host_group_vars, cvs.cluster.runner_console) in C([defaults])."
"""

EXAMPLES = r"""
# ansible.cfg of an AWX project or an ansible-runner private data dir's project
# [defaults]
# stdout_callback = cvs.cluster.cvs
# vars_plugins_enabled = host_group_vars, cvs.cluster.runner_console
"""

import os
from typing import Any

from ansible import constants as C
from ansible.plugins.vars import BaseVarsPlugin
from ansible.utils.display import Display

from ansible_collections.cvs.cluster.plugins.plugin_utils._common.core_version import warn_if_untested_core
from ansible_collections.cvs.cluster.plugins.plugin_utils._console.runner import wrapped_callback

# Vars plugins are imported right after the inventory is read, before ansible-playbook loads its callbacks:
# the point of this plugin is this import-time hand-over, and the earliest word on an untested ansible-core.
_wanted = wrapped_callback(os.environ, getattr(C, "CONFIG_FILE", None))
if _wanted:
    os.environ["ORIGINAL_STDOUT_CALLBACK"] = _wanted
warn_if_untested_core(Display())


class VarsModule(BaseVarsPlugin):
    def get_vars(self, loader: Any, path: str, entities: Any, cache: bool = True) -> dict[str, Any]:
        return {}
