#!/usr/bin/env bash
# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# Stops one job of examples/inference started by launch.sh: signals the process group recorded in
# <dir>/<name>.pgid (SIGTERM, then SIGKILL after <grace> seconds) and nothing else.
#   stop.sh <dir> <name> [grace]
# Exit 0 when nothing of the job is left running, 3 when the recorded group is not this job's, 4 when processes
# survive SIGKILL. The last output line says what happened.
set -u
dir=$1
name=$2
grace=${3:-10}
job="$dir/$name"
pgid=$(cat "$job.pgid" 2>/dev/null)
case $pgid in
'' | *[!0-9]* | 0 | 1)
	echo "$name: not launched (no process group in $job.pgid)"
	exit 0
	;;
esac

# Live (non-zombie) members of the process group.
members() {
	local stat line rest
	for stat in /proc/[0-9]*/stat; do
		{ read -r line <"$stat"; } 2>/dev/null || continue
		rest=${line##*) }
		# shellcheck disable=SC2086
		set -- $rest
		[[ ${3:-} == "$pgid" && ${1:-} != Z ]] || continue
		stat=${stat#/proc/}
		echo "${stat%/stat}"
	done
}

# True when a member carries this job's marker (the group id was not recycled by another program).
ours() {
	local p
	for p in "$@"; do
		tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qxF "CVS_EXAMPLE_JOB=$job" && return 0
	done
	return 1
}

wait_gone() {
	local i
	for ((i = 0; i < $1 * 10; i++)); do
		[[ -z $(members) ]] && return 0
		sleep 0.1
	done
	[[ -z $(members) ]]
}

mapfile -t alive < <(members)
if ((${#alive[@]} == 0)); then
	echo "$name: stopped 0 processes (already ended)"
	exit 0
fi
if ! ours "${alive[@]}"; then
	echo "$name: refused: process group $pgid is not this job's (no CVS_EXAMPLE_JOB=$job)"
	exit 3
fi
kill -TERM -- "-$pgid" 2>/dev/null
if ! wait_gone "$grace"; then
	kill -KILL -- "-$pgid" 2>/dev/null
	if ! wait_gone 10; then
		echo "$name: FAILED: processes of group $pgid survive SIGKILL: $(members | tr '\n' ' ')"
		exit 4
	fi
	echo "$name: stopped ${#alive[@]} processes (SIGKILL after ${grace}s)"
	exit 0
fi
echo "$name: stopped ${#alive[@]} processes (SIGTERM)"
