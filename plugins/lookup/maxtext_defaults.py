# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lookup cvs.cluster.maxtext_defaults: the MaxText error signatures and completion marker."""

from __future__ import annotations

DOCUMENTATION = r"""
name: maxtext_defaults
author: cvs.cluster developers (@cvs-cluster)
version_added: "0.1.0"
short_description: Default MaxText error patterns, benign-line patterns and the completion marker
description:
  - Exposes the MaxText knowledge of the collection to playbooks and roles, so that
    M(cvs.cluster.log_poll) can be fed with the same patterns the parsers and unit tests use.
  - V(error_patterns) returns the ordered mapping of name to regex of known JAX, XLA, RCCL, GPU and Python
    failure signatures (NaN/Inf loss, out of memory, missing heartbeats, barrier timeouts, RCCL errors, GPU
    faults, missing GPUs, crashes, tracebacks). Specific causes come before generic ones, so a first-match
    scanner names the cause (C(out_of_memory) rather than C(xla_runtime_error)). Every regex is
    case-insensitive by itself and never anchored.
  - V(ignore_error_patterns) returns known-benign lines that a default error pattern would match
    (RCCL's C(NCCL WARN) about NUMA balancing or C(iommu=pt)).
  - V(completion_marker) returns the regex of the last step line of an O(steps)-step run
    (C(completed step:\s*<steps-1>,)); steps count from 0.
  - V(joining_pattern) returns the regex of the line every MaxText process prints before it joins the JAX
    distributed system; a rank whose log lacks it never joined the run.
options:
  _terms:
    description: What to return, one value per term.
    type: list
    elements: str
    required: true
    choices: [error_patterns, ignore_error_patterns, completion_marker, joining_pattern]
  steps:
    description: Number of training steps (at least 1), for V(completion_marker).
    type: int
notes:
  - The mappings keep their order; combine them with P(ansible.builtin.combine#filter) to add patterns
    (added names go last) or to replace one by name (it keeps its place).
seealso:
  - module: cvs.cluster.log_poll
  - plugin: cvs.cluster.maxtext_metrics
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Watch a MaxText run with the default failure signatures plus one of our own
  cvs.cluster.log_poll:
    logs: ["{{ run_dir }}/training.log"]
    error_patterns: "{{ lookup('cvs.cluster.maxtext_defaults', 'error_patterns') | combine(site_patterns) }}"
    ignore_error_patterns: "{{ lookup('cvs.cluster.maxtext_defaults', 'ignore_error_patterns') }}"
    complete:
      pattern: "{{ lookup('cvs.cluster.maxtext_defaults', 'completion_marker', steps=50) }}"
  vars:
    site_patterns: {preempted: 'SIGTERM from scheduler'}
  register: watch
  until: watch.finished
  retries: 100000
  delay: 5

- name: Show the names of the default error patterns
  ansible.builtin.debug:
    msg: "{{ lookup('cvs.cluster.maxtext_defaults', 'error_patterns') | list }}"
"""

RETURN = r"""
_raw:
  description:
    - One entry per term. V(error_patterns) and V(ignore_error_patterns) are mappings of name to regex;
      V(completion_marker) and V(joining_pattern) are regex strings.
  type: list
  elements: raw
  sample:
    - {out_of_memory: "(?i:RESOURCE_EXHAUSTED|\\bout of memory\\b|Failed to allocate request|std::bad_alloc)"}
"""

from typing import Any, List

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.cvs.cluster.plugins.plugin_utils._maxtext.metrics import (
    DEFAULT_ERROR_PATTERNS,
    DEFAULT_IGNORE_ERROR_PATTERNS,
    JOINING_RE,
    completion_marker,
)

_CHOICES = ("error_patterns", "ignore_error_patterns", "completion_marker", "joining_pattern")


class LookupModule(LookupBase):
    def run(self, terms: List[Any], variables: Any = None, **kwargs: Any) -> List[Any]:
        self.set_options(var_options=variables, direct=kwargs)
        results: List[Any] = []
        for term in terms:
            name = str(term).strip()
            if name == "error_patterns":
                results.append(dict(DEFAULT_ERROR_PATTERNS))
            elif name == "ignore_error_patterns":
                results.append(dict(DEFAULT_IGNORE_ERROR_PATTERNS))
            elif name == "joining_pattern":
                results.append(JOINING_RE.pattern)
            elif name == "completion_marker":
                steps = self.get_option("steps")
                if steps is None:
                    raise AnsibleLookupError("cvs.cluster.maxtext_defaults: completion_marker needs steps=<N>")
                try:
                    results.append(completion_marker(steps))
                except ValueError as exc:
                    raise AnsibleLookupError(f"cvs.cluster.maxtext_defaults: {exc}") from exc
            else:
                raise AnsibleLookupError(
                    f"cvs.cluster.maxtext_defaults: unknown term {name!r}; expected one of {', '.join(_CHOICES)}"
                )
        return results
