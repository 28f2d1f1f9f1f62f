#!/usr/bin/python
# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: platform_probe
short_description: Read a node's platform configuration - kernel command line, memory, PCIe links, ACS, versions
version_added: 0.4.0
description:
  - Collects, in one call, what the platform suite (C(cvs.cluster.platform)) judges - the kernel command line,
    NUMA balancing, transparent huge pages, online memory (what C(lsmem) sums), the OS release, the BIOS version,
    the GPUs, NICs and bridges of C(lspci -D -nn -vv) (link capability and status, ACS controls, bus ranges) and
    the output of C(amd-smi version), C(amd-smi static --asic --driver --vbios --json) and, with O(firmware),
    C(amd-smi firmware --json).
  - The tools are looked up first; a node that lacks one runs nothing and returns it in RV(missing).
  - C(lspci) output is parsed on the node and only the fields the judge needs are returned. Nothing is judged
    here; the filter P(cvs.cluster.platform_judge#filter) does that on the controller.
  - C(lspci) needs root to read PCIe capabilities (it prints C(<access denied>) otherwise, see RV(pci)).
author:
  - cvs.cluster developers (@cvs-cluster)
extends_documentation_fragment:
  - cvs.cluster.attributes.read_only
options:
  cmdline_path:
    description: File holding the kernel command line.
    type: path
    default: /proc/cmdline
  lspci_path:
    description:
      - C(lspci), by name (looked up on C(PATH), then in O(search_paths) and the system's C(sbin) and C(bin)
        folders) or absolute path.
      - Null reads no PCI device.
    type: str
    default: lspci
  amd_smi_path:
    description: C(amd-smi). Null runs no amd-smi command (no ROCm, driver or firmware versions).
    type: str
    default: /opt/rocm/bin/amd-smi
  firmware:
    description: Also run C(amd-smi firmware --json).
    type: bool
    default: false
  search_paths:
    description: Folders searched after C(PATH) for tools named without a C(/).
    type: list
    elements: str
    default: []
  command_timeout:
    description: Seconds each command may take.
    type: float
    default: 60
seealso:
  - module: cvs.cluster.node_probe
"""

EXAMPLES = r"""
- name: Probe the node's platform
  cvs.cluster.platform_probe:
    cmdline_path: /proc/cmdline
    firmware: true
  register: platform
  become: true
"""

RETURN = r"""
kernel:
  description: The kernel release (C(uname -r)).
  returned: always
  type: str
missing:
  description: Tools not found, C({tool, path}) each; when not empty nothing else was read.
  returned: always
  type: list
  elements: dict
tools:
  description: Per tool, where it was found (null when it was not).
  returned: always
  type: dict
cmdline:
  description: C({path, value, problem}) of the kernel command line.
  returned: when no tool is missing
  type: dict
numa_balancing:
  description: C({path, value, problem}) of C(/proc/sys/kernel/numa_balancing).
  returned: when no tool is missing
  type: dict
thp:
  description: C(enabled) and C(defrag), each C({path, value, problem}) with the selected mode as C(value).
  returned: when no tool is missing
  type: dict
memory:
  description: C(bytes) of online memory, C(source) (the memory-block folder, or C(/proc/meminfo)), C(problem).
  returned: when no tool is missing
  type: dict
os_release:
  description: C(value), the fields of C(/etc/os-release) (C(PRETTY_NAME), C(VERSION_ID) ...).
  returned: when no tool is missing
  type: dict
bios_version:
  description: C({path, value, problem}) of C(/sys/class/dmi/id/bios_version).
  returned: when no tool is missing
  type: dict
pci:
  description:
    - C(rc), C(problem), C(stderr) of C(lspci -D -nn -vv); C(access_denied) (capabilities not readable, not root);
      C(all_devices) (how many functions lspci listed); C(devices), the bridges, GPUs and network functions, each
      with C(bdf), C(class), C(class_code), C(vendor_id), C(device_id), C(name), C(port_type), C(link_cap) and
      C(link_sta) (C(speed) in GT/s, C(width) in lanes, lspci's notes), C(acs_ctl) (flag to on/off) and C(bus)
      (a bridge's primary, secondary and subordinate bus numbers).
  returned: when no tool is missing and O(lspci_path) is set
  type: dict
commands:
  description: Per amd-smi command (C(amd_smi_version), C(amd_smi_static), C(amd_smi_firmware)), C(rc),
    C(stdout), C(stderr) and C(problem), as M(cvs.cluster.node_probe) returns them.
  returned: when no tool is missing
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.cvs.cluster.plugins.module_utils._platform_probe import probe


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "cmdline_path": {"type": "path", "default": "/proc/cmdline"},
            "lspci_path": {"type": "str", "default": "lspci"},
            "amd_smi_path": {"type": "str", "default": "/opt/rocm/bin/amd-smi"},
            "firmware": {"type": "bool", "default": False},
            "search_paths": {"type": "list", "elements": "str", "default": []},
            "command_timeout": {"type": "float", "default": 60},
        },
        supports_check_mode=True,
    )
    p = module.params
    result = probe(
        p["cmdline_path"],
        p["lspci_path"] or None,
        p["amd_smi_path"] or None,
        p["firmware"],
        p["command_timeout"],
        p["search_paths"],
    )
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
