#!/usr/bin/env bash
# Tear down the simulated cluster: exactly what up.sh recorded under
# /run/cvs-sim (PID files and markers), nothing found by name. Safe to run
# with nothing up. Keeps the image cache (/var/lib/cvs-sim/cache, node
# engines' data-roots, images in the host engine) and the generated key and
# inventories; removes generated/cluster.json.
#
#   tests/cluster/down.sh            # everything
#   tests/cluster/down.sh --purge    # also the node engines' data-roots
set -Eeuo pipefail

PROG=cluster-down
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PURGE=0
case ${1:-} in
'') ;;
--purge) PURGE=1 ;;
-h | --help)
	sed -n '2,10s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
	exit 0
	;;
*) die "unknown argument '$1' (usage: down.sh [--purge])" ;;
esac

on_err() {
	local rc=$?
	[[ $BASHPID == "$$" ]] && printf '%s: failed at line %s (exit %d)\n' "$PROG" "$1" "$rc" >&2
	exit "$rc"
}
trap 'on_err $LINENO' ERR

require_root
require_bins ip iptables nsenter docker ss flock
take_lock 900

T0=$SECONDS
had_state=0
[[ -d $STATE_DIR ]] && had_state=1

if [[ -d $SLURM_DIR ]]; then
	say "stopping Slurm (tests/cluster/slurm.sh)"
	slurm_stop
fi

for name in $(recorded_nodes); do
	say "stopping $name"
	node_teardown "$name"
done
if ((PURGE)); then
	# Every node's data-root, also of nodes an earlier up.sh removed.
	for d in "$VAR_DIR"/node[0-9]*; do
		[[ -d $d ]] || continue
		say "purging $d"
		rm -rf "$d"
	done
fi

if [[ -f $STATE_DIR/iptables.rule ]]; then
	if iptables -w -C FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT 2>/dev/null; then
		iptables -w -D FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT
	fi
	rm -f "$STATE_DIR/iptables.rule"
fi

if [[ -f $STATE_DIR/bridge.created ]]; then
	if ip link show "$BRIDGE" >/dev/null 2>&1; then
		ip link del "$BRIDGE"
	fi
	rm -f "$STATE_DIR/bridge.created"
fi

remove_mountpoints

if [[ -f $STATE_DIR/host-dockerd.pid ]]; then
	pid=$(read_pid "$STATE_DIR/host-dockerd.pid" || true)
	if [[ -n $pid ]] && pid_alive "$pid" && [[ $(proc_comm "$pid") == dockerd ]]; then
		say "stopping the host dockerd (pid $pid) that up.sh started"
		kids=$(pgrep -P "$pid" || true)
		# shellcheck disable=SC2086
		kill_wait 30 "$pid" $kids
	fi
	if mountpoint -q /var/run/docker/netns/default 2>/dev/null; then
		umount /var/run/docker/netns/default 2>/dev/null || true
	fi
	rm -f "$STATE_DIR/host-dockerd.pid"
fi

if [[ -f $STATE_DIR/sshd-privsep.created ]]; then
	rmdir /run/sshd 2>/dev/null || true
	rm -f "$STATE_DIR/sshd-privsep.created"
fi

rm -f "$GEN_DIR/cluster.json"
if [[ -d $STATE_DIR ]]; then
	rm -f "$STATE_DIR/subnet" "$STATE_DIR/hosts"
	rmdir "$STATE_DIR" 2>/dev/null || warn "$STATE_DIR not empty after teardown: $(find "$STATE_DIR" -mindepth 1 -maxdepth 1 -printf '%f ')"
fi

if ((had_state)); then
	say "cluster is down ($((SECONDS - T0)) s)"
else
	say "nothing to do: no cluster recorded under $STATE_DIR"
fi
