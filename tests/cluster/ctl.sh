#!/usr/bin/env bash
# Control pieces of a running simulated cluster (used by integration tests).
#
#   ctl.sh sshd-stop <node>      kill every sshd of the node (listener and
#                                connections, so ControlMaster sockets die)
#   ctl.sh sshd-start <node>     start the node's sshd again (no-op if running)
#   ctl.sh engine-stop <node>    stop the node's dockerd (its containers stop)
#   ctl.sh engine-start <node>   start the node's dockerd again
#   ctl.sh exec <node> <cmd...>  run a command inside the node (net, mount,
#                                uts, ipc and pid namespaces; DOCKER_HOST and
#                                SLURM_CONF set)
#   ctl.sh status [<node>]       one line per node: sshd / engine state
#   ctl.sh ssh <node> [<cmd...>] ssh into the node as root with the harness key
#
# <node> is node1, 1 or cvsn1. Exit status of exec/ssh is the command's.
set -Eeuo pipefail

PROG=cluster-ctl
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
	sed -n '2,16s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
	exit 2
}

# Sets NAME; dies unless the node is recorded and its init runs.
pick_node() {
	[[ $# -ge 1 && -n $1 ]] || usage
	NAME=$(normalize_node "$1") || die "bad node name '$1' (expected node<k>, <k> or cvsn<k>)"
	node_load "$NAME" || die "$NAME is not part of the simulated cluster (run tests/cluster/up.sh)"
	node_init_pid "$NAME" >/dev/null || die "$NAME is not running (run tests/cluster/up.sh)"
}

(($# >= 1)) || usage
cmd=$1
shift
require_root

case $cmd in
sshd-stop)
	pick_node "$@"
	take_lock 600
	node_stop_sshd "$NAME"
	[[ -z $(node_comm_pids "$NAME" sshd) ]] || die "$NAME: sshd processes survived"
	say "$NAME: sshd stopped"
	;;
sshd-start)
	pick_node "$@"
	require_bins sshd ssh-keygen ss nsenter
	take_lock 600
	rc=0
	node_start_sshd "$NAME" || rc=$?
	((rc != 2)) || die "$NAME: port ${N_SSH_PORT:-22} is already in use"
	((rc == 0)) || die "$NAME: sshd did not start (log: $(node_var "$NAME")/sshd.log)"
	say "$NAME: sshd running (pid $(node_sshd_pid "$NAME"))"
	;;
engine-stop)
	pick_node "$@"
	take_lock 600
	node_stop_engine "$NAME"
	say "$NAME: dockerd stopped"
	;;
engine-start)
	pick_node "$@"
	require_bins dockerd docker nsenter setsid
	take_lock 600
	node_start_engine "$NAME" || die "$NAME: dockerd did not come up (log: $(node_var "$NAME")/dockerd.log)"
	say "$NAME: dockerd running (pid $(node_dockerd_pid "$NAME"))"
	;;
exec)
	pick_node "$@"
	shift
	(($# >= 1)) || usage
	init=$(node_init_pid "$NAME")
	exec nsenter -t "$init" -n -m -u -i -p -- \
		env HOME=/root DOCKER_HOST="unix://$(node_sock "$NAME")" SLURM_CONF="$SLURM_CONF" "$@"
	;;
ssh)
	pick_node "$@"
	shift
	exec ssh -F "$GEN_DIR/ssh_config" "$NAME" "$@"
	;;
status)
	if (($# >= 1)); then
		names=$(normalize_node "$1") || die "bad node name '$1'"
	else
		names=$(recorded_nodes)
	fi
	[[ -n $names ]] || {
		say "no cluster recorded under $STATE_DIR"
		exit 1
	}
	bad=0
	for n in $names; do
		if ! node_load "$n" || ! node_init_pid "$n" >/dev/null; then
			printf '%s\tdown\n' "$n"
			bad=1
			continue
		fi
		s=$(node_sshd_pid "$n")
		d=$(node_dockerd_pid "$n")
		e=down
		[[ -n $d ]] && docker_ok "$(node_sock "$n")" && e="up (pid $d)"
		sshd=down
		[[ -n $s ]] && sshd="up (pid $s)"
		printf '%s\t%s\tsshd %s\tdockerd %s\n' "$n" "$N_IP" "$sshd" "$e"
		[[ -n $s && $e != down ]] || bad=1
	done
	exit "$bad"
	;;
-h | --help | help) usage ;;
*) die "unknown command '$cmd' (sshd-stop, sshd-start, engine-stop, engine-start, exec, status, ssh)" ;;
esac
