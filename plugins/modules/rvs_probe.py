#!/usr/bin/python
# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: rvs_probe
short_description: Find what an RVS run needs on a node, in one call (read-only)
version_added: 0.3.0
description:
  - Used by the role C(cvs.cluster.rvs) before it plans a node's run; nothing is judged here (the filter
    P(cvs.cluster.rvs_plan#filter) does, on the controller).
  - Looks for the rvs binary (a directory is taken as the folder holding C(rvs)); when it is there and executable,
    asks it for its version (C(rvs --version), with O(library_path) as C(LD_LIBRARY_PATH)), asks amd-smi for the
    GPU model (C(amd-smi static -a -g 0 --json)) and lists which of O(config_files) exist in O(config_dir) or in
    one of its sub-folders (the per-GPU-model folders).
  - Commands run without a shell, each bounded by O(command_timeout); a missing program or a timeout is returned,
    never raised.
author:
  - cvs.cluster developers (@cvs-cluster)
extends_documentation_fragment:
  - cvs.cluster.attributes.read_only
options:
  rvs_path:
    description: The rvs binary, or the directory holding it.
    type: str
    required: true
  library_path:
    description: C(LD_LIBRARY_PATH) of C(rvs --version).
    type: str
    default: ""
  amd_smi_path:
    description: The amd-smi binary.
    type: str
    required: true
  config_dir:
    description: The common folder of RVS configuration files; its sub-folders are the per-GPU-model folders.
    type: str
    required: true
  config_files:
    description: Configuration file names to look for (an absolute path is looked for as it is).
    type: list
    elements: str
    default: []
  command_timeout:
    description: Seconds each command may take.
    type: float
    default: 120
seealso:
  - module: cvs.cluster.rvs_run
"""

EXAMPLES = r"""
- name: Look for rvs, its version, the GPU model and the configuration files
  cvs.cluster.rvs_probe:
    rvs_path: /opt/rocm/bin/rvs
    library_path: /opt/rocm/lib
    amd_smi_path: /opt/rocm/bin/amd-smi
    config_dir: /opt/rocm/share/rocm-validation-suite/conf
    config_files: [mem.conf, gst_single.conf]
  register: probe
  become: true
"""

RETURN = r"""
rvs:
  description: C(path) (the binary, C(<rvs_path>/rvs) when O(rvs_path) is a directory) and C(usable) (it exists, is
    no directory and is executable).
  returned: always
  type: dict
  sample: {path: /opt/rocm/bin/rvs, usable: true}
version:
  description: C(rvs --version) - C(rc) (null when it did not run to an end), C(stdout), C(stderr), C(problem);
    null when rvs is not usable.
  returned: always
  type: dict
  sample: {rc: 0, stdout: "1.3.0\n", stderr: "", problem: null}
amd_smi:
  description: C(amd-smi static -a -g 0 --json), as RV(version); null when rvs is not usable.
  returned: always
  type: dict
configs:
  description: The configuration files found, as C(<config_dir>/<file>), C(<config_dir>/<sub-folder>/<file>) or
    the absolute path given.
  returned: always
  type: list
  elements: str
  sample: [/opt/rocm/share/rocm-validation-suite/conf/mem.conf]
"""

import os
from typing import Any, Dict, List, Sequence

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.cvs.cluster.plugins.module_utils._process import run_command

AMD_SMI_ARGS = ["static", "-a", "-g", "0", "--json"]


def find_rvs(path: str) -> Dict[str, Any]:
    """The rvs binary at ``path`` (``path/rvs`` when ``path`` is a directory) and whether it can run."""
    if os.path.isdir(path):
        path = f"{path}/rvs"
    usable = os.path.exists(path) and not os.path.isdir(path) and os.access(path, os.X_OK)
    return {"path": path, "usable": usable}


def existing_configs(config_dir: str, names: Sequence[str]) -> List[str]:
    """Which of ``names`` exist: an absolute name as it is, a relative one in ``config_dir`` or in one of its
    sub-folders. Paths are spelled ``<config_dir>/[<sub-folder>/]<name>``, as the plan spells its candidates."""
    try:
        folders = sorted(e.name for e in os.scandir(config_dir) if e.is_dir())
    except OSError:
        folders = []
    found: List[str] = []
    for name in dict.fromkeys(names):
        if name.startswith("/"):
            candidates = [name]
        else:
            candidates = [f"{config_dir}/{name}"] + [f"{config_dir}/{folder}/{name}" for folder in folders]
        found.extend(c for c in candidates if os.path.exists(c))
    return found


def probe(
    rvs_path: str,
    library_path: str,
    amd_smi_path: str,
    config_dir: str,
    config_files: Sequence[str],
    timeout: float,
) -> Dict[str, Any]:
    rvs = find_rvs(rvs_path)
    result: Dict[str, Any] = {"rvs": rvs, "version": None, "amd_smi": None, "configs": []}
    if not rvs["usable"]:
        return result
    env = {**os.environ, "LD_LIBRARY_PATH": library_path}
    result["version"] = run_command([rvs["path"], "--version"], timeout, env)
    result["amd_smi"] = run_command([amd_smi_path, *AMD_SMI_ARGS], timeout)
    result["configs"] = existing_configs(config_dir, config_files)
    return result


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "rvs_path": {"type": "str", "required": True},
            "library_path": {"type": "str", "default": ""},
            "amd_smi_path": {"type": "str", "required": True},
            "config_dir": {"type": "str", "required": True},
            "config_files": {"type": "list", "elements": "str", "default": []},
            "command_timeout": {"type": "float", "default": 120},
        },
        supports_check_mode=True,
    )
    p = module.params
    result = probe(
        p["rvs_path"], p["library_path"], p["amd_smi_path"], p["config_dir"], p["config_files"], p["command_timeout"]
    )
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
