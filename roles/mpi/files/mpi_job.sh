#!/usr/bin/env bash
# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# One mpirun job of cvs.cluster.mpi, in its own process group, on the head node. Every argument comes from the
# role's plan (cvs.cluster.mpi_plan) as its own word; nothing here is evaluated as shell text.
#   mpi_job.sh prepare <dir> <key comment> <hostfile line>...
#     (run by ansible.builtin.script) creates <dir> (0700) with out/, a copy of this script, the hostfile and an
#     ed25519 key of the job's own; prints the public key as the last line.
#   mpi_job.sh launch <dir> <seconds> <grace> mpirun [args...]
#     starts "start" below detached (setsid, nohup) with CVS_MPI_JOB=<dir>, waits up to 10 s for its process
#     group and prints it.
#   mpi_job.sh start <dir> <seconds> <grace> mpirun [args...]
#     records the process group in <dir>/pgid, appends mpirun's output to <dir>/mpirun.log, ends it after
#     <seconds> (SIGTERM, SIGKILL <grace> s later) and writes its exit status to <dir>/exit_code.
#   mpi_job.sh stop <dir> <grace>
#     SIGTERM to that group (mpirun then ends every rank on every node), SIGKILL after <grace> s; only a group
#     whose processes carry CVS_MPI_JOB=<dir>. Exit 0 when nothing is left, 3 when the group is not this job's,
#     4 when processes survive SIGKILL. The line before last says what happened; the last is
#     "exit_code: <mpirun's exit status, empty when it did not exit on its own>".
set -u
mode=$1
dir=$2
case $mode in
prepare)
	comment=$3
	shift 3
	mkdir -p "$dir/out" && chmod 0700 "$dir" || exit 1
	cp -f -- "$0" "$dir/mpi_job.sh" && chmod 0755 "$dir/mpi_job.sh" || exit 1
	printf '%s\n' "$@" >"$dir/hostfile" && chmod 0600 "$dir/hostfile" || exit 1
	if [ ! -e "$dir/id_ed25519" ]; then
		ssh-keygen -q -t ed25519 -N '' -C "$comment" -f "$dir/id_ed25519" || exit 1
	fi
	cat "$dir/id_ed25519.pub"
	exit 0
	;;
launch)
	seconds=$3
	grace=$4
	shift 4
	cd "$dir" || exit 1
	# CVS_MPI_JOB marks the head's side of the job only (stop checks it); mpirun does not send it to the ranks
	CVS_MPI_JOB="$dir" setsid nohup /bin/bash "$dir/mpi_job.sh" start "$dir" "$seconds" "$grace" "$@" \
		</dev/null >/dev/null 2>&1 &
	for _ in $(seq 1 100); do
		[ -s pgid ] && break
		sleep 0.1
	done
	cat pgid
	exit
	;;
start)
	seconds=$3
	grace=$4
	shift 4
	cd "$dir" || exit 1
	read -r _ _ _ _ pgid _ </proc/$$/stat
	echo "$pgid" >pgid.tmp && mv -f pgid.tmp pgid
	exec >>mpirun.log 2>&1 </dev/null
	timeout -k "$grace" "$seconds" "$@"
	rc=$?
	echo "$rc" >exit_code.tmp && mv -f exit_code.tmp exit_code
	exit "$rc"
	;;
stop) grace=${3:-10} ;;
*)
	echo "usage: mpi_job.sh prepare|launch|start|stop <dir> ..." >&2
	exit 2
	;;
esac

# the last line of every stop: mpirun's exit status (empty when it was stopped before it exited)
trap 'echo "exit_code: $(cat "$dir/exit_code" 2>/dev/null)"' EXIT

pgid=$(cat "$dir/pgid" 2>/dev/null)
case $pgid in
'' | *[!0-9]* | 0 | 1)
	echo "mpi job: not launched (no process group in $dir/pgid)"
	exit 0
	;;
esac

# the group's live processes (pgrep -g: by process group; zombies left out)
group() { pgrep -g "$pgid" -r R,S,D,T,I 2>/dev/null; }

stopped_within() {
	local i
	for ((i = 0; i < $1 * 10; i++)); do
		group >/dev/null || return 0
		sleep 0.1
	done
	! group >/dev/null
}

mapfile -t alive < <(group)
if ((${#alive[@]} == 0)); then
	echo "mpi job: stopped 0 processes (already ended)"
	exit 0
fi
owned=0
for p in "${alive[@]}"; do
	if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qxF "CVS_MPI_JOB=$dir"; then
		owned=1
		break
	fi
done
if ((!owned)); then
	echo "mpi job: refused: process group $pgid is not this job's (no CVS_MPI_JOB=$dir)"
	exit 3
fi
kill -TERM -- "-$pgid" 2>/dev/null
if stopped_within "$grace"; then
	echo "mpi job: stopped ${#alive[@]} processes (SIGTERM)"
	exit 0
fi
kill -KILL -- "-$pgid" 2>/dev/null
if ! stopped_within 10; then
	echo "mpi job: FAILED: processes of group $pgid survive SIGKILL: $(group | tr '\n' ' ')"
	exit 4
fi
echo "mpi job: stopped ${#alive[@]} processes (SIGKILL after ${grace}s)"
