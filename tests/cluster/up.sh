#!/usr/bin/env bash
# Bring up the simulated cluster (idempotent): NODES network namespaces on the
# bridge br-cvs, each with a private mount/uts/ipc/pid namespace, its own sshd
# and its own dockerd, plus the test image cvs-sim-node:latest in every node
# engine. Writes key, cluster.json and inventories to tests/cluster/generated/.
#
#   NODES=3 CVS_SIM_SUBNET=10.77.0 CVS_SIM_SSH_PORT=22 tests/cluster/up.sh
#
# On failure: one line "cluster-up: <reason>" on stderr, exit 1, and whatever
# this invocation created is torn down again.
set -Eeuo pipefail

PROG=cluster-up
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NODES=${NODES:-3}
SUBNET=${CVS_SIM_SUBNET:-10.77.0}
SSH_PORT=${CVS_SIM_SSH_PORT:-22}
PYTHON=/usr/bin/python3

UNDO=()
STEP=preflight
LOG=/dev/null
CVS_SIM_DIED=0
T0=$SECONDS

# ---------------------------------------------------------------- failure handling

on_err() {
	local rc=$?
	if [[ $BASHPID == "$$" ]] && ((CVS_SIM_DIED == 0)); then
		CVS_SIM_DIED=1
		printf '%s: %s failed (exit %d; log: %s)\n' "$PROG" "$STEP" "$rc" "$LOG" >&2
	fi
	exit "$rc"
}

on_exit() {
	local rc=$? i
	trap - ERR
	set +e
	if ((rc != 0)); then
		if ((CVS_SIM_DIED == 0)); then
			printf '%s: interrupted during %s (exit %d)\n' "$PROG" "$STEP" "$rc" >&2
		fi
		for ((i = ${#UNDO[@]} - 1; i >= 0; i--)); do
			eval "${UNDO[i]}" >>"$LOG" 2>&1
		done
	fi
	exit "$rc"
}

trap on_err ERR
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- preflight

validate_input() {
	if ! [[ $NODES =~ ^[0-9]+$ ]] || ((10#$NODES < 1 || 10#$NODES > 200)); then
		die "NODES must be an integer from 1 to 200 (got '$NODES')"
	fi
	NODES=$((10#$NODES))
	local o
	[[ $SUBNET =~ ^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})$ ]] ||
		die "CVS_SIM_SUBNET must be three octets like 10.77.0 (got '$SUBNET')"
	for o in "${BASH_REMATCH[@]:1}"; do
		((10#$o <= 255)) || die "CVS_SIM_SUBNET must be three octets like 10.77.0 (got '$SUBNET')"
	done
	if ! [[ $SSH_PORT =~ ^[0-9]+$ ]] || ((10#$SSH_PORT < 1 || 10#$SSH_PORT > 65535)); then
		die "CVS_SIM_SSH_PORT must be a TCP port (got '$SSH_PORT')"
	fi
	SSH_PORT=$((10#$SSH_PORT))
	[[ -x $PYTHON ]] || die "required binary not found: $PYTHON (node init process, gen_inventories.py)"
}

check_recorded_state() {
	local rec n
	if [[ -f $STATE_DIR/subnet ]] && [[ -n $(recorded_nodes) ]]; then
		rec=$(<"$STATE_DIR/subnet")
		[[ $rec == "$SUBNET" ]] ||
			die "cluster is up with subnet $rec.0/24, not $SUBNET.0/24 (run tests/cluster/down.sh first)"
	fi
	for n in $(recorded_nodes); do
		node_load "$n" || continue
		[[ ${N_SSH_PORT:-22} == "$SSH_PORT" ]] ||
			die "cluster is up with SSH port ${N_SSH_PORT:-22}, not $SSH_PORT (run tests/cluster/down.sh first)"
	done
}

# Addresses/routes of the subnet owned by anything but br-cvs.
check_subnet_free() {
	local dev addr dst rest
	while read -r _ dev _ addr _; do
		[[ $dev == "$BRIDGE" ]] && continue
		if [[ ${addr%/*} == "$SUBNET".* ]]; then
			die "subnet $SUBNET.0/24 is already in use: ${addr%/*} is assigned to $dev"
		fi
	done < <(ip -o -4 addr show)
	while read -r dst rest; do
		[[ $dst == "$SUBNET".* ]] || continue
		[[ $dst == */* ]] && ((${dst#*/} < 24)) && continue
		dev=$(sed -nE 's/.*\bdev ([^ ]+).*/\1/p' <<<"$rest")
		[[ $dev == "$BRIDGE" ]] && continue
		die "subnet $SUBNET.0/24 is already in use: route $dst via ${dev:-?}"
	done < <(ip -4 route show table main)
	if ip link show "$BRIDGE" >/dev/null 2>&1; then
		while read -r _ _ _ addr _; do
			[[ ${addr%/*} == "$SUBNET".* ]] ||
				die "bridge $BRIDGE exists with address $addr, outside $SUBNET.0/24 (another cluster? run tests/cluster/down.sh)"
		done < <(ip -o -4 addr show dev "$BRIDGE")
	fi
}

# A node address that answers on br-cvs before its node exists belongs to
# someone else. Only probed when br-cvs has ports that are not ours (the only
# way anything else can answer there); traffic stays on br-cvs.
check_node_addresses_free() {
	local port ours k ip foreign=0 probe=()
	ip link show "$BRIDGE" >/dev/null 2>&1 || return 0
	for port in $(ip -o link show master "$BRIDGE" | awk -F': ' '{print $2}' | cut -d@ -f1); do
		ours=0
		for k in $(seq 1 200); do
			[[ $port == "$(node_veth "$k")" && -f $(node_dir "$(node_name "$k")")/node.env ]] && ours=1 && break
		done
		((ours)) || foreign=1
	done
	((foreign)) || return 0
	for ((k = 1; k <= NODES; k++)); do
		[[ -e /run/netns/$(node_ns "$k") ]] && continue
		ip=$(node_ip "$k")
		probe+=("$ip")
		ip neigh del "$ip" dev "$BRIDGE" 2>/dev/null || true
		(exec 3>"/dev/udp/$ip/9" && printf 'probe\n' >&3) 2>/dev/null || true
	done
	((${#probe[@]})) || return 0
	sleep 1.5
	for ip in "${probe[@]}"; do
		if [[ $(ip neigh show "$ip" dev "$BRIDGE") =~ REACHABLE|STALE|DELAY|PROBE ]]; then
			die "node address $ip already answers on $BRIDGE (not a node of this cluster)"
		fi
	done
}

# An existing node namespace whose sshd is down must have the SSH port free.
check_ports_free() {
	local k name ns l
	for ((k = 1; k <= NODES; k++)); do
		name=$(node_name "$k")
		ns=$(node_ns "$k")
		[[ -e /run/netns/$ns ]] || continue
		[[ -n $(node_sshd_pid "$name") ]] && continue
		if port_in_use "$ns" "$SSH_PORT"; then
			l=$(first_line port_listeners "$ns" "$SSH_PORT")
			die "port $SSH_PORT on $name ($(node_ip "$k"), netns $ns) is already in use${l:+ by ${l% *} (pid ${l#* })}"
		fi
	done
}

# ---------------------------------------------------------------- undo actions

undo_rm() { rm -rf "$@"; }

undo_state_dir() {
	[[ -d $STATE_DIR ]] || return 0
	[[ -n $(recorded_nodes) ]] && return 0
	rm -f "$STATE_DIR/subnet" "$STATE_DIR/hosts"
	rmdir "$STATE_DIR" 2>/dev/null || true
}

stop_host_dockerd() {
	local f=$STATE_DIR/host-dockerd.pid pid kids
	pid=$(read_pid "$f" || true)
	if [[ -n $pid ]] && pid_alive "$pid" && [[ $(proc_comm "$pid") == dockerd ]]; then
		kids=$(pgrep -P "$pid" || true)
		# shellcheck disable=SC2086
		kill_wait 30 "$pid" $kids
	fi
	if mountpoint -q /var/run/docker/netns/default 2>/dev/null; then
		umount /var/run/docker/netns/default 2>/dev/null || true
	fi
	rm -f "$f"
}

undo_bridge() {
	ip link del "$BRIDGE" 2>/dev/null || true
	rm -f "$STATE_DIR/bridge.created"
}

undo_iptables() {
	iptables -w -D FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT 2>/dev/null || true
	rm -f "$STATE_DIR/iptables.rule"
}

# Remove the mount points created by this invocation (NEW_MOUNTPOINTS).
undo_mountpoints() {
	local i kind path
	for ((i = ${#NEW_MOUNTPOINTS[@]} - 1; i >= 0; i--)); do
		read -r kind path <<<"${NEW_MOUNTPOINTS[i]}"
		case $kind in
		d) rmdir "$path" 2>/dev/null || true ;;
		f) [[ -f $path && ! -s $path ]] && rm -f "$path" ;;
		esac
		if [[ -f $STATE_DIR/mountpoints ]]; then
			grep -vxF "${NEW_MOUNTPOINTS[i]}" "$STATE_DIR/mountpoints" >"$STATE_DIR/mountpoints.tmp" || true
			mv -f "$STATE_DIR/mountpoints.tmp" "$STATE_DIR/mountpoints"
			[[ -s $STATE_DIR/mountpoints ]] || rm -f "$STATE_DIR/mountpoints"
		fi
	done
}

# ---------------------------------------------------------------- host pieces

ensure_dirs() {
	if [[ ! -d $STATE_DIR ]]; then
		mkdir -p "$STATE_DIR"
		UNDO+=(undo_state_dir)
	fi
	mkdir -p "$VAR_DIR" "$CACHE_DIR" "$LOG_DIR" "$GEN_DIR"
	LOG=$LOG_DIR/up.log
	printf '\n==== %s up.sh NODES=%s SUBNET=%s\n' "$(date -Is)" "$NODES" "$SUBNET" >>"$LOG"
	if [[ ! -f $STATE_DIR/subnet ]]; then
		printf '%s\n' "$SUBNET" >"$STATE_DIR/subnet"
		UNDO+=("rm -f $STATE_DIR/subnet")
	fi
	if [[ ! -d /run/sshd ]]; then
		mkdir -m 0755 /run/sshd
		: >"$STATE_DIR/sshd-privsep.created"
	fi
}

ensure_key() {
	STEP="generating the SSH key pair"
	if [[ ! -f $GEN_DIR/id_ed25519 || ! -f $GEN_DIR/id_ed25519.pub ]]; then
		rm -f "$GEN_DIR/id_ed25519" "$GEN_DIR/id_ed25519.pub"
		ssh-keygen -q -t ed25519 -N '' -C cvs-sim -f "$GEN_DIR/id_ed25519" >>"$LOG" 2>&1
	fi
	chmod 600 "$GEN_DIR/id_ed25519"
}

# Rewritten in place (same inode): nodes bind-mount it over /etc/hosts.
write_hosts() {
	local k
	{
		printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n'
		printf '%s.1\tcvs-controller\n' "$SUBNET"
		for ((k = 1; k <= NODES; k++)); do
			printf '%s\t%s\n' "$(node_ip "$k")" "$(node_name "$k")"
		done
	} >"$STATE_DIR/hosts"
}

ensure_host_dockerd() {
	STEP="starting the host dockerd"
	local pid i
	docker_ok "$HOST_DOCKER_SOCK" && return 0
	pid=$(read_pid "$STATE_DIR/host-dockerd.pid" || true)
	if ! { [[ -n $pid ]] && pid_alive "$pid" && [[ $(proc_comm "$pid") == dockerd ]]; }; then
		if [[ -f /var/run/docker.pid ]]; then
			pid=$(read_pid /var/run/docker.pid || true)
			if [[ -n $pid ]] && pid_alive "$pid" && [[ $(proc_comm "$pid") == dockerd ]]; then
				die "a host dockerd (pid $pid) runs but $HOST_DOCKER_SOCK does not answer"
			fi
			rm -f /var/run/docker.pid
		fi
		say "starting the host dockerd (log: $LOG_DIR/host-dockerd.log)"
		setsid nohup "$BIN_dockerd" </dev/null >>"$LOG_DIR/host-dockerd.log" 2>&1 9>&- &
		pid=$!
		printf '%s\n' "$pid" >"$STATE_DIR/host-dockerd.pid"
		UNDO+=(stop_host_dockerd)
	fi
	for ((i = 0; i < 600; i++)); do
		docker_ok "$HOST_DOCKER_SOCK" && return 0
		pid_alive "$pid" || break
		sleep 0.1
	done
	die "the host dockerd did not come up (log: $LOG_DIR/host-dockerd.log)"
}

ensure_bridge() {
	STEP="creating bridge $BRIDGE"
	if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
		ip link add "$BRIDGE" type bridge
		: >"$STATE_DIR/bridge.created"
		UNDO+=(undo_bridge)
	fi
	if [[ $(ip -o -4 addr show dev "$BRIDGE") != *" $SUBNET.1/24 "* ]]; then
		ip addr add "$SUBNET.1/24" dev "$BRIDGE"
	fi
	ip link set "$BRIDGE" up
	STEP="adding the iptables FORWARD rule"
	if ! iptables -w -C FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT 2>/dev/null; then
		iptables -w -I FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT
		: >"$STATE_DIR/iptables.rule"
		UNDO+=(undo_iptables)
	fi
}

# ---------------------------------------------------------------- image

# "deb URI suite main" lines for $SUITE, -updates and -security, taken from
# the host's apt sources (deb822 and one-line formats).
apt_mirrors() {
	local f out
	out=$(
		for f in /etc/apt/sources.list.d/*.sources; do
			[[ -f $f ]] || continue
			awk -v s="$SUITE" '
				function flush(  n, m, i, j, U, S) {
					if (types ~ /(^| )deb( |$)/) {
						n = split(uris, U, " "); m = split(suites, S, " ")
						for (i = 1; i <= n; i++) for (j = 1; j <= m; j++)
							if (S[j] == s || S[j] == s "-updates" || S[j] == s "-security")
								print "deb " U[i] " " S[j] " main"
					}
					types = uris = suites = ""
				}
				/^[ \t]*#/ { next }
				/^[ \t]*$/ { flush(); next }
				tolower($1) == "types:" { $1 = ""; types = $0; next }
				tolower($1) == "uris:" { $1 = ""; uris = $0; next }
				tolower($1) == "suites:" { $1 = ""; suites = $0; next }
				END { flush() }' "$f"
		done
		for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
			[[ -f $f ]] || continue
			sed -E 's/\[[^]]*\]//' "$f" | awk -v s="$SUITE" '
				$1 == "deb" && ($3 == s || $3 == s "-updates" || $3 == s "-security") { print "deb " $2 " " $3 " main" }'
		done
	)
	out=$(sort -u <<<"$out" | sed '/^$/d')
	[[ -n $out ]] || out="deb http://deb.debian.org/debian $SUITE main"
	printf '%s\n' "$out"
}

image_packages() {
	sed -e 's/#.*//' "$IMAGE_DIR/packages.txt" | tr -s ' \t\n' '\n' | sed '/^$/d' | sort -u | paste -sd, -
}

# Hash of everything the node image is built from.
image_input_hash() {
	(
		cd "$IMAGE_DIR"
		printf 'base=%s\n' "$1"
		find . -printf '%y %m %p %l\n' | LC_ALL=C sort
		find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum
	) | sha256sum | cut -c1-16
}

ensure_image() {
	local pkgs base_hash base_tag tar mirrors=()
	STEP="building the base image"
	pkgs=$(image_packages)
	mapfile -t mirrors < <(apt_mirrors)
	base_hash=$(printf '%s\n' "v1" "$SUITE" minbase "$pkgs" "${mirrors[@]}" | sha256sum | cut -c1-12)
	base_tag=cvs-sim-base:$base_hash
	if ! docker image inspect "$base_tag" >/dev/null 2>&1; then
		tar=$CACHE_DIR/base-$base_hash.tar
		if [[ ! -s $tar ]]; then
			say "building the base root filesystem with mmdebstrap (once per machine; ~1 min)"
			UNDO+=("rm -f $tar.part")
			# shellcheck disable=SC2154 # set by require_bins
			"$BIN_mmdebstrap" --variant=minbase --include="$pkgs" --format=tar \
				"$SUITE" "$tar.part" "${mirrors[@]}" </dev/null >>"$LOG" 2>&1
			mv -f "$tar.part" "$tar"
		fi
		say "importing $base_tag"
		docker import "$tar" "$base_tag" >>"$LOG" 2>&1
	fi
	STEP="building $NODE_IMAGE"
	IMAGE_ID=$(build_image "$NODE_IMAGE" "$(image_input_hash "$base_tag")" "$IMAGE_DIR" "BASE_IMAGE=$base_tag")
}

# build_image IMAGE HASH CONTEXT BUILD-ARG: build IMAGE from CONTEXT unless its label already records HASH (the
# hash of its inputs), drop the image it replaces, and print its ID. Run in $(...): messages go to stderr.
build_image() {
	local image=$1 h=$2 context=$3 arg=$4 cur old t0=$SECONDS
	cur=$(docker image inspect -f "{{ index .Config.Labels \"$IMAGE_LABEL\" }}" "$image" 2>/dev/null || true)
	if [[ $cur != "$h" ]]; then
		old=$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
		say "building $image (inputs changed)" >&2
		DOCKER_BUILDKIT=0 docker build --build-arg "$arg" --label "$IMAGE_LABEL=$h" -t "$image" "$context" \
			</dev/null >>"$LOG" 2>&1
		if [[ -n $old ]]; then docker rmi "$old" >>"$LOG" 2>&1 || true; fi
		say "$image built in $((SECONDS - t0)) s" >&2
	fi
	docker image inspect -f '{{.Id}}' "$image"
}

# Give the node engine an image unless it already has this image ID (a load skips the layers it has).
ensure_node_image() {
	local name=$1 image=${2:-$NODE_IMAGE} want=${3:-$IMAGE_ID} sock nid tar
	tar=$CACHE_DIR/$(printf '%s' "${image%%:*}" | tr -c 'A-Za-z0-9-' _).tar
	STEP="loading $image into $name"
	sock=$(node_sock "$name")
	nid=$(docker -H "unix://$sock" image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
	[[ $nid == "$want" ]] && return 0
	if [[ ! -s $tar || $(cat "$tar.id" 2>/dev/null) != "$want" ]]; then
		rm -f "$tar" "$tar.id"
		docker save -o "$tar.part" "$image" >>"$LOG" 2>&1
		mv -f "$tar.part" "$tar"
		printf '%s\n' "$want" >"$tar.id"
	fi
	say "loading $image into $name"
	docker -H "unix://$sock" load -i "$tar" >>"$LOG" 2>&1
	if [[ -n $nid ]]; then docker -H "unix://$sock" rmi "$nid" >>"$LOG" 2>&1 || true; fi
}

# Podman on the node (optional: only when podman is installed): per-node
# storage/config (lib.sh), and the image unless that storage has this ID.
ensure_node_podman() {
	local name=$1 pid tar=$CACHE_DIR/cvs-sim-node.tar
	STEP="$name: podman storage and config"
	node_write_podman_config "$name"
	STEP="loading $NODE_IMAGE into $name (podman)"
	pid=$(node_podman "$name" image inspect -f '{{.Id}}' "$NODE_IMAGE" 2>/dev/null || true)
	[[ sha256:$pid == "$IMAGE_ID" ]] && return 0
	if [[ ! -s $tar || $(cat "$tar.id" 2>/dev/null) != "$IMAGE_ID" ]]; then
		rm -f "$tar" "$tar.id"
		docker save -o "$tar.part" "$NODE_IMAGE" >>"$LOG" 2>&1
		mv -f "$tar.part" "$tar"
		printf '%s\n' "$IMAGE_ID" >"$tar.id"
	fi
	say "loading $NODE_IMAGE into $name (podman)"
	node_podman "$name" load -i "$tar" </dev/null >>"$LOG" 2>&1 9>&-
	if [[ -n $pid ]]; then node_podman "$name" rmi "$pid" </dev/null >>"$LOG" 2>&1 9>&- || true; fi
}

# ---------------------------------------------------------------- real MaxText

# The host's apt sources, moved from $SUITE to $MAXTEXT_SUITE (same mirrors, -updates and -security).
maxtext_mirrors() {
	apt_mirrors | sed -E "s/ ${SUITE}(-[a-z]+)? main\$/ ${MAXTEXT_SUITE}\1 main/"
}

# $MAXTEXT_RUNTIME/opt/cvs-maxtext: trixie's /usr (Python 3.13) with MaxText and its pinned packages in
# /usr/local, and bin/python3 that starts it (tests/cluster/maxtext/README.md). Built once per machine; ~1.2 GB.
# Runs in the background (its own subshell): $MAXTEXT_RUNTIME/input-hash is how it tells the caller what it built.
ensure_maxtext_runtime() {
	local h part root triplet loader mirrors=() t0=$SECONDS
	STEP="building the MaxText runtime"
	mapfile -t mirrors < <(maxtext_mirrors)
	h=$({
		printf '%s\n' v1 "$MAXTEXT_SUITE" "${mirrors[@]}"
		cat "$MAXTEXT_SRC_DIR/requirements.txt" "$MAXTEXT_SRC_DIR/python3"
	} | sha256sum | cut -c1-12)
	[[ $(cat "$MAXTEXT_RUNTIME/input-hash" 2>/dev/null) == "$h" ]] && return 0
	say "building the MaxText runtime: Python 3.13 ($MAXTEXT_SUITE) and MaxText 0.2.5 (once per machine; ~1 min)"
	part=$MAXTEXT_RUNTIME.part
	rm -rf "$part"
	UNDO+=("rm -rf $part")
	root=$part/rootfs
	mkdir -p "$part"
	"$BIN_mmdebstrap" --variant=minbase --include=python3,python3-pip,ca-certificates \
		"$MAXTEXT_SUITE" "$root" "${mirrors[@]}" </dev/null >>"$LOG" 2>&1
	# pip runs in the root filesystem, trusting what the host trusts (a site's proxy CA included)
	cp /etc/ssl/certs/ca-certificates.crt "$root/tmp/host-ca.crt"
	cp -L /etc/resolv.conf "$root/etc/resolv.conf"
	cp "$MAXTEXT_SRC_DIR/requirements.txt" "$root/tmp/requirements.txt"
	env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 PIP_CERT=/tmp/host-ca.crt \
		${PIP_INDEX_URL:+PIP_INDEX_URL="$PIP_INDEX_URL"} ${PIP_DEFAULT_TIMEOUT:+PIP_DEFAULT_TIMEOUT="$PIP_DEFAULT_TIMEOUT"} \
		chroot "$root" python3 -m pip install --quiet --no-cache-dir --no-deps --break-system-packages \
		--root-user-action=ignore --ignore-installed --no-warn-script-location -r /tmp/requirements.txt </dev/null >>"$LOG" 2>&1
	triplet=$(chroot "$root" python3 -c 'import sysconfig; print(sysconfig.get_config_var("MULTIARCH"))')
	loader=$(find "$root/usr/lib/$triplet" -maxdepth 1 -name 'ld-linux-*.so.*' -printf '%f\n' | sort | head -n1)
	mkdir -p "$part/opt/cvs-maxtext/bin"
	mv "$root/usr" "$part/opt/cvs-maxtext/usr"
	rm -rf "$root" "$part/opt/cvs-maxtext/usr/share/"{doc,man,locale,info}
	sed -e "s/@TRIPLET@/$triplet/g" -e "s/@LOADER@/$loader/g" "$MAXTEXT_SRC_DIR/python3" >"$part/opt/cvs-maxtext/bin/python3"
	chmod 0755 "$part/opt/cvs-maxtext/bin/python3"
	"$part/opt/cvs-maxtext/bin/python3" -c 'import jax, maxtext' >>"$LOG" 2>&1 ||
		die "the MaxText runtime does not import jax and maxtext (log: $LOG)"
	cp "$MAXTEXT_SRC_DIR/Dockerfile" "$part/Dockerfile"
	printf '%s\n' "$h" >"$part/input-hash"
	rm -rf "$MAXTEXT_RUNTIME"
	mv "$part" "$MAXTEXT_RUNTIME"
	say "MaxText runtime built in $((SECONDS - t0)) s: $(du -sh "$MAXTEXT_RUNTIME/opt/cvs-maxtext" | cut -f1)"
}

# $MAXTEXT_IMAGE: the node image plus the runtime, rebuilt when either changes.
ensure_maxtext_image() {
	local h
	STEP="building $MAXTEXT_IMAGE"
	h=$(printf '%s\n' "$IMAGE_ID" "$MAXTEXT_HASH" | sha256sum | cut -c1-16)
	MAXTEXT_IMAGE_ID=$(build_image "$MAXTEXT_IMAGE" "$h" "$MAXTEXT_RUNTIME" "NODE_IMAGE=$NODE_IMAGE")
}

# ---------------------------------------------------------------- stand-ins

# "src<TAB>dst" for every bind mount of the stand-ins tree: opt/<x> onto
# /opt/<x>; any other top-level entry T onto /T when /T does not exist, else
# descend (so an existing system directory such as /usr is never hidden).
# Mount points up.sh created earlier (OUR_MOUNTPOINTS) count as absent.
declare -A OUR_MOUNTPOINTS=()

load_our_mountpoints() {
	local kind path
	OUR_MOUNTPOINTS=()
	[[ -f $STATE_DIR/mountpoints ]] || return 0
	while read -r kind path; do
		[[ -n $path ]] && OUR_MOUNTPOINTS[$path]=$kind
	done <"$STATE_DIR/mountpoints"
	return 0
}

standin_walk() {
	local src=$1 dst=$2 c
	if [[ ! -e $dst && ! -L $dst ]] || [[ -n ${OUR_MOUNTPOINTS[$dst]:-} ]]; then
		printf '%s\t%s\n' "$src" "$dst"
	elif [[ -d $src && ! -L $src && -d $dst && ! -L $dst ]]; then
		for c in "$src"/* "$src"/.[!.]*; do
			[[ -e $c || -L $c ]] || continue
			standin_walk "$c" "$dst/${c##*/}"
		done
	elif [[ -f $src && -f $dst ]]; then
		printf '%s\t%s\n' "$src" "$dst"
	else
		warn "stand-in $src skipped: $dst exists and is not of the same type"
	fi
}

standin_binds() {
	local e c name
	[[ -d $STANDINS_DIR ]] || return 0
	for e in "$STANDINS_DIR"/* "$STANDINS_DIR"/.[!.]*; do
		[[ -e $e || -L $e ]] || continue
		name=${e##*/}
		[[ $name == README.md ]] && continue
		if [[ $name == opt && -d $e ]]; then
			for c in "$e"/* "$e"/.[!.]*; do
				[[ -e $c || -L $c ]] || continue
				local src_dir=0 dst_dir=0
				[[ -d $c ]] && src_dir=1
				[[ -d /opt/${c##*/} ]] && dst_dir=1
				if [[ -e /opt/${c##*/} ]] && ((src_dir != dst_dir)); then
					warn "stand-in $c skipped: /opt/${c##*/} exists and is not of the same type"
					continue
				fi
				printf '%s\t%s\n' "$c" "/opt/${c##*/}"
			done
		else
			standin_walk "$e" "/$name"
		fi
	done
}

record_mountpoint() {
	printf '%s\n' "$1" >>"$STATE_DIR/mountpoints"
	NEW_MOUNTPOINTS+=("$1")
}

ensure_mountpoint() {
	local src=$1 dst=$2 p missing=()
	[[ -e $dst ]] && return 0
	p=${dst%/*}
	while [[ -n $p && ! -e $p ]]; do
		missing=("$p" "${missing[@]}")
		p=${p%/*}
	done
	for p in "${missing[@]}"; do
		mkdir "$p"
		record_mountpoint "d $p"
	done
	if [[ -d $src ]]; then
		mkdir "$dst"
		record_mountpoint "d $dst"
	else
		: >"$dst"
		record_mountpoint "f $dst"
	fi
}

node_apply_binds() {
	local name=$1 list=$BIND_LIST src dst mode=ro
	[[ ${CVS_SIM_STANDINS_RW:-0} == 1 ]] && mode=rw
	[[ -n $list ]] || return 0
	while IFS=$'\t' read -r src dst; do
		ensure_mountpoint "$src" "$dst"
	done <<<"$list"
	# shellcheck disable=SC2016
	nsrun "$name" /bin/sh -c '
		tab=$(printf "\t")
		while IFS=$tab read -r src dst; do
			mountpoint -q "$dst" && continue
			mount --bind "$src" "$dst"
			[ "$1" = ro ] && mount -o remount,bind,ro "$dst"
		done
	' sh "$mode" <<<"$list" >>"$LOG" 2>&1
}

# ---------------------------------------------------------------- nodes

# Runs as the node's init after unshare: sets up the private mounts, then
# becomes a zombie-reaping init (python) that lives as long as the node.
# shellcheck disable=SC2016
HOLDER_SCRIPT='
set -eu
hostname "$1"
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t tmpfs -o mode=0700 tmpfs /root
if [ -d /dev/shm ]; then mount -t tmpfs -o mode=1777 tmpfs /dev/shm; fi
mkdir -p -m 0700 /root/.ssh
cat "$2" >/root/.ssh/authorized_keys
chmod 0600 /root/.ssh/authorized_keys
mount --bind "$3" /etc/hosts
# Drop copies of host mounts a node must not pin: netns handles, host engine.
awk "\$5 ~ \"^/run/netns(/|\$)|^/var/lib/docker(/|\$)|^/run/docker(/|\$)|^/var/run/docker(/|\$)\" {print \$5}" /proc/self/mountinfo |
	sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
cd /
exec "$4" -c "
import os, signal, time
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
while True:
    try:
        os.wait()
    except ChildProcessError:
        time.sleep(1)
"
'

node_start_holder() {
	local name=$1 ns=$2 dir var upid init i
	dir=$(node_dir "$name")
	var=$(node_var "$name")
	rm -f "$dir/holder.pid" "$dir/init.pid"
	setsid nsenter --net="/run/netns/$ns" unshare --mount --uts --ipc --pid --fork --kill-child \
		--mount-proc --propagation private -- /bin/sh -c "$HOLDER_SCRIPT" holder \
		"$name" "$GEN_DIR/id_ed25519.pub" "$STATE_DIR/hosts" "$PYTHON" \
		</dev/null >>"$var/init.log" 2>&1 9>&- &
	upid=$!
	printf '%s\n' "$upid" >"$dir/holder.pid"
	for ((i = 0; i < 100; i++)); do
		init=$(tr -dc '0-9 ' <"/proc/$upid/task/$upid/children" 2>/dev/null | awk '{print $1}' || true)
		if [[ -n $init && $(proc_comm "$init") == python3 ]]; then
			printf '%s\n' "$init" >"$dir/init.pid"
			return 0
		fi
		pid_alive "$upid" || break
		sleep 0.1
	done
	die "$name: the node init did not start (log: $var/init.log)"
}

ensure_node() {
	local k=$1 name ns ip veth dir var healthy=1 rc
	name=$(node_name "$k")
	ns=$(node_ns "$k")
	ip=$(node_ip "$k")
	veth=$(node_veth "$k")
	dir=$(node_dir "$name")
	var=$(node_var "$name")
	STEP="creating $name"

	node_init_pid "$name" >/dev/null || healthy=0
	[[ -f $dir/node.env ]] || healthy=0
	if ((healthy == 0)); then
		# New (or dead) node: on failure the whole node goes again.
		UNDO+=("node_teardown $name")
		node_teardown "$name"
		say "creating $name ($ip)"
	fi
	mkdir -p "$dir" "$var"
	printf 'NAME=%s\nNS=%s\nIP=%s\nVETH=%s\nINDEX=%s\nSSH_PORT=%s\n' \
		"$name" "$ns" "$ip" "$veth" "$((k - 1))" "$SSH_PORT" >"$dir/node.env"

	[[ -e /run/netns/$ns ]] || ip netns add "$ns"
	if ! ip -n "$ns" link show eth0 >/dev/null 2>&1; then
		ip link del "$veth" 2>/dev/null || true
		ip link add "$veth" type veth peer name eth0 netns "$ns"
	fi
	ip link set "$veth" master "$BRIDGE" up
	ip -n "$ns" link set lo up
	if [[ $(ip -n "$ns" -o -4 addr show dev eth0) != *" $ip/24 "* ]]; then
		ip -n "$ns" addr add "$ip/24" dev eth0
	fi
	ip -n "$ns" link set eth0 up
	# On-link default route: Ansible finds ansible_default_ipv4; nothing is
	# routed beyond br-cvs.
	ip -n "$ns" route replace default dev eth0

	node_init_pid "$name" >/dev/null || node_start_holder "$name" "$ns"
	STEP="$name: stand-in bind mounts"
	node_apply_binds "$name"
	STEP="$name: authorized_keys"
	nsrun "$name" /bin/sh -c 'cat >/root/.ssh/authorized_keys.tmp && mv -f /root/.ssh/authorized_keys.tmp /root/.ssh/authorized_keys' \
		<"$GEN_DIR/id_ed25519.pub"

	STEP="$name: starting sshd"
	if [[ -z $(node_sshd_pid "$name") ]]; then
		if ((healthy)); then
			say "$name: starting sshd (was not running)"
			UNDO+=("node_stop_sshd $name")
		fi
		rc=0
		node_start_sshd "$name" || rc=$?
		((rc != 2)) || die "port $SSH_PORT on $name ($ip) is already in use"
		((rc == 0)) || die "$name: sshd did not start (log: $var/sshd.log)"
	else
		node_write_sshd_config "$name"
		node_start_sshd "$name"
	fi

	STEP="$name: starting dockerd"
	if [[ -z $(node_dockerd_pid "$name") ]] || ! docker_ok "$(node_sock "$name")"; then
		if ((healthy)); then
			say "$name: starting dockerd (was not running)"
			UNDO+=("node_stop_engine $name")
		fi
		node_start_engine "$name" || die "$name: dockerd did not come up (log: $var/dockerd.log)"
	fi
}

remove_extra_nodes() {
	local n
	for n in $(recorded_nodes); do
		((${n#node} > NODES)) || continue
		STEP="removing $n"
		say "removing $n (NODES=$NODES)"
		node_teardown "$n" >>"$LOG" 2>&1
	done
}

# ---------------------------------------------------------------- generated files

# cluster.json, inventory-{baremetal,container[,podman]}.yml and ssh_config,
# each written atomically by gen_inventories.py (stdlib Python).
write_generated() {
	STEP="writing tests/cluster/generated"
	local podman=()
	if ((HAVE_PODMAN)); then podman=(--podman); fi
	"$PYTHON" "$CVS_SIM_DIR/gen_inventories.py" --out "$GEN_DIR" --nodes "$NODES" --subnet "$SUBNET" \
		--ssh-port "$SSH_PORT" --bridge "$BRIDGE" --key "$GEN_DIR/id_ed25519" --image "$NODE_IMAGE" \
		--image-id "$IMAGE_ID" --maxtext-image "$MAXTEXT_IMAGE" --ctl "$CVS_SIM_DIR/ctl.sh" --state-dir "$STATE_DIR" --var-dir "$VAR_DIR" \
		"${podman[@]}" </dev/null >>"$LOG" 2>&1
}

# ---------------------------------------------------------------- main

main() {
	require_root
	validate_input
	# every node mounts its own tmpfs on /tmp, which would hide a checkout (keys, stand-ins) kept there
	case $REPO_ROOT/ in
	/tmp/*) die "the checkout $REPO_ROOT is under /tmp, which each simulated node replaces with a private tmpfs; move it elsewhere (e.g. /var/tmp or /srv)" ;;
	esac
	require_bins ip sshd dockerd mmdebstrap docker nsenter unshare iptables ssh-keygen ss flock setsid chroot
	take_lock 900
	check_recorded_state
	check_subnet_free
	check_node_addresses_free
	check_ports_free

	NEW_MOUNTPOINTS=()
	ensure_dirs
	UNDO+=(undo_mountpoints)
	load_our_mountpoints
	# the MaxText runtime waits on the network and pip, the image on mmdebstrap and docker: build them side by side
	ensure_maxtext_runtime &
	local runtime_pid=$!
	UNDO+=("pkill -TERM -P $runtime_pid; kill -TERM $runtime_pid")
	ensure_key
	write_hosts
	ensure_host_dockerd
	ensure_bridge
	ensure_image
	STEP="building the MaxText runtime"
	wait "$runtime_pid" || die "the MaxText runtime could not be built (log: $LOG)"
	MAXTEXT_HASH=$(cat "$MAXTEXT_RUNTIME/input-hash")
	BIND_LIST=$(
		standin_binds
		printf '%s\t%s\n' "$MAXTEXT_RUNTIME/opt/cvs-maxtext" /opt/cvs-maxtext
	)
	ensure_maxtext_image
	local k
	for ((k = 1; k <= NODES; k++)); do
		ensure_node "$k"
	done
	remove_extra_nodes
	for ((k = 1; k <= NODES; k++)); do
		ensure_node_image "$(node_name "$k")"
		ensure_node_image "$(node_name "$k")" "$MAXTEXT_IMAGE" "$MAXTEXT_IMAGE_ID"
	done
	HAVE_PODMAN=0
	if command -v podman >/dev/null 2>&1; then
		HAVE_PODMAN=1
		for ((k = 1; k <= NODES; k++)); do
			ensure_node_podman "$(node_name "$k")"
		done
	fi
	write_generated
	UNDO=()
	say "cluster is up: $NODES node(s) on $SUBNET.0/24 in $((SECONDS - T0)) s"
	say "inventories: $GEN_DIR/inventory-baremetal.yml $GEN_DIR/inventory-container.yml$(if ((HAVE_PODMAN)); then printf " %s" "$GEN_DIR/inventory-podman.yml"; fi)"
}

main "$@"
