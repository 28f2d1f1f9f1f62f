#!/usr/bin/env bash
# ansible-test units from a copy of the tracked tree under ansible_collections/cvs/cluster, with this checkout's
# venv (the unit tests need its packages and tools: ansible-playbook, ansible-galaxy, xmlschema, pexpect ...).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d /var/tmp/cvs-units.XXXXXX)
trap 'rm -rf "$work"' EXIT
dest="$work/ansible_collections/cvs/cluster"
mkdir -p "$dest"
git -c safe.directory='*' ls-files -co --exclude-standard -z | xargs -0 -I{} cp --parents -P {} "$dest/" 2>/dev/null || true
mkdir -p "$work/ansible_collections/community"
cp -r "$root/.cache/collections/ansible_collections/community/." "$work/ansible_collections/community/"
ln -s "$root/.venv" "$dest/.venv"
# tests/conftest.py puts .cache/collections first on sys.path: there, cvs.cluster is this copy
mkdir -p "$dest/.cache/collections/ansible_collections/cvs"
ln -s "$work/ansible_collections/community" "$dest/.cache/collections/ansible_collections/community"
ln -s "$dest" "$dest/.cache/collections/ansible_collections/cvs/cluster"
cd "$dest"
git init -q . && git add -A >/dev/null 2>&1
export PATH="$root/.venv/bin:$PATH"
ansible-test units --local --color no \
  --python "$("$root/.venv/bin/python" -c 'import sys;print(f"{sys.version_info[0]}.{sys.version_info[1]}")')" ${UNITS_ARGS:-}
