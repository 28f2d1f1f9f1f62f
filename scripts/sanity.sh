#!/usr/bin/env bash
# ansible-test sanity from a copy of the tracked tree under ansible_collections/cvs/cluster.
# The line: CVS_VENV and CVS_COLLECTIONS (scripts/collection_copy.sh), by default .venv and .cache/collections.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d /var/tmp/cvs-sanity.XXXXXX)
trap 'rm -rf "$work"' EXIT
# shellcheck source=scripts/collection_copy.sh
source "$root/scripts/collection_copy.sh"
venv=$(line_venv "$root")
dest=$(collection_copy "$root" "$work")
# ansible-test downloads a get-pip script from a host outside the package registries: use our shim
pip_version=$(grep -ho "pip='[0-9.]*'" "$venv"/lib/python3*/site-packages/ansible_test/_internal/python_requirements.py | head -1 | tr -dc '0-9.')
shim="$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py"
mkdir -p "$(dirname "$shim")"
cp "$root/scripts/get_pip_shim.py" "$shim"
cd "$dest"
git init -q . && git add -A >/dev/null 2>&1
export PATH="$venv/bin:$PATH"
excludes=()
for d in tests/cluster/ bench/ scripts/ tests/integration/ tests/unit/ tests/support/ examples/; do
  [[ -e $d ]] && excludes+=(--exclude "$d")
done
# SANITY_ARGS: extra ansible-test options, split on spaces on purpose
# shellcheck disable=SC2086
ansible-test sanity --python "$(venv_python_version "$root")" \
  --requirements --color no ${SANITY_ARGS:-} "${excludes[@]}"
