#!/usr/bin/env bash
# Linters: ruff (Python) and ansible-lint (production profile) over the collection.
set -euo pipefail
cd "$(dirname "$0")/.."
export ANSIBLE_CONFIG="$PWD/ansible.cfg"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
PATH="$PWD/.venv/bin:$PATH" .venv/bin/ansible-lint --profile production --offline -q
