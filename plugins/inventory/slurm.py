# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Inventory plugin: the nodes of a Slurm partition, as Slurm's controller lists them."""

from __future__ import annotations

DOCUMENTATION = r"""
name: slurm
short_description: The nodes of a Slurm partition as cvs_nodes
version_added: 0.3.0
author: cvs.cluster developers (@cvs-cluster)
description:
  - Asks Slurm's controller for the nodes of O(partition) (C(scontrol --oneliner show partition) and C(show node))
    and makes each a host of group C(cvs_nodes), named by its Slurm C(NodeName), with C(ansible_host) its
    C(NodeAddr). The head node (group C(cvs_head)) is O(head), else the first node that can run a job.
  - "Host variables say what Slurm knows: C(slurm_node), C(slurm_state) (for example C(IDLE), C(IDLE+DRAIN),
    C(DOWN*)), C(slurm_available) (false when drained, down, failing, not responding or in maintenance),
    C(slurm_reason) (when Slurm has one), C(slurm_cpus) and C(slurm_partitions). Nodes that cannot run a job are
    listed too, in the extra group C(slurm_unavailable), so a report can name them."
  - Runs C(scontrol) on the controller, which must be a Slurm submit host (Slurm's client commands and
    configuration, and its munge key). O(slurm_conf) selects another configuration (as C(SLURM_CONF) does).
  - An unknown partition, or a controller that does not answer, fails the inventory with Slurm's own message.
  - "Values are plain data, as with ansible-core's own file inventories; a value holding template syntax (a node's
    C(Reason), say) is kept untrusted and is never rendered."
extends_documentation_fragment:
  - constructed
options:
  plugin:
    description: Token that makes this YAML file a source for this plugin.
    required: true
    type: str
    choices: [cvs.cluster.slurm]
  partition:
    description: The Slurm partition whose nodes are listed.
    required: true
    type: str
  slurm_conf:
    description:
      - Path of the C(slurm.conf) to use (exported as C(SLURM_CONF) to C(scontrol)); a relative path is relative to
        the directory of this source.
      - When not set, Slurm's own is used (C(SLURM_CONF) of the environment, else its built-in path).
    type: str
    env:
      - name: SLURM_CONF
  scontrol:
    description: The C(scontrol) command (a name on C(PATH), or a path).
    type: str
    default: scontrol
  head:
    description: The node that is the head (C(cvs_head)); it must be a node of the partition.
    type: str
  timeout:
    description: Seconds each C(scontrol) call may take.
    type: int
    default: 20
"""

EXAMPLES = r"""
# slurm.yml: the nodes of partition "gpu"; then: ansible-playbook -i slurm.yml playbooks/validate.yml
plugin: cvs.cluster.slurm
partition: gpu
compose:
  ansible_user: "'root'"
"""

import os
import re
import subprocess
from typing import Any, Optional

from ansible.errors import AnsibleParserError
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.inventory import BaseInventoryPlugin, Constructable

from ansible_collections.cvs.cluster.plugins.plugin_utils._inventory.trust import trusted_data
from ansible_collections.cvs.cluster.plugins.plugin_utils._slurm import inventory_hosts, parse_oneliner

_YAML_SOURCE_RE = re.compile(r"""^plugin:\s*["']?cvs\.cluster\.slurm["']?\s*(#.*)?$""", re.MULTILINE)
_NODES_GROUP = "cvs_nodes"
_HEAD_GROUP = "cvs_head"
_UNAVAILABLE_GROUP = "slurm_unavailable"


class InventoryModule(BaseInventoryPlugin, Constructable):
    NAME = "cvs.cluster.slurm"

    def verify_file(self, path: str) -> bool:
        if not super().verify_file(path) or not path.lower().endswith((".yml", ".yaml")):
            return False
        try:
            with open(path, encoding="utf-8") as handle:
                return _YAML_SOURCE_RE.search(handle.read(65536)) is not None
        except (OSError, UnicodeDecodeError):
            return False

    def parse(self, inventory: Any, loader: Any, path: str, cache: bool = True) -> None:
        super().parse(inventory, loader, path, cache)
        self._read_config_data(path)
        partition = self.get_option("partition")
        conf = self.get_option("slurm_conf")
        if conf:
            conf = os.path.join(os.path.dirname(os.path.abspath(path)), os.path.expanduser(conf))
        self._conf: Optional[str] = conf or None
        self._source = path
        self._scontrol(["show", "partition", partition], f"partition {partition!r}")
        nodes = parse_oneliner(self._scontrol(["show", "node"], "the nodes"))
        hosts = inventory_hosts(nodes, partition)
        if not hosts:
            raise AnsibleParserError(f"{path}: Slurm partition {partition!r} has no nodes")
        head = self.get_option("head") or next(
            (h["name"] for h in hosts if h["vars"]["slurm_available"]), hosts[0]["name"]
        )
        if head not in {h["name"] for h in hosts}:
            raise AnsibleParserError(
                f"{path}: head {head!r} is not a node of Slurm partition {partition!r} "
                f"({', '.join(h['name'] for h in hosts)})"
            )
        self._populate(hosts, head)

    def _scontrol(self, args: list[str], what: str) -> str:
        env = dict(os.environ)
        if self._conf:
            env["SLURM_CONF"] = self._conf
        argv = [self.get_option("scontrol"), "--oneliner", *args]
        try:
            proc = subprocess.run(argv, capture_output=True, env=env, timeout=self.get_option("timeout"), check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise AnsibleParserError(f"{self._source}: Slurm: {what}: {' '.join(argv)}: {to_text(exc)}") from None
        if proc.returncode != 0:
            message = (to_text(proc.stderr) or to_text(proc.stdout)).strip() or f"exit status {proc.returncode}"
            raise AnsibleParserError(f"{self._source}: Slurm: {what}: {message}")
        return to_text(proc.stdout)

    def _populate(self, hosts: list[dict[str, Any]], head: str) -> None:
        for group in (_NODES_GROUP, _HEAD_GROUP, _UNAVAILABLE_GROUP):
            self.inventory.add_group(group)
        strict = self.get_option("strict")
        for host in hosts:
            name = host["name"]
            self.inventory.add_host(name, group=_NODES_GROUP)
            for key, value in host["vars"].items():
                self.inventory.set_variable(name, key, trusted_data(value))
            if not host["vars"]["slurm_available"]:
                self.inventory.add_host(name, group=_UNAVAILABLE_GROUP)
            variables = {**host["vars"], "inventory_hostname": name}
            self._set_composite_vars(self.get_option("compose"), variables, name, strict=strict)
            self._add_host_to_composed_groups(self.get_option("groups"), variables, name, strict=strict)
            self._add_host_to_keyed_groups(self.get_option("keyed_groups"), variables, name, strict=strict)
        self.inventory.add_host(head, group=_HEAD_GROUP)
