# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lookup cvs.cluster.inventory_errors: why a CVS cluster file among the inventory sources gave no hosts."""

from __future__ import annotations

DOCUMENTATION = r"""
name: inventory_errors
author: cvs.cluster developers (@cvs-cluster)
version_added: "0.2.0"
short_description: The errors of the CVS cluster files among the inventory sources
description:
  - Ansible goes on with an empty inventory when a source cannot be parsed, so a broken cluster file would let a
    playbook "succeed" having done nothing. The collection's playbooks call this lookup in their first play and fail
    the run with its messages. (With C([inventory] unparsed_is_failed) or C(any_unparsed_is_failed) set, as in an
    AWX inventory sync, the M(cvs.cluster.cluster_json) inventory plugin ends the command itself, before any play.)
  - Each term is an inventory source (usually C(ansible_inventory_sources)). Every source the
    M(cvs.cluster.cluster_json) inventory plugin accepts (a cluster file given directly, or a C(.cvs.yml) source)
    is read again with the plugin's own validation; each error is returned as one message naming the file, the
    key path and the reason (a JSON syntax error with its line and column). Other sources are ignored.
options:
  _terms:
    description: Inventory sources (paths).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Fail on a broken cluster file before anything starts
  ansible.builtin.fail:
    msg: "{{ _errors | join('; ') }}"
  vars:
    _errors: "{{ query('cvs.cluster.inventory_errors', *ansible_inventory_sources) }}"
  when: _errors | length > 0
"""

RETURN = r"""
_raw:
  description: One message per broken cluster file source; empty when there is none.
  type: list
  elements: str
"""

import os
from typing import Any, Optional

from ansible.errors import AnsibleError
from ansible.plugins.loader import inventory_loader
from ansible.plugins.lookup import LookupBase

from ansible_collections.cvs.cluster.plugins.plugin_utils._inventory.cluster_json import ClusterFileError

PLUGIN = "cvs.cluster.cluster_json"


class LookupModule(LookupBase):
    def run(self, terms: list[Any], variables: Optional[dict[str, Any]] = None, **kwargs: Any) -> list[str]:
        errors = []
        for term in terms:
            path = os.path.abspath(os.path.expanduser(str(term)))
            plugin = inventory_loader.get(PLUGIN)
            if plugin is None:
                raise AnsibleError(f"cvs.cluster.inventory_errors: the inventory plugin {PLUGIN} cannot be loaded")
            if not os.path.isfile(path) or not plugin.verify_file(path):
                continue
            try:
                plugin.read_source(path, self._loader)
            except (ClusterFileError, AnsibleError) as exc:
                errors.append(str(getattr(exc, "message", None) or exc))
        return errors
