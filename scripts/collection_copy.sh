# shellcheck shell=bash
# Sourced by sanity.sh, units.sh and controller_line.sh: ansible-test runs only from a path ending in
# ansible_collections/<ns>/<name>.
# The controller line comes from the environment: CVS_VENV (default .venv) and CVS_COLLECTIONS (default
# .cache/collections), paths absolute or relative to the checkout; scripts/controller_line.sh sets them for the
# ansible-core 2.21 line.

# line_venv ROOT / line_collections ROOT: the line's virtualenv and collections path, absolute
line_venv() {
  local dir=${CVS_VENV:-.venv}
  [[ $dir == /* ]] || dir="$1/$dir"
  printf '%s\n' "$dir"
}

line_collections() {
  local dir=${CVS_COLLECTIONS:-.cache/collections}
  [[ $dir == /* ]] || dir="$1/$dir"
  printf '%s\n' "$dir"
}

# collection_copy ROOT WORK copies the tree as git sees it (tracked files and untracked ones git does not ignore)
# to WORK/ansible_collections/cvs/cluster, with the line's community.* beside it, and prints that directory.
collection_copy() {
  local root=$1 work=$2
  local dest="$work/ansible_collections/cvs/cluster"
  mkdir -p "$dest" "$work/ansible_collections/community"
  (cd "$root" && git -c safe.directory='*' ls-files -co --exclude-standard -z |
    xargs -0 cp --parents -P -t "$dest/" 2>/dev/null) || true
  cp -r "$(line_collections "$root")/ansible_collections/community/." "$work/ansible_collections/community/"
  printf '%s\n' "$dest"
}

# line_checkout ROOT WORK: collection_copy, laid out as a checkout of the line: .venv is the line's virtualenv and
# .cache/collections holds this copy and the line's community.*, so whatever finds them by the checkout's paths
# (tests/conftest.py, ansible.cfg, the tests' .venv/bin) gets the line's. The simulated cluster's generated files
# are the checkout's. A git repository, for the tests and tools that list files with git. Prints the copy's path.
line_checkout() {
  local root=$1 work=$2 dest
  dest=$(collection_copy "$root" "$work")
  ln -s "$(line_venv "$root")" "$dest/.venv"
  mkdir -p "$dest/.cache/collections/ansible_collections/cvs"
  ln -s "$work/ansible_collections/community" "$dest/.cache/collections/ansible_collections/community"
  ln -s "$dest" "$dest/.cache/collections/ansible_collections/cvs/cluster"
  if [[ -d $root/tests/cluster/generated ]]; then
    ln -s "$root/tests/cluster/generated" "$dest/tests/cluster/generated"
  fi
  (cd "$dest" && git init -q . && git add -A >/dev/null 2>&1)
  printf '%s\n' "$dest"
}

# The line's Python version, as ansible-test's --python wants it (3.11 on the main line)
venv_python_version() {
  "$(line_venv "$1")/bin/python" -c 'import sys;print(f"{sys.version_info[0]}.{sys.version_info[1]}")'
}
