# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lookup cvs.cluster.results_dir: the default controller results directory."""

from __future__ import annotations

DOCUMENTATION = r"""
name: results_dir
author: cvs.cluster developers (@cvs-cluster)
version_added: "0.2.0"
short_description: The controller directory for run results when C(cvs_results_dir) is not set
description:
  - Returns the default results root of the collection's playbooks and roles, so a run never writes into an
    installed collection's own directory. In order, the first that applies
  - The environment variable C(CVS_RESULTS_DIR).
  - Under ansible-runner or AWX, C(cvs-results) inside the job's artifact directory (C(AWX_ISOLATED_DATA_DIR)), so
    the results travel back with the job's artifacts.
  - For a playbook of an installed collection (its root holds C(MANIFEST.json)), C(cvs-results) in the current
    working directory.
  - For a playbook of a source checkout of the collection (its root holds C(galaxy.yml)), C(<checkout>/results).
  - Otherwise C(<playbook_dir>/../results).
options: {}
notes:
  - Set C(cvs_results_dir) to choose the directory yourself; every role and playbook uses it when set.
"""

EXAMPLES = r"""
- name: Results root of this run
  ansible.builtin.set_fact:
    my_results: "{{ cvs_results_dir | default(lookup('cvs.cluster.results_dir')) }}"
"""

RETURN = r"""
_raw:
  description: One absolute path.
  type: list
  elements: path
"""

import os
from typing import Any, Optional

from ansible.errors import AnsibleError
from ansible.plugins.lookup import LookupBase

from ansible_collections.cvs.cluster.plugins.plugin_utils._run.results_dir import default_results_dir


class LookupModule(LookupBase):
    def run(self, terms: list[Any], variables: Optional[dict[str, Any]] = None, **kwargs: Any) -> list[str]:
        if terms:
            raise AnsibleError(f"cvs.cluster.results_dir takes no terms (got {terms!r})")
        playbook_dir = (variables or {}).get("playbook_dir")
        return [default_results_dir(str(playbook_dir) if playbook_dir else None, os.environ, os.getcwd())]
