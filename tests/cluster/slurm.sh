#!/usr/bin/env bash
# shellcheck disable=SC2154 # BIN_* are set by require_bins (lib.sh)
# Slurm on the simulated cluster (Debian's Slurm 22.05 packages; scripts/system-deps.sh installs them).
#
#   slurm.sh start    munged on the host, slurmctld in the head node (node1), one slurmd per
#                     node on the node's own address; returns once every node is idle
#   slurm.sh stop     cancel every job, then stop exactly what start started
#   slurm.sh status   one line per daemon; exit 1 unless all run
#
# State, configuration and logs live in /run/cvs-sim/slurm (slurm.conf there; every node's SSH
# sessions and `ctl.sh exec` get SLURM_CONF pointing at it). Needs a running cluster (up.sh).
set -Eeuo pipefail

PROG=cluster-slurm
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"


CTLD_PORT=6817
SLURMD_PORT=6818
MUNGE_SOCKET=$SLURM_DIR/munge/munge.socket

usage() {
	sed -n '3,11s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
	exit 2
}

slurm_nodes() {
	local n
	for n in $(recorded_nodes); do
		node_init_pid "$n" >/dev/null && printf '%s\n' "$n"
	done
	return 0
}

start_munge() {
	local i
	[[ -n $(slurm_munged_pid) ]] && return 0
	install -d -m 0700 "$SLURM_DIR/munge/etc"
	# munged wants its socket directory world-readable and its key private
	chmod 0755 "$SLURM_DIR/munge"
	if [[ ! -s $SLURM_DIR/munge/etc/munge.key ]]; then
		head -c 1024 /dev/urandom >"$SLURM_DIR/munge/etc/munge.key"
		chmod 0600 "$SLURM_DIR/munge/etc/munge.key"
	fi
	"$BIN_munged" --socket="$MUNGE_SOCKET" --key-file="$SLURM_DIR/munge/etc/munge.key" \
		--pid-file="$MUNGE_PID" --log-file="$SLURM_DIR/log/munged.log" \
		--seed-file="$SLURM_DIR/munge/etc/munge.seed" </dev/null >>"$SLURM_DIR/log/start.log" 2>&1 9>&- ||
		die "munged did not start (log: $SLURM_DIR/log/munged.log)"
	for ((i = 0; i < 50; i++)); do
		[[ -S $MUNGE_SOCKET ]] && return 0
		sleep 0.1
	done
	die "munged did not open $MUNGE_SOCKET"
}

write_conf() {
	local nodes=("$@") n cpus mem head_ip
	cpus=$(nproc)
	if ! node_load "${nodes[0]}" || [[ -z $N_IP ]]; then die "${nodes[0]}: no address recorded"; fi
	head_ip=$N_IP
	mem=$(($(awk '/^MemTotal:/ { print int($2 / 1024) }' /proc/meminfo) / ${#nodes[@]} / 2))
	{
		cat <<-EOF
			# Written by tests/cluster/slurm.sh for the simulated cluster; rewritten on every start.
			ClusterName=cvs-sim
			SlurmctldHost=${nodes[0]}($head_ip)
			SlurmctldPort=$CTLD_PORT
			SlurmdPort=$SLURMD_PORT
			SlurmUser=root
			SlurmdUser=root
			AuthType=auth/munge
			AuthInfo=socket=$MUNGE_SOCKET
			CredType=cred/munge
			StateSaveLocation=$SLURM_DIR/state
			SlurmdSpoolDir=$SLURM_DIR/spool/%n
			SlurmctldPidFile=$SLURM_DIR/run/slurmctld.pid
			SlurmdPidFile=$SLURM_DIR/run/slurmd-%n.pid
			SlurmctldLogFile=$SLURM_DIR/log/slurmctld.log
			SlurmdLogFile=$SLURM_DIR/log/slurmd-%n.log
			ProctrackType=proctrack/linuxproc
			TaskPlugin=task/none
			JobAcctGatherType=jobacct_gather/none
			AccountingStorageType=accounting_storage/none
			JobCompType=jobcomp/none
			SchedulerType=sched/backfill
			SelectType=select/cons_tres
			SelectTypeParameters=CR_Core
			MpiDefault=none
			ReturnToService=2
			SlurmctldTimeout=30
			SlurmdTimeout=30
			InactiveLimit=0
			KillWait=5
			MinJobAge=30
			MailProg=/bin/true
		EOF
		for n in "${nodes[@]}"; do
			if ! node_load "$n" || [[ -z $N_IP ]]; then die "$n: no address recorded"; fi
			printf 'NodeName=%s NodeHostname=%s NodeAddr=%s CPUs=%s RealMemory=%s State=UNKNOWN\n' \
				"$n" "$n" "$N_IP" "$cpus" "$mem"
		done
		printf 'PartitionName=%s Nodes=%s Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES\n' \
			"$SLURM_PARTITION" "$(
				IFS=,
				echo "${nodes[*]}"
			)"
	} >"$SLURM_CONF.tmp"
	mv -f "$SLURM_CONF.tmp" "$SLURM_CONF"
}

# slurmctld/slurmd run in the node's namespaces and daemonize; their host PIDs come from the node's process list.
daemon_pid() { first_line node_comm_pids "$1" "$2" top; }

start_daemons() {
	local nodes=("$@") n head=$1
	if [[ -z $(daemon_pid "$head" slurmctld) ]]; then
		nsrun "$head" env SLURM_CONF="$SLURM_CONF" "$BIN_slurmctld" -f "$SLURM_CONF" \
			</dev/null >>"$SLURM_DIR/log/start.log" 2>&1 9>&- || die "slurmctld did not start (log: $SLURM_DIR/log/slurmctld.log)"
	fi
	for n in "${nodes[@]}"; do
		mkdir -p "$SLURM_DIR/spool/$n"
		[[ -n $(daemon_pid "$n" slurmd) ]] && continue
		nsrun "$n" env SLURM_CONF="$SLURM_CONF" "$BIN_slurmd" -N "$n" -f "$SLURM_CONF" \
			</dev/null >>"$SLURM_DIR/log/start.log" 2>&1 9>&- || die "$n: slurmd did not start (log: $SLURM_DIR/log/slurmd-$n.log)"
	done
}

wait_idle() {
	local want=$1 i out
	for ((i = 0; i < 300; i++)); do
		out=$(SLURM_CONF=$SLURM_CONF timeout 5 sinfo -h -N -p "$SLURM_PARTITION" -o '%N %t' 2>/dev/null || true)
		if (($(grep -c ' idle$' <<<"$out" || true) == want)); then
			return 0
		fi
		sleep 0.2
	done
	die "Slurm nodes not idle after 60 s: $(tr '\n' ';' <<<"$out") (logs: $SLURM_DIR/log)"
}

cmd=${1:-}
[[ -n $cmd ]] || usage
require_root
case $cmd in
start)
	require_bins munged slurmctld slurmd sinfo scancel nsenter
	take_lock 600
	mapfile -t nodes < <(slurm_nodes)
	((${#nodes[@]} > 0)) || die "no running node (run tests/cluster/up.sh first)"
	mkdir -p "$SLURM_DIR"/{state,spool,log,run,munge}
	start_munge
	write_conf "${nodes[@]}"
	start_daemons "${nodes[@]}"
	wait_idle "${#nodes[@]}"
	say "Slurm is up: slurmctld on ${nodes[0]}, slurmd on ${nodes[*]}, partition $SLURM_PARTITION (SLURM_CONF=$SLURM_CONF)"
	;;
stop)
	take_lock 600
	slurm_stop
	say "Slurm is down"
	;;
status)
	bad=0
	m=$(slurm_munged_pid)
	printf 'munged\t%s\n' "${m:-down}"
	[[ -n $m ]] || bad=1
	first=1
	for n in $(slurm_nodes); do
		if ((first)); then
			c=$(daemon_pid "$n" slurmctld)
			printf '%s\tslurmctld %s\n' "$n" "${c:-down}"
			[[ -n $c ]] || bad=1
			first=0
		fi
		d=$(daemon_pid "$n" slurmd)
		printf '%s\tslurmd %s\n' "$n" "${d:-down}"
		[[ -n $d ]] || bad=1
	done
	exit "$bad"
	;;
-h | --help | help) usage ;;
*) die "unknown command '$cmd' (start, stop, status)" ;;
esac
