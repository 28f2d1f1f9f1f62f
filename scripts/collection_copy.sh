# shellcheck shell=bash
# Sourced by sanity.sh and units.sh: ansible-test runs only from a path ending in ansible_collections/<ns>/<name>.
# collection_copy ROOT WORK copies the tree as git sees it (tracked files and untracked ones git does not ignore)
# to WORK/ansible_collections/cvs/cluster, with community.* beside it, and prints that directory.
collection_copy() {
  local root=$1 work=$2
  local dest="$work/ansible_collections/cvs/cluster"
  mkdir -p "$dest" "$work/ansible_collections/community"
  (cd "$root" && git -c safe.directory='*' ls-files -co --exclude-standard -z |
    xargs -0 -I{} cp --parents -P {} "$dest/" 2>/dev/null) || true
  cp -r "$root/.cache/collections/ansible_collections/community/." "$work/ansible_collections/community/"
  printf '%s\n' "$dest"
}

# The controller's Python version, as ansible-test's --python wants it (3.11)
venv_python_version() {
  "$1/.venv/bin/python" -c 'import sys;print(f"{sys.version_info[0]}.{sys.version_info[1]}")'
}
