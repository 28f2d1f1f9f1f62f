#!/usr/bin/env bash
# Linters: ruff (Python) and ansible-lint (production profile) over the collection.
set -euo pipefail
cd "$(dirname "$0")/.."
export ANSIBLE_CONFIG="$PWD/ansible.cfg"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
PATH="$PWD/.venv/bin:$PATH" .venv/bin/ansible-lint --profile production --offline -q
# Changelog: fragments valid, and CHANGELOG.rst is what antsibull-changelog generates from changelogs/
.venv/bin/antsibull-changelog lint
generated=$(mktemp /var/tmp/cvs-changelog.XXXXXX.rst)
trap 'rm -f "$generated"' EXIT
.venv/bin/antsibull-changelog generate --output "$generated"
diff -u CHANGELOG.rst "$generated" || { echo "CHANGELOG.rst is stale: run .venv/bin/antsibull-changelog generate" >&2; exit 1; }
