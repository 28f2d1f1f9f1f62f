# shellcheck shell=bash
# Constants and BIN_* are used by the sourcing scripts.
# shellcheck disable=SC2034,SC2154
# Shared helpers of the simulated cluster: sourced by up.sh, down.sh and ctl.sh.
#
# Layout (see tests/cluster/README.md):
#   /run/cvs-sim/                 state: what up.sh created, PID files, configs
#   /run/cvs-sim/<node>/          node.env, sshd_config, host key, PID files,
#                                 docker.sock, exec/ (dockerd exec-root)
#   /var/lib/cvs-sim/<node>/      dockerd data-root (docker/), engine key, logs
#   /var/lib/cvs-sim/cache/       base root-filesystem tarballs (kept by down.sh)
#   tests/cluster/generated/      key pair, cluster.json, inventories (git-ignored)
#
# PID files named *.pid hold host-namespace PIDs written by the harness; the
# daemons' own PID files (*.ns.pid) hold PIDs as seen inside the node.

CVS_SIM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO_ROOT=$(cd "$CVS_SIM_DIR/../.." && pwd -P)
STATE_DIR=/run/cvs-sim
VAR_DIR=/var/lib/cvs-sim
CACHE_DIR=$VAR_DIR/cache
LOG_DIR=$VAR_DIR/logs
GEN_DIR=$CVS_SIM_DIR/generated
IMAGE_DIR=$CVS_SIM_DIR/image
STANDINS_DIR=$IMAGE_DIR/stand-ins
LOCK_FILE=/run/lock/cvs-sim.lock
BRIDGE=br-cvs
NODE_IMAGE=cvs-sim-node:latest
# the node image plus real MaxText (tests/cluster/maxtext); node engines get both, podman the node image only
MAXTEXT_IMAGE=cvs-sim-maxtext:latest
MAXTEXT_SRC_DIR=$CVS_SIM_DIR/maxtext
MAXTEXT_SUITE=trixie
# the runtime on the host, bind-mounted read-only on /opt/cvs-maxtext in every node (the image carries a copy)
MAXTEXT_RUNTIME=$VAR_DIR/maxtext-runtime
IMAGE_LABEL=org.cvs-sim.input-hash
SUITE=bookworm
HOST_DOCKER_SOCK=/var/run/docker.sock
# the simulated Slurm (tests/cluster/slurm.sh): its state, and the configuration every node's sessions name
SLURM_DIR=$STATE_DIR/slurm
SLURM_CONF=$SLURM_DIR/slurm.conf
PROG=${PROG:-cluster}

# ---------------------------------------------------------------- messages

say() { printf '%s: %s\n' "$PROG" "$*"; }
warn() { printf '%s: warning: %s\n' "$PROG" "$*" >&2; }
# One line on stderr, then exit 1 (up.sh's EXIT trap rolls back).
die() {
	printf '%s: %s\n' "$PROG" "$*" >&2
	CVS_SIM_DIED=1
	exit 1
}

require_root() {
	[[ $(id -u) -eq 0 ]] || die "must run as root (creates network namespaces, bridges and daemons)"
}

# Resolve required binaries to absolute paths (sets BIN_<name>); one line
# naming every missing binary.
require_bins() {
	local b v missing=()
	for b in "$@"; do
		v=$(command -v "$b" 2>/dev/null || true)
		if [[ -z $v || $v != /* ]]; then
			missing+=("$b")
			continue
		fi
		printf -v "BIN_${b//[^A-Za-z0-9]/_}" '%s' "$v"
	done
	((${#missing[@]} == 0)) || die "required binary not found in PATH: ${missing[*]} (run scripts/system-deps.sh)"
}

# Serialise up/down/ctl start-stop across processes. Children must not
# inherit fd 9: every daemon is started with 9>&-.
take_lock() {
	mkdir -p "${LOCK_FILE%/*}"
	exec 9>"$LOCK_FILE"
	flock -w "${1:-900}" 9 || die "timed out waiting for $LOCK_FILE (another up/down/ctl is running)"
}

# ---------------------------------------------------------------- node naming

node_name() { printf 'node%d' "$1"; }
node_ns() { printf 'cvsn%d' "$1"; }
node_veth() { printf 'vcvs%d' "$1"; }
node_ip() { printf '%s.%d' "$SUBNET" "$((10 + $1))"; }
node_dir() { printf '%s/%s' "$STATE_DIR" "$1"; }
node_var() { printf '%s/%s' "$VAR_DIR" "$1"; }
node_sock() { printf '%s/%s/docker.sock' "$STATE_DIR" "$1"; }

# Accepts node1, 1 or cvsn1; prints node<k>.
normalize_node() {
	local n=$1
	case $n in
	node[0-9]*) ;;
	cvsn[0-9]*) n=node${n#cvsn} ;;
	[0-9]*) n=node$n ;;
	*) return 1 ;;
	esac
	[[ $n =~ ^node[0-9]+$ ]] || return 1
	printf '%s' "$n"
}

# Recorded nodes, sorted by index (names).
recorded_nodes() {
	local d
	for d in "$STATE_DIR"/node*/node.env; do
		[[ -f $d ]] || continue
		d=${d%/node.env}
		printf '%s\n' "${d##*/}"
	done | sort -V
}

# Load node.env of $1 into N_* variables.
node_load() {
	local f key val
	f=$(node_dir "$1")/node.env
	[[ -f $f ]] || return 1
	N_NAME='' N_NS='' N_IP='' N_VETH='' N_INDEX='' N_SSH_PORT=''
	while IFS='=' read -r key val; do
		case $key in
		NAME) N_NAME=$val ;;
		NS) N_NS=$val ;;
		IP) N_IP=$val ;;
		VETH) N_VETH=$val ;;
		INDEX) N_INDEX=$val ;;
		SSH_PORT) N_SSH_PORT=$val ;;
		esac
	done <"$f"
	[[ -n $N_NAME && -n $N_NS ]]
}

# ---------------------------------------------------------------- processes

ns_inode() { stat -L -c %i "$1" 2>/dev/null; }
proc_comm() { cat "/proc/$1/comm" 2>/dev/null; }
proc_ppid() { awk '/^PPid:/ {print $2}' "/proc/$1/status" 2>/dev/null; }
# Alive = exists and not a zombie; a thread-group leader shows Z while its
# other threads still run (Go daemons during shutdown), so count those too.
pid_alive() {
	[[ $1 =~ ^[0-9]+$ && -d /proc/$1 ]] || return 1
	local t
	for t in /proc/"$1"/task/*/stat; do
		[[ $(awk '{sub(/^.*\) /, ""); print $1}' "$t" 2>/dev/null) == [!ZX]* ]] && return 0
	done
	return 1
}
read_pid() { [[ -f $1 ]] && tr -dc '0-9' <"$1"; }

# PID of the node's init (the holder of its mount/uts/ipc/pid namespaces),
# verified: alive, inside the node's network namespace, in a PID namespace of
# its own.
node_init_pid() {
	local name=$1 pid ns
	pid=$(read_pid "$(node_dir "$name")/init.pid") || return 1
	[[ -n $pid ]] && pid_alive "$pid" || return 1
	ns=$(node_ns "${name#node}")
	[[ -e /run/netns/$ns ]] || return 1
	[[ $(ns_inode "/proc/$pid/ns/net") == "$(ns_inode "/run/netns/$ns")" ]] || return 1
	[[ $(ns_inode "/proc/$pid/ns/pid") != "$(ns_inode /proc/self/ns/pid)" ]] || return 1
	printf '%s' "$pid"
}

# Host PIDs of the processes in the node's PID namespace (not in nested ones,
# so containers started by the node's engine are excluded).
node_procs() {
	local name=$1 init want p ns
	init=$(node_init_pid "$name") || return 0
	want=$(ns_inode "/proc/$init/ns/pid")
	ns=$(node_ns "${name#node}")
	for p in $(ip netns pids "$ns" 2>/dev/null); do
		[[ $(ns_inode "/proc/$p/ns/pid") == "$want" ]] && printf '%s\n' "$p"
	done
	return 0
}

# Host PIDs of processes named $2 in the node (node's PID + mount namespace).
# With $3 = "top": only those whose parent is the node's init (daemons).
node_comm_pids() {
	local name=$1 comm=$2 mode=${3:-all} init mnt p
	init=$(node_init_pid "$name") || return 0
	mnt=$(ns_inode "/proc/$init/ns/mnt")
	for p in $(node_procs "$name"); do
		[[ $(proc_comm "$p") == "$comm" ]] || continue
		[[ $(ns_inode "/proc/$p/ns/mnt") == "$mnt" ]] || continue
		if [[ $mode == top && $(proc_ppid "$p") != "$init" ]]; then
			continue
		fi
		printf '%s\n' "$p"
	done
	return 0
}

# Send TERM, wait up to $1 seconds, then KILL the given PIDs.
kill_wait() {
	local timeout=$1 p i alive
	shift
	(($# > 0)) || return 0
	kill -TERM "$@" 2>/dev/null || true
	for ((i = 0; i < timeout * 10; i++)); do
		alive=0
		for p in "$@"; do pid_alive "$p" && alive=1; done
		((alive)) || return 0
		sleep 0.1
	done
	kill -KILL "$@" 2>/dev/null || true
	for ((i = 0; i < 50; i++)); do
		alive=0
		for p in "$@"; do pid_alive "$p" && alive=1; done
		((alive)) || return 0
		sleep 0.1
	done
	return 0
}

# Run a command in the node's net + mount + uts + ipc + pid namespaces.
nsrun() {
	local name=$1 init
	shift
	init=$(node_init_pid "$name") || {
		printf '%s: %s is not running\n' "$PROG" "$name" >&2
		return 1
	}
	nsenter -t "$init" -n -m -u -i -p -- "$@"
}

# ---------------------------------------------------------------- sshd

# First line of a command's output, without a pipe into head (SIGPIPE under
# pipefail).
first_line() {
	local out
	out=$("$@")
	printf '%s' "${out%%$'\n'*}"
}

node_sshd_pid() { first_line node_comm_pids "$1" sshd top; }

port_listeners() { # ns port -> "comm pid" lines of listeners
	nsenter --net="/run/netns/$1" ss -Htlnp "sport = :$2" 2>/dev/null |
		grep -o 'users:(("[^"]*",pid=[0-9]*' | sed -E 's/users:\(\("([^"]*)",pid=([0-9]*)/\1 \2/' || true
}

port_in_use() { # ns port -> 0 if something listens
	[[ -n $(nsenter --net="/run/netns/$1" ss -Htln "sport = :$2" 2>/dev/null) ]]
}

node_write_sshd_config() {
	local name=$1 dir port
	dir=$(node_dir "$name")
	port=${N_SSH_PORT:-22}
	[[ -f $dir/ssh_host_ed25519_key ]] || ssh-keygen -q -t ed25519 -N '' -C "$name" -f "$dir/ssh_host_ed25519_key" >/dev/null
	cat >"$dir/sshd_config.tmp" <<-EOF
		# Generated by tests/cluster/up.sh for the simulated node $name.
		ListenAddress 0.0.0.0:$port
		AddressFamily inet
		HostKey $dir/ssh_host_ed25519_key
		PidFile $dir/sshd.ns.pid
		PermitRootLogin prohibit-password
		PubkeyAuthentication yes
		AuthorizedKeysFile .ssh/authorized_keys
		PasswordAuthentication no
		KbdInteractiveAuthentication no
		UsePAM no
		UseDNS no
		PrintMotd no
		PrintLastLog no
		MaxStartups 200
		MaxSessions 200
		ClientAliveInterval 30
		AcceptEnv LANG LC_*
		Subsystem sftp internal-sftp
		SetEnv DOCKER_HOST=unix://$dir/docker.sock CONTAINERS_STORAGE_CONF=$dir/storage.conf CONTAINERS_CONF=$dir/containers.conf SLURM_CONF=$SLURM_CONF
	EOF
	# A running listener keeps its old config until SIGHUP (it re-executes
	# itself; open sessions stay): reload only when the config changed.
	if [[ -f $dir/sshd_config ]] && ! cmp -s "$dir/sshd_config.tmp" "$dir/sshd_config"; then
		mv -f "$dir/sshd_config.tmp" "$dir/sshd_config"
		local pid
		pid=$(node_sshd_pid "$name")
		if [[ -n $pid ]]; then kill -HUP "$pid" 2>/dev/null || true; fi
		return 0
	fi
	mv -f "$dir/sshd_config.tmp" "$dir/sshd_config"
}

# Start the node's sshd unless it runs. Returns 2 if the port is taken.
node_start_sshd() {
	local name=$1 dir pid i port
	node_load "$name"
	dir=$(node_dir "$name")
	port=${N_SSH_PORT:-22}
	pid=$(node_sshd_pid "$name")
	if [[ -n $pid ]]; then
		printf '%s\n' "$pid" >"$dir/sshd.pid"
		return 0
	fi
	port_in_use "$N_NS" "$port" && return 2
	node_write_sshd_config "$name"
	mkdir -p "$(node_var "$name")"
	rm -f "$dir/sshd.ns.pid" "$dir/sshd.pid"
	nsrun "$name" "$BIN_sshd" -f "$dir/sshd_config" -E "$(node_var "$name")/sshd.log" \
		</dev/null >/dev/null 2>&1 9>&- || return 1
	for ((i = 0; i < 100; i++)); do
		pid=$(node_sshd_pid "$name")
		if [[ -n $pid ]] && port_in_use "$N_NS" "$port"; then
			printf '%s\n' "$pid" >"$dir/sshd.pid"
			return 0
		fi
		sleep 0.1
	done
	return 1
}

# Kill every sshd of the node (listener and per-connection processes), so
# ControlMaster connections from the controller die as well. Sshds inside
# containers (port 2224) live in other PID namespaces and are left alone.
node_stop_sshd() {
	local name=$1 pids
	# shellcheck disable=SC2207
	pids=($(node_comm_pids "$name" sshd))
	kill_wait 5 "${pids[@]}"
	rm -f "$(node_dir "$name")/sshd.pid" "$(node_dir "$name")/sshd.ns.pid"
}

# ---------------------------------------------------------------- dockerd

docker_ok() { # socket path
	[[ -S $1 ]] && timeout 10 docker -H "unix://$1" version --format '{{.Server.Version}}' >/dev/null 2>&1
}

node_dockerd_pid() { first_line node_comm_pids "$1" dockerd top; }

# Unmount what a stopped engine left in the node's mount namespace
# (<exec-root>/netns/default first, then anything under exec-root/data-root).
node_engine_unmount() {
	local name=$1 init exec_root data_root
	init=$(node_init_pid "$name") || return 0
	exec_root=$(node_dir "$name")/exec
	data_root=$(node_var "$name")/docker
	# shellcheck disable=SC2016
	nsrun "$name" /bin/sh -c '
		umount "$1/netns/default" 2>/dev/null || true
		awk -v a="$1/" -v b="$2/" "index(\$5, a) == 1 || index(\$5, b) == 1 {print \$5}" /proc/self/mountinfo |
			sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
	' sh "$exec_root" "$data_root" </dev/null >/dev/null 2>&1 9>&- || true
}

node_start_engine() {
	local name=$1 dir var sock pid i
	dir=$(node_dir "$name")
	var=$(node_var "$name")
	sock=$dir/docker.sock
	pid=$(node_dockerd_pid "$name")
	if [[ -n $pid ]]; then
		for ((i = 0; i < 300; i++)); do
			if docker_ok "$sock"; then
				printf '%s\n' "$pid" >"$dir/docker.pid"
				return 0
			fi
			pid_alive "$pid" || break
			sleep 0.1
		done
		kill_wait 10 "$pid"
	fi
	mkdir -p "$var/docker" "$dir/exec"
	# Engine ID (docker info .ID) comes from the trust key; one per node.
	cat >"$dir/daemon.json" <<-EOF
		{
		  "deprecated-key-path": "$var/key.json",
		  "shutdown-timeout": 5
		}
	EOF
	node_engine_unmount "$name"
	rm -f "$dir/docker.ns.pid" "$dir/docker.pid"
	nsrun "$name" setsid -f "$BIN_dockerd" --config-file "$dir/daemon.json" \
		--data-root "$var/docker" --exec-root "$dir/exec" -H "unix://$sock" \
		--pidfile "$dir/docker.ns.pid" --iptables=false --bridge=none \
		</dev/null >>"$var/dockerd.log" 2>&1 9>&- || return 1
	for ((i = 0; i < 600; i++)); do
		if docker_ok "$sock"; then
			pid=$(node_dockerd_pid "$name")
			[[ -n $pid ]] || return 1
			printf '%s\n' "$pid" >"$dir/docker.pid"
			return 0
		fi
		sleep 0.1
	done
	return 1
}

node_stop_engine() {
	local name=$1 dir pids
	dir=$(node_dir "$name")
	# shellcheck disable=SC2207
	pids=($(node_comm_pids "$name" dockerd top))
	kill_wait 30 "${pids[@]}"
	# A killed dockerd can leave its managed containerd behind.
	# shellcheck disable=SC2207
	pids=($(node_comm_pids "$name" containerd top))
	kill_wait 10 "${pids[@]}"
	node_engine_unmount "$name"
	rm -f "$dir/docker.pid" "$dir/docker.ns.pid"
}

node_remove_containers() {
	local sock ids
	sock=$(node_sock "$1")
	docker_ok "$sock" || return 0
	ids=$(timeout 30 docker -H "unix://$sock" ps -aq 2>/dev/null || true)
	[[ -z $ids ]] && return 0
	# shellcheck disable=SC2086
	timeout 120 docker -H "unix://$sock" rm -f -v $ids >/dev/null 2>&1 || true
}

# ---------------------------------------------------------------- podman

# Podman on a node: the nodes share the host filesystem, so each node gets
# its own storage (graphroot under /var/lib/cvs-sim/<node>/containers, runroot
# and tmp_dir under /run/cvs-sim/<node>/containers) and its own config; the
# node's SSH sessions get CONTAINERS_STORAGE_CONF/CONTAINERS_CONF (SetEnv).
node_podman_env() { # -> "CONTAINERS_STORAGE_CONF=… CONTAINERS_CONF=…" (for env)
	local dir
	dir=$(node_dir "$1")
	printf 'CONTAINERS_STORAGE_CONF=%s CONTAINERS_CONF=%s' "$dir/storage.conf" "$dir/containers.conf"
}

# Run podman inside the node with the node's storage and config.
node_podman() {
	local name=$1
	shift
	# shellcheck disable=SC2046
	nsrun "$name" env $(node_podman_env "$name") podman "$@"
}

node_write_podman_config() {
	local name=$1 dir var nproc nofile
	dir=$(node_dir "$name")
	var=$(node_var "$name")
	mkdir -p "$var/containers" "$dir/containers"
	# default_ulimits (README, machine facts: nofile 20000, nproc 32768) must stay within
	# the hard limits: containers cannot raise them (no CAP_SYS_RESOURCE)
	nproc=$(ulimit -Hu)
	if [[ $nproc == unlimited ]] || ((nproc > 32768)); then nproc=32768; fi
	nofile=$(ulimit -Hn)
	if [[ $nofile == unlimited ]] || ((nofile > 20000)); then nofile=20000; fi
	cat >"$dir/storage.conf.tmp" <<-EOF
		# Generated by tests/cluster/up.sh for the simulated node $name.
		[storage]
		driver = "overlay"
		graphroot = "$var/containers/storage"
		runroot = "$dir/containers/storage"
	EOF
	mv -f "$dir/storage.conf.tmp" "$dir/storage.conf"
	cat >"$dir/containers.conf.tmp" <<-EOF
		# Generated by tests/cluster/up.sh for the simulated node $name.
		[containers]
		default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
		netns = "host"

		[network]
		network_config_dir = "$var/containers/networks"

		[engine]
		cgroup_manager = "cgroupfs"
		events_logger = "file"
		tmp_dir = "$dir/containers/libpod"
		static_dir = "$var/containers/storage/libpod"
		volume_path = "$var/containers/storage/volumes"
	EOF
	mv -f "$dir/containers.conf.tmp" "$dir/containers.conf"
}

# Remove every podman container of the node (teardown); quiet, best effort.
node_remove_podman_containers() {
	[[ -f $(node_dir "$1")/containers.conf ]] || return 0
	command -v podman >/dev/null 2>&1 || return 0
	node_init_pid "$1" >/dev/null || return 0
	# shellcheck disable=SC2046
	nsrun "$1" env $(node_podman_env "$1") timeout 120 podman rm -a -f -t 0 </dev/null >/dev/null 2>&1 9>&- || true
}

# ---------------------------------------------------------------- teardown

# Everything of one node, in order: containers, engine, sshd, the node's init
# (its PID namespace dies with it), leftover processes in the network
# namespace, the namespace, the veth, the node's state directory.
# The data-root under /var/lib/cvs-sim/<node>/docker is kept (image cache).
node_teardown() {
	local name=$1 init pids
	node_load "$name" || {
		rm -rf "${STATE_DIR:?}/$name"
		return 0
	}
	if init=$(node_init_pid "$name"); then
		node_remove_containers "$name"
		node_remove_podman_containers "$name"
		node_stop_engine "$name"
		node_stop_sshd "$name"
		kill_wait 5 "$init"
	fi
	local holder
	holder=$(read_pid "$(node_dir "$name")/holder.pid" || true)
	if [[ -n $holder ]] && pid_alive "$holder" && [[ -e /run/netns/$N_NS ]] &&
		[[ $(ns_inode "/proc/$holder/ns/net") == "$(ns_inode "/run/netns/$N_NS")" ]]; then
		kill_wait 5 "$holder"
	fi
	if [[ -e /run/netns/$N_NS ]]; then
		# shellcheck disable=SC2207
		pids=($(ip netns pids "$N_NS" 2>/dev/null))
		kill_wait 5 "${pids[@]}"
		ip netns del "$N_NS" 2>/dev/null || true
	fi
	if [[ -n $N_VETH ]] && ip link show "$N_VETH" >/dev/null 2>&1; then
		ip link del "$N_VETH" 2>/dev/null || true
	fi
	rm -rf "${STATE_DIR:?}/$name"
}

# Remove mount points up.sh created on the host (recorded in
# $STATE_DIR/mountpoints, "d path" or "f path"), newest first; only empty
# ones that are no longer mounted anywhere we know of.
remove_mountpoints() {
	local f=$STATE_DIR/mountpoints kind path keep=()
	[[ -f $f ]] || return 0
	while read -r kind path; do
		[[ -n $path ]] || continue
		case $kind in
		d) rmdir "$path" 2>/dev/null || { [[ -e $path ]] && keep+=("$kind $path"); } ;;
		f) if [[ -f $path && ! -s $path ]]; then rm -f "$path"; elif [[ -e $path ]]; then keep+=("$kind $path"); fi ;;
		esac
	done < <(tac "$f")
	if ((${#keep[@]})); then
		printf '%s\n' "${keep[@]}" | tac >"$f"
	else
		rm -f "$f"
	fi
}

# ---------------------------------------------------------------- Slurm (tests/cluster/slurm.sh)

SLURM_PARTITION=cvs
MUNGE_PID=$SLURM_DIR/munge/munged.pid

slurm_munged_pid() {
	local pid
	pid=$(read_pid "$MUNGE_PID") || return 0
	[[ -n $pid ]] && pid_alive "$pid" && [[ $(proc_comm "$pid") == munged ]] && printf '%s' "$pid"
	return 0
}

# Cancel every job of the partition, stop the daemons slurm.sh started (slurmd, slurmstepd and slurmctld in the
# nodes, munged on the host) and remove Slurm's state. Called by slurm.sh stop and down.sh.
slurm_stop() {
	local n pids=()
	if [[ -f $SLURM_CONF ]]; then
		SLURM_CONF=$SLURM_CONF timeout 10 scancel --full --quiet --partition="$SLURM_PARTITION" >/dev/null 2>&1 || true
	fi
	for n in $(recorded_nodes); do
		node_init_pid "$n" >/dev/null || continue
		# shellcheck disable=SC2207
		pids+=($(node_comm_pids "$n" slurmd top) $(node_comm_pids "$n" slurmctld top) $(node_comm_pids "$n" slurmstepd))
	done
	kill_wait 10 "${pids[@]}"
	pids=()
	local m
	m=$(slurm_munged_pid)
	[[ -n $m ]] && pids+=("$m")
	kill_wait 10 "${pids[@]}"
	rm -rf "$SLURM_DIR"
}

