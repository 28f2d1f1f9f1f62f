#!/usr/bin/python
# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: node_probe
short_description: Read what a node says about itself before a validation run (read-only)
version_added: 0.3.0
description:
  - Collects, in one call, what the preflight suite (C(cvs.cluster.preflight)) compares across nodes - the
    node's clock and kernel release, the output of read-only commands such as C(amd-smi version) and
    C(rvs --version), where required binaries are, free space under the run directories, kernel-log lines
    matching GPU/RAS/PCIe error patterns, and the state of every RDMA port.
  - With no options it only describes the node (host name, kernel, CPUs, memory, the default route's address, the
    GPUs the kernel shows), which is what C(cvs.cluster.validate)'s node table and report read, at a fraction of
    the cost of fact gathering.
  - Nothing is judged here; the filter P(cvs.cluster.preflight_judge#filter) compares the nodes on the controller.
  - Commands run without a shell, each bounded by O(command_timeout); a missing program or a timeout is returned
    in RV(commands), never raised.
author:
  - cvs.cluster developers (@cvs-cluster)
extends_documentation_fragment:
  - cvs.cluster.attributes.read_only
options:
  commands:
    description:
      - Commands to run, by name. Each is an argv list, or a dictionary with C(argv) and C(keep), a regular
        expression of the output lines to return (the others are dropped on the node).
      - A program without a C(/) is looked up on C(PATH), then in O(search_paths).
    type: dict
    default: {}
  binaries:
    description: Programs that must be present (names or absolute paths); RV(binaries) says where each was found.
    type: list
    elements: str
    default: []
  paths:
    description: Directories whose file system's free space is reported (a missing directory reports its nearest
      existing parent).
    type: list
    elements: str
    default: []
  kernel_log_patterns:
    description: Regular expressions (by name) of kernel-log lines that are errors. Empty skips reading the log.
    type: dict
    default: {}
  kernel_log_ignore:
    description: Regular expressions (by name) of kernel-log lines to leave out even when an error pattern matches.
    type: dict
    default: {}
  search_paths:
    description: Folders searched after C(PATH) for programs named without a C(/).
    type: list
    elements: str
    default: []
  command_timeout:
    description: Seconds each command may take.
    type: float
    default: 30
notes:
  - The kernel log is read from C(/dev/kmsg), which needs root (or C(CAP_SYSLOG)); container engines do not give
    containers that device by default, so on the container backend C(readable) in RV(kernel_log) is usually false.
seealso:
  - module: cvs.cluster.check_result
"""

EXAMPLES = r"""
- name: Probe the node
  cvs.cluster.node_probe:
    commands:
      amd_smi_version: [/opt/rocm/bin/amd-smi, version]
      rvs_version: [/opt/rocm/bin/rvs, --version]
    binaries: [python3, /opt/rocm/bin/amd-smi]
    paths: [/var/tmp/cvs]
    kernel_log_patterns:
      amdgpu: 'amdgpu.*(error|fail|timeout)'
  register: probe
  become: true
"""

RETURN = r"""
time:
  description: The node's clock (seconds since the epoch) when the probe started.
  returned: always
  type: float
hostname:
  description: The node's host name.
  returned: always
  type: str
kernel:
  description: The kernel release (C(uname -r)).
  returned: always
  type: str
cpus:
  description: Logical CPUs.
  returned: always
  type: int
memory_mb:
  description: Total memory in MiB (C(MemTotal) of C(/proc/meminfo)), or null when it cannot be read.
  returned: always
  type: int
address:
  description: The IPv4 address of the interface of the default route (lowest metric), or null without one.
  returned: always
  type: str
gpu_render_nodes:
  description: How many DRM render nodes (C(/dev/dri/renderD*)) the node shows, one per GPU its kernel driver
    exposes.
  returned: always
  type: int
commands:
  description: Per command name, C(rc) (null when it did not run to an end), C(stdout), C(stderr) and C(problem)
    (why it did not run, or null).
  returned: always
  type: dict
  sample: {rvs_version: {rc: 0, stdout: "1.3.0\n", stderr: "", problem: null}}
binaries:
  description: Per requested program, the path where it was found, or null.
  returned: always
  type: dict
disk:
  description: Per path, C(path), C(probed) (the existing directory measured), C(free_mb), C(total_mb), C(problem).
  returned: always
  type: list
  elements: dict
kernel_log:
  description: C(readable) (null when not read), C(problem), C(lines) read, C(matched) and the first 50
    C(matches) (C({name, line})).
  returned: always
  type: dict
rdma:
  description: Every RDMA port, C({device, port, state, phys_state}) (empty when the node has none).
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.cvs.cluster.plugins.module_utils._node_probe import ProbeError, probe


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "commands": {"type": "dict", "default": {}},
            "binaries": {"type": "list", "elements": "str", "default": []},
            "paths": {"type": "list", "elements": "str", "default": []},
            "kernel_log_patterns": {"type": "dict", "default": {}},
            "kernel_log_ignore": {"type": "dict", "default": {}},
            "search_paths": {"type": "list", "elements": "str", "default": []},
            "command_timeout": {"type": "float", "default": 30},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        result = probe(
            p["commands"],
            p["binaries"],
            p["paths"],
            p["kernel_log_patterns"],
            p["kernel_log_ignore"],
            p["command_timeout"],
            p["search_paths"],
        )
    except ProbeError as exc:
        module.fail_json(msg=f"node_probe: {exc}")
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
