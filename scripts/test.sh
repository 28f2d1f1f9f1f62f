#!/usr/bin/env bash
# make test: unit (pytest, then ansible-test units) -> lint -> sanity -> integration (fresh simulated cluster), teardown always.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
PY=.venv/bin/python
export ANSIBLE_CONFIG="$PWD/ansible.cfg"
status=0
declare -a summary=()

phase() {
  local name=$1; shift
  local start=$SECONDS
  echo "=== [$name] $*"
  if "$@"; then
    summary+=("$name: ok ($((SECONDS - start))s)")
  else
    summary+=("$name: FAILED ($((SECONDS - start))s)")
    status=1
  fi
}

# shellcheck disable=SC2317  # run by the EXIT trap
teardown() {
  local start=$SECONDS
  bash tests/cluster/down.sh || status=1
  summary+=("cluster-down: $((SECONDS - start))s")
  printf '%s\n' "=== summary" "${summary[@]}"
}
trap teardown EXIT
trap 'exit 130' INT TERM

phase unit "$PY" -m pytest tests/unit -q -p no:cacheprovider
phase units bash scripts/units.sh
phase lint bash scripts/lint.sh
phase sanity bash scripts/sanity.sh
phase cluster-up env NODES="${NODES:-3}" bash tests/cluster/up.sh
if [[ $status -eq 0 || -z "${CVS_STOP_ON_FAILURE:-}" ]]; then
  phase integration "$PY" -m pytest tests/integration -q -p no:cacheprovider -rfE --durations=30
fi
exit $status
