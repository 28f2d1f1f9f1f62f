#!/usr/bin/env bash
# ansible-test units from a copy of the tracked tree under ansible_collections/cvs/cluster, with this checkout's
# venv (the unit tests need its packages and tools: ansible-playbook, ansible-galaxy, xmlschema, pexpect ...).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d /var/tmp/cvs-units.XXXXXX)
trap 'rm -rf "$work"' EXIT
# shellcheck source=scripts/collection_copy.sh
source "$root/scripts/collection_copy.sh"
dest=$(collection_copy "$root" "$work")
ln -s "$root/.venv" "$dest/.venv"
# tests/conftest.py puts .cache/collections first on sys.path: there, cvs.cluster is this copy
mkdir -p "$dest/.cache/collections/ansible_collections/cvs"
ln -s "$work/ansible_collections/community" "$dest/.cache/collections/ansible_collections/community"
ln -s "$dest" "$dest/.cache/collections/ansible_collections/cvs/cluster"
cd "$dest"
git init -q . && git add -A >/dev/null 2>&1
export PATH="$root/.venv/bin:$PATH"
# UNITS_ARGS: extra ansible-test options, split on spaces on purpose
# shellcheck disable=SC2086
ansible-test units --local --color no \
  --python "$(venv_python_version "$root")" ${UNITS_ARGS:-}
