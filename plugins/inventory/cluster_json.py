# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Inventory plugin: read a legacy CVS cluster file (cluster.json)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: cluster_json
short_description: Use a CVS cluster file (cluster.json) as an inventory
version_added: 0.1.0
author: cvs.cluster developers (@cvs-cluster)
description:
  - Reads a cluster file of the upstream Cluster Validation Suite (CVS) and turns it into the
    C(cvs.cluster) inventory model, so existing C(cluster.json) files keep working.
  - "Two ways to use it: pass the JSON file itself (C(ansible-inventory -i cluster.json)); the plugin
    claims a C(.json) file only when it looks like a CVS cluster file (it has C(node_dict) and one of
    C(username), C(head_node_dict), C(priv_key_file)), so other JSON inventories are left to other
    plugins. Or write a YAML inventory source with C(plugin: cvs.cluster.cluster_json) and C(path),
    which also takes the options below and the constructed options (C(compose), C(groups), C(keyed_groups))."
  - "Values are plain data, as with ansible-core's own file inventories (C(ansible-inventory --list) and AWX's
    inventory import see strings, not C(__ansible_unsafe) objects); a value holding template syntax
    (C({{), C({%), C({#)) is kept untrusted and is never rendered."
  - "Every node becomes a host in group C(cvs_nodes), named by its C(hostname) attribute if it has one,
    else by its address; C(ansible_host) is the address. The head node becomes the only host of group
    C(cvs_head): option O(head), else C(head_node_dict.mgmt_ip), else the first node, matched by name, address,
    hostname or C(vpc_ip) of a listed node; option O(head) must name one."
  - "A C(head_node_dict.mgmt_ip) that is not a listed node is a jump host, as upstream's generator writes it:
    every node is reached through it (C(ansible_ssh_common_args) gets an ssh C(ProxyCommand) C(ssh -W) with the
    file's C(username) and C(priv_key_file), plus O(jump_ssh_args); C(ansible_control_path) is one of its own, so
    a ControlMaster opened without the jump host is never reused), C(cvs_jump_host) names it, and the first
    node is the head. Nothing runs on the jump host itself."
  - "Mapping of file keys: C(username) to C(ansible_user), C(priv_key_file) to
    C(ansible_ssh_private_key_file) (C(~) expanded), C(password) to C(ansible_password) (only when set),
    C(orchestrator) to C(cvs_orchestrator) (C(baremetal) by default; C(container), C(docker), C(podman)
    mean C(container)), C(container) to C(cvs_container), C(env_vars) to C(cvs_env); per node
    C(vpc_ip) to C(cvs_vpc_ip) (the address when missing or C(NA)), C(bmc_ip) to C(cvs_bmc_ip),
    C(rack_id) to C(cvs_rack_id), other node attributes to C(cvs_node_extra). Cluster-wide variables
    are group variables of C(cvs_nodes). Keys starting with C(_) are comments and ignored; upstream's
    C(racks) and C(rack_groups) (switch trays for its C(cvs exec)) are ignored with a warning; any other
    top-level key is refused naming the closest valid key."
  - "C(cvs_container) is the container model's normalised form (the same code cvs.cluster.prepare runs, see the
    C(cvs.cluster.container_config) filter): C({lifetime, image, name, image_tar, env, ssh_port, registry,
    runtime: {name, args}}). This plugin only maps what is particular to cluster files: comment keys are dropped,
    C(orchestrator: docker|podman) sets C(runtime.name), an empty C(registry.server) means Docker Hub, and
    container-level C(volumes) (older CVS files) join C(runtime.args.volumes). The CVS spellings C(network),
    C(ipc), C(ulimit), C(runtime.args.registry) and the removed switches C(container.enabled) and
    C(container.launch) (deprecation warning; C(launch: true) means lifetime C(per_run), C(launch: false) or
    C(enabled: false) means C(no_launch)) are read by the model itself."
  - "The container block is refused, naming its key path, on an unknown key (with the closest valid key), a
    ulimit, device or volume in a form neither Docker nor CVS accepts, a missing image (or name for
    C(no_launch)) or an unsupported runtime."
  - "C({user-id}) anywhere in the file (except in C(password)) is replaced by O(user_id)."
  - "The file is rejected, naming the key path at fault (for example C(node_dict.192.0.2.5.bmc_ip)), when
    a C(<changeme>) or template placeholder such as C({xx.xx.xx.xx|hostname}) is left, a node or key is
    listed twice, C(node_dict) is empty, or a value has the wrong type. Secrets never appear in messages."
  - "Errors in a YAML source raise a parser error (fatal with C([inventory] any_unparsed_is_failed = true)).
    An invalid cluster file given directly is reported as an error and yields no hosts: raising would
    only let the builtin C(yaml) plugin, which also reads C(.json), turn the file into meaningless groups."
  - "When Ansible is configured to treat an unparsed inventory as fatal (C([inventory] unparsed_is_failed) or
    C(any_unparsed_is_failed); AWX's inventory sync sets E(ANSIBLE_INVENTORY_UNPARSED_FAILED)), an invalid
    cluster file given directly ends the command instead: the error is printed and the exit status is 4, that of
    a parser error (C(ansible-inventory --list) fails, and so does AWX's sync)."
notes:
  - C(ansible-inventory --list) prints all host variables, C(ansible_password) included. Prefer SSH keys,
    or keep the password out of the file (for example in an Ansible Vault encrypted C(group_vars) file).
  - Group variables set by this plugin have inventory-source precedence, so C(group_vars/cvs_nodes.yml)
    next to the YAML source overrides them.
extends_documentation_fragment:
  - constructed
options:
  plugin:
    description: Token that makes this YAML file a source for this plugin (YAML source only).
    required: true
    type: str
    choices: [cvs.cluster.cluster_json]
  path:
    description:
      - The CVS cluster file to read (YAML source only; when the JSON file is given directly, it is the source).
      - A relative path is relative to the directory of the YAML source file. C(~) is expanded.
    type: str
  user_id:
    description:
      - The user that C({user-id}) stands for.
      - Defaults to C($USER), then C($LOGNAME), C($USERNAME), then the login name of the current process,
        as CVS does.
    type: str
    env:
      - name: CVS_USER_ID
    ini:
      - section: cvs_cluster_json
        key: user_id
  head:
    description:
      - The head node, overriding C(head_node_dict.mgmt_ip). Name, address, C(hostname) or C(vpc_ip) of a node
        listed in C(node_dict).
    type: str
    env:
      - name: CVS_HEAD_NODE
    ini:
      - section: cvs_cluster_json
        key: head
  jump_ssh_args:
    description:
      - Extra ssh options for the hop to a jump-host head (for example C(-o StrictHostKeyChecking=accept-new)).
        The hop checks host keys as the controller's ssh configuration says.
    type: str
    default: ""
    env:
      - name: CVS_JUMP_SSH_ARGS
    ini:
      - section: cvs_cluster_json
        key: jump_ssh_args
"""

EXAMPLES = r"""
# Use the CVS file directly (ansible.cfg must list cvs.cluster.cluster_json in [inventory] enable_plugins):
#   ansible-inventory -i cluster.json --graph
#   CVS_USER_ID=svc-gpu ansible-playbook -i cluster.json cvs.cluster.validate

---
# inventories/my-cluster.yml -- a YAML source pointing at the file
plugin: cvs.cluster.cluster_json
path: cluster.json            # relative to this YAML file
user_id: svc-gpu              # what {user-id} stands for
head: 192.0.2.11              # overrides head_node_dict.mgmt_ip

---
# The same, adding groups from the node attributes (constructed options)
plugin: cvs.cluster.cluster_json
path: /etc/cvs/cluster.json
keyed_groups:
  - key: cvs_rack_id | default('none')
    prefix: rack
compose:
  cvs_results_dir: "'/var/tmp/cvs/' ~ inventory_hostname"
"""

import json
import os
import re
from typing import Any, Optional

from ansible import constants as C
from ansible.errors import AnsibleParserError
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.inventory import BaseInventoryPlugin, Constructable

from ansible_collections.cvs.cluster.plugins.plugin_utils._inventory.cluster_json import (
    HEAD_GROUP,
    NODES_GROUP,
    ClusterFileError,
    convert_cluster,
    load_cluster_json,
    looks_like_cluster_file,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._inventory.trust import trusted_data

# A YAML source names this plugin by its FQCN on a top-level "plugin:" line.
_YAML_SOURCE_RE = re.compile(r"""^plugin:\s*["']?cvs\.cluster\.cluster_json["']?\s*(#.*)?$""", re.MULTILINE)
_YAML_EXTENSIONS = (".yml", ".yaml")
_JSON_EXTENSIONS = (".json",)
# Cluster files are small; never read a big file only to decline it.
_MAX_BYTES = 8 * 1024 * 1024
# ansible's exit status for an AnsibleParserError (ExitCode.PARSER_ERROR)
_PARSER_ERROR_STATUS = 4


def _read_text(path: str) -> Optional[str]:
    """The file's text, or None when it is too big or unreadable as UTF-8."""
    try:
        if os.path.getsize(path) > _MAX_BYTES:
            return None
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None


def unparsed_is_fatal() -> bool:
    """Whether Ansible's configuration makes an inventory source that cannot be parsed fatal.

    ``[inventory] unparsed_is_failed`` (env ANSIBLE_INVENTORY_UNPARSED_FAILED, set by AWX's inventory sync) or
    ``any_unparsed_is_failed`` (env ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED).
    """
    return bool(
        getattr(C, "INVENTORY_UNPARSED_IS_FAILED", False) or getattr(C, "INVENTORY_ANY_UNPARSED_IS_FAILED", False)
    )


def _looks_like_cluster_json(path: str) -> bool:
    text = _read_text(path)
    if text is None or "node_dict" not in text:
        return False
    try:
        # Lenient on purpose: a cluster file with errors is still ours, and parse() reports them.
        return looks_like_cluster_file(json.loads(text))
    except ValueError:
        # A .json file naming node_dict that is not JSON: a cluster file with a syntax error (parse() names the
        # line and column); left to the yaml plugin it would become meaningless groups.
        return True


class InventoryModule(BaseInventoryPlugin, Constructable):
    NAME = "cvs.cluster.cluster_json"

    def verify_file(self, path: str) -> bool:
        if not super().verify_file(path) or os.path.isdir(path):
            return False
        lowered = path.lower()
        if lowered.endswith(_YAML_EXTENSIONS):
            text = _read_text(path)
            return text is not None and _YAML_SOURCE_RE.search(text) is not None
        if lowered.endswith(_JSON_EXTENSIONS):
            return _looks_like_cluster_json(path)
        return False

    def parse(self, inventory: Any, loader: Any, path: str, cache: bool = True) -> None:
        super().parse(inventory, loader, path, cache)
        try:
            cluster_path, result = self.read_source(path, loader)
        except ClusterFileError as exc:
            # A raised error would make Ansible try the next plugins, and the builtin yaml plugin
            # (which also takes .json) would "parse" the file into junk groups and hide this message.
            # Report it and leave the source empty instead (the playbooks' first play fails the run with it).
            self.display.error(str(exc))
            if unparsed_is_fatal():
                # ...unless an unparsed source must be fatal (AWX's inventory sync): the junk groups would count as
                # parsed and the sync succeed. Ansible catches every Exception a plugin raises and tries the next
                # plugin, so the command ends here, with the status Ansible gives a parser error.
                raise SystemExit(_PARSER_ERROR_STATUS) from None
            return

        for message in result["warnings"]:
            if message in result["deprecations"]:
                self.display.deprecated(f"{cluster_path}: {message}", version="1.0.0", collection_name="cvs.cluster")
            else:
                self.display.warning(f"{cluster_path}: {message}")
        self._populate(result)

    def read_source(self, path: str, loader: Any) -> tuple[str, dict[str, Any]]:
        """The cluster file and its conversion for an inventory source this plugin accepts.

        Raises ClusterFileError (a cluster file given directly) or AnsibleParserError (a YAML source) naming the
        file. Also used by the lookup cvs.cluster.inventory_errors to name a broken source in the playbooks.
        """
        self.loader = loader
        if not path.lower().endswith(_YAML_EXTENSIONS):
            self.set_options(direct={"plugin": self.NAME})
            cluster_path = path
        else:
            self._read_config_data(path)
            configured = self.get_option("path")
            if not configured:
                raise AnsibleParserError(f"{path}: option 'path' (the CVS cluster file) is required")
            cluster_path = os.path.join(os.path.dirname(os.path.abspath(path)), os.path.expanduser(configured))
        try:
            return cluster_path, self._convert(cluster_path)
        except ClusterFileError as exc:
            message = f"invalid CVS cluster file {cluster_path}: {exc}"
            if cluster_path != path:
                raise AnsibleParserError(message) from None
            raise ClusterFileError(None, message) from None

    def _convert(self, cluster_path: str) -> dict[str, Any]:
        try:
            with open(cluster_path, encoding="utf-8") as handle:
                text = handle.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise ClusterFileError(None, f"cannot read the file: {to_text(exc)}") from None
        data = load_cluster_json(text)
        if not looks_like_cluster_file(data):
            raise ClusterFileError(
                None, "not a CVS cluster file: it needs node_dict and one of username, head_node_dict, priv_key_file"
            )
        # An empty option (CVS_HEAD_NODE= in the environment) means "not set".
        return convert_cluster(
            data,
            user_id=self.get_option("user_id") or None,
            head=self.get_option("head") or None,
            jump_ssh_args=self.get_option("jump_ssh_args") or "",
        )

    def _populate(self, result: dict[str, Any]) -> None:
        for group in (NODES_GROUP, HEAD_GROUP):
            self.inventory.add_group(group)
        group_vars = result["group_vars"][NODES_GROUP]
        for name, value in group_vars.items():
            self.inventory.set_variable(NODES_GROUP, name, trusted_data(value))

        strict = self.get_option("strict")
        for host, hostvars in result["hosts"].items():
            self.inventory.add_host(host, group=NODES_GROUP)
            for name, value in hostvars.items():
                self.inventory.set_variable(host, name, trusted_data(value))
            # constructed options see the group variables too
            variables = {**group_vars, **hostvars, "inventory_hostname": host}
            self._set_composite_vars(self.get_option("compose"), variables, host, strict=strict)
            self._add_host_to_composed_groups(self.get_option("groups"), variables, host, strict=strict)
            self._add_host_to_keyed_groups(self.get_option("keyed_groups"), variables, host, strict=strict)
        for host in result["groups"][HEAD_GROUP]:
            self.inventory.add_host(host, group=HEAD_GROUP)
