#!/usr/bin/env bash
# make test: unit (pytest, then ansible-test units) -> lint -> sanity -> the integration tests that need no cluster
# (marked local) -> integration (fresh simulated cluster) -> the same on the ansible-core 2.21 line, on a
# selection (core2.21-*), teardown always.
# The cluster comes up in the background while the static phases run (its image build waits on the network and the
# disk, they on the CPU); its output is printed when integration is about to start.
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

up_pid=
ee_pid=
ee_log=
up_log=$(mktemp /var/tmp/cvs-cluster-up.XXXXXX)

# shellcheck disable=SC2317  # run by the EXIT trap
teardown() {
  local start=$SECONDS
  local pid
  for pid in "$up_pid" "$ee_pid"; do
    if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null
      wait "$pid" 2>/dev/null
    fi
  done
  rm -f "$up_log" "$ee_log"
  bash tests/cluster/down.sh || status=1
  summary+=("cluster-down: $((SECONDS - start))s")
  printf '%s\n' "=== summary" "${summary[@]}"
}
trap teardown EXIT
trap 'exit 130' INT TERM

env NODES="${NODES:-3}" bash tests/cluster/up.sh >"$up_log" 2>&1 &
up_pid=$!
up_start=$SECONDS

# The execution environment's image (scripts/ee_build.sh; test_execution_environment.py runs a job in it) is built
# in the background too, once the host dockerd that cluster-up starts answers: it needs no node, and on a cold machine
# it waits mostly on the network and the disk.
ee_log=$(mktemp /var/tmp/cvs-ee-build.XXXXXX)
(
  for _ in $(seq 1 900); do docker info >/dev/null 2>&1 && break; sleep 1; done
  bash scripts/ee_build.sh
) >"$ee_log" 2>&1 &
ee_pid=$!

# shellcheck disable=SC2317  # run by phase
cluster_up() {
  local rc=0
  wait "$up_pid" || rc=$?
  up_pid=
  cat "$up_log"
  echo "cluster-up took $((SECONDS - up_start))s in all (started with the unit phase)"
  return "$rc"
}

phase unit "$PY" -m pytest tests/unit -q -p no:cacheprovider
phase units bash scripts/units.sh
phase lint bash scripts/lint.sh
phase sanity bash scripts/sanity.sh
phase local "$PY" -m pytest tests/integration -m local -q -p no:cacheprovider -rfE \
  --junitxml=.cache/local-junit.xml
phase cluster-up cluster_up
# shellcheck disable=SC2317  # run by phase
ee_built() {
  local rc=0
  wait "$ee_pid" || rc=$?
  ee_pid=
  tail -n 5 "$ee_log"
  return "$rc"
}
phase ee-build ee_built
if [[ $status -eq 0 || -z "${CVS_STOP_ON_FAILURE:-}" ]]; then
  phase integration "$PY" -m pytest tests/integration -m "not local" -q -p no:cacheprovider -rfE --durations=30 \
	--junitxml=.cache/integration-junit.xml
fi

# The second controller line, ansible-core 2.21 on Python 3.13 (scripts/controller_line.sh): the unit tests under
# ansible-test units (the same tests plain pytest runs on the main line), sanity, the callback goldens, and on the
# cluster the main line just used, validate.yml per backend and the ansible-runner/AWX pipeline. Whatever the main line's result (CVS_STOP_ON_FAILURE gates its cluster phase as it
# gates integration); without its setup nothing of it can run, and the summary says so.
line=scripts/controller_line.sh
line_start=$SECONDS
phase core2.21-setup bash "$line" setup
if [[ ${summary[-1]} == "core2.21-setup: ok"* ]]; then
  phase core2.21-units bash "$line" units
  phase core2.21-sanity bash "$line" sanity
  phase core2.21-local bash "$line" local
  if [[ $status -eq 0 || -z "${CVS_STOP_ON_FAILURE:-}" ]]; then
    phase core2.21-integration bash "$line" integration
  fi
else
  summary+=("core2.21-units, -sanity, -local, -integration: NOT RUN (setup failed)")
fi
summary+=("core2.21 line: $((SECONDS - line_start))s in all")
exit $status
