#!/usr/bin/env bash
# ansible-test units from a copy of the tracked tree under ansible_collections/cvs/cluster, with the controller
# line's venv (the unit tests need its packages and tools: ansible-playbook, ansible-galaxy, xmlschema, pexpect ...).
# The line: CVS_VENV and CVS_COLLECTIONS (scripts/collection_copy.sh), by default .venv and .cache/collections.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d /var/tmp/cvs-units.XXXXXX)
trap 'rm -rf "$work"' EXIT
# shellcheck source=scripts/collection_copy.sh
source "$root/scripts/collection_copy.sh"
# tests/conftest.py puts .cache/collections first on sys.path: there, cvs.cluster is this copy
dest=$(line_checkout "$root" "$work")
cd "$dest"
venv=$(line_venv "$root")
export PATH="$venv/bin:$PATH" ANSIBLE_CONFIG="$dest/ansible.cfg"
# UNITS_ARGS: extra ansible-test options, split on spaces on purpose
# shellcheck disable=SC2086
ansible-test units --local --color no \
  --python "$(venv_python_version "$root")" ${UNITS_ARGS:-}
