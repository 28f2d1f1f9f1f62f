# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The command line that finishes an interrupted run: dispose of what it started and write its final report."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import PurePath

# plays of validate.yml that run checks or write reports; everything else there is tagged always (prepare, dispose)
CHECK_AND_REPORT_TAGS = ("facts", "maxtext", "report", "rvs")
# options that make no sense when finishing: they would skip or pause the dispose and report plays
_DROPPED_WITH_VALUE = ("--start-at-task",)
_DROPPED_FLAGS = ("--step", "--syntax-check", "--list-tasks", "--list-hosts", "--list-tags")


def is_validate_playbook(playbook: str) -> bool:
    """True for the collection's validate playbook, by path or by its collection name."""
    return playbook == "cvs.cluster.validate" or PurePath(playbook).name == "validate.yml"


def finish_argv(
    argv: Sequence[str],
    playbooks: Sequence[str],
    run_id: str,
    validate_playbook: str,
) -> list[str]:
    """ansible-playbook arguments that finish run ``run_id``, from the arguments of the interrupted command.

    ``argv`` is the interrupted command without the program name; ``playbooks`` are its positional playbook
    arguments. Inventory, limit, extra vars, connection and vault options are kept. The playbooks are replaced by
    ``validate_playbook`` with ``cvs_finish_run``; when the interrupted playbook was not validate.yml its check and
    report plays are skipped, so only dispose runs.
    """
    if not run_id:
        raise ValueError("no run id to finish")
    args = list(argv)
    for playbook in playbooks:  # the last occurrence: an option value may equal a playbook's name
        last = len(args) - 1 - args[::-1].index(playbook) if playbook in args else -1
        if last >= 0:
            del args[last]
    kept: list[str] = []
    skip_next = False
    for arg in args:
        if skip_next:
            skip_next = False
            continue
        if arg in _DROPPED_FLAGS or any(arg.startswith(opt + "=") for opt in _DROPPED_WITH_VALUE):
            continue
        if arg in _DROPPED_WITH_VALUE:
            skip_next = True
            continue
        kept.append(arg)
    kept += [validate_playbook, "-e", json.dumps({"cvs_finish_run": run_id})]
    if not all(is_validate_playbook(p) for p in playbooks):
        kept += ["--skip-tags", ",".join(CHECK_AND_REPORT_TAGS)]
    return kept
