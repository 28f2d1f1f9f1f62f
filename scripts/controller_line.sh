#!/usr/bin/env bash
# The second controller line: what today's Ansible users run, the `ansible` 14 bundle (ansible-core 2.21 and its
# community.docker) on Python 3.13, next to the main line (.venv: ansible-core 2.19, Python 3.11).
#
#   controller_line.sh setup           .cache/venv-core2.21 (requirements-core2.21.txt pinned by
#                                      constraints-core2.21.txt) and .cache/collections-core2.21 (the bundle's
#                                      community.docker), idempotently: each has a .installed stamp
#   controller_line.sh unit            the unit tests under plain pytest (pytest-xdist: -n auto)
#   controller_line.sh units|sanity    scripts/units.sh or sanity.sh on the line (CVS_VENV, CVS_COLLECTIONS)
#   controller_line.sh local           the integration tests that need no cluster (the callback goldens)
#   controller_line.sh integration     on the running simulated cluster: validate.yml per backend (baremetal,
#                                      container, slurm) and the ansible-runner/AWX pipeline
#   controller_line.sh pytest ARGS...  pytest with the line's Python, in a copy of the checkout whose .venv and
#                                      .cache/collections are the line's (scripts/collection_copy.sh line_checkout):
#                                      the tests find ansible-playbook, ansible-runner and the collections by the
#                                      checkout's paths, so they run unchanged; the simulated cluster is the
#                                      checkout's (tests/cluster/generated)
#
# Every command runs setup first. The Python: CVS_LINE_PYTHON, else python3.13 on PATH, else pyenv's 3.13.
# local and integration write JUnit files to .cache/core2.21-<command>-junit.xml.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

PYTHON_VERSION=3.13
# the ansible release whose community.docker this line uses; its ansible-core is the one constraints-core2.21.txt pins
BUNDLE=ansible==14.5.0
REQUIREMENTS=requirements-core2.21.txt
CONSTRAINTS=constraints-core2.21.txt
# under .cache/, which git, ruff, ansible-lint and galaxy.yml's build_ignore already leave out (a .venv-* beside
# .venv would end up in the collection tarball)
export CVS_VENV=.cache/venv-core2.21 CVS_COLLECTIONS=.cache/collections-core2.21
VENV="$root/$CVS_VENV"

# shellcheck source=scripts/collection_copy.sh
source "$root/scripts/collection_copy.sh"

is_wanted_python() {
  [[ -n $1 && -x $1 ]] && "$1" -c "import sys; sys.exit('%d.%d' % sys.version_info[:2] != '$PYTHON_VERSION')" 2>/dev/null
}

# The first working Python 3.13: a pyenv shim on PATH may exist and still refuse to run, so each one is tried
find_python() {
  local pyenv_root=${PYENV_ROOT:-$HOME/.pyenv} candidate
  local -a candidates=("${CVS_LINE_PYTHON:-}" "$(command -v "python$PYTHON_VERSION" || true)")
  mapfile -t -O "${#candidates[@]}" candidates < <(
    compgen -G "$pyenv_root/versions/$PYTHON_VERSION*/bin/python" | sort -rV || true)
  for candidate in "${candidates[@]}"; do
    if is_wanted_python "$candidate"; then
      printf '%s\n' "$candidate"
      return 0
    fi
  done
  local why="no working python$PYTHON_VERSION on PATH, nothing at $pyenv_root/versions/$PYTHON_VERSION*/bin/python"
  [[ -z ${CVS_LINE_PYTHON:-} ]] || why+=", and CVS_LINE_PYTHON=$CVS_LINE_PYTHON is not Python $PYTHON_VERSION"
  echo "controller_line.sh: the ansible-core 2.21 line needs Python $PYTHON_VERSION and found none: $why." \
    "Install it (pyenv install $PYTHON_VERSION, or the distribution's python$PYTHON_VERSION-venv) or point" \
    "CVS_LINE_PYTHON at one." >&2
  return 1
}

setup() {
  local python stamp digest
  if ! is_wanted_python "$VENV/bin/python"; then
    python=$(find_python)
    rm -rf "$VENV"
    "$python" -m venv "$VENV"
  fi
  stamp="$VENV/.installed"
  digest=$(cat "$REQUIREMENTS" "$CONSTRAINTS" | sha256sum | cut -d' ' -f1)
  if [[ ! -f $stamp || $(<"$stamp") != "$digest" ]]; then
    "$VENV/bin/pip" install -q --disable-pip-version-check -r "$REQUIREMENTS" -c "$CONSTRAINTS"
    printf '%s\n' "$digest" >"$stamp"
  fi
  "$VENV/bin/python" scripts/install_collections.py --dest "$CVS_COLLECTIONS" --bundle "$BUNDLE"
}

line_pytest() {
  local work dest
  work=$(mktemp -d /var/tmp/cvs-core2.21.XXXXXX)
  # shellcheck disable=SC2064  # expand now: $work is local
  trap "rm -rf '$work'" EXIT
  dest=$(line_checkout "$root" "$work")
  cd "$dest"
  ANSIBLE_CONFIG="$dest/ansible.cfg" PATH="$VENV/bin:$PATH" "$VENV/bin/python" -m pytest -p no:cacheprovider "$@"
}

command=${1:-}
shift || true
junit="--junitxml=$root/.cache/core2.21-$command-junit.xml"
case $command in
  setup) setup ;;
  unit) setup; line_pytest -q -rfE -n auto tests/unit ;;
  units | sanity) setup; bash "scripts/$command.sh" ;;
  local) setup; line_pytest -q -rfE -m local tests/integration "$junit" ;;
  integration)
    # both backends of test_validate.py: on baremetal the workload hosts are the nodes, whose facts ansible-core
    # 2.21.0-2.21.5 shared among them after a run_once set_fact unless validate.yml's facts play clears them first
    setup; line_pytest -q -rfE --durations=10 "$junit" \
      tests/integration/test_validate.py::test_validate_prints_one_row_per_node_and_disposes \
      "tests/integration/test_slurm.py::test_validate_on_slurm_runs_rvs_and_real_maxtext_as_steps_of_one_job" \
      tests/integration/test_awx_runner.py
    ;;
  pytest) setup; line_pytest "$@" ;;
  *)
    echo "usage: $0 setup | unit | units | sanity | local | integration | pytest ARGS..." >&2
    exit 2
    ;;
esac
