#!/usr/bin/env bash
# Install the Debian packages the simulated cluster (tests/cluster/) needs,
# only those missing; `apt-get update` runs only when something is missing.
#
#   sudo scripts/system-deps.sh
set -euo pipefail

PKGS=(
	docker.io       # dockerd per node + the host engine that builds the image
	openssh-server  # sshd per node
	openssh-client  # ssh / ssh-keygen for the harness and Ansible
	iptables        # FORWARD rule for br-cvs
	mmdebstrap      # base root filesystem of the test image
	iproute2        # ip netns / veth / bridge, ss
	procps          # ps, pgrep
	podman          # alternative container runtime
	uidmap          # newuidmap/newgidmap for podman
	python3         # the nodes' init process (zombie reaper); Ansible targets
	python3-requests # community.docker modules on the nodes (vendored API client)
	chromium         # the HTML report test opens report.html headless
	shellcheck       # ansible-test sanity shellcheck test
	sudo             # become with a password (tests/integration/test_become.py)
	openmpi-bin      # mpirun on the baremetal nodes (cvs.cluster.mpi, the rccl suite)
	python3-mpi4py   # the all_reduce_perf stand-in's real MPI_Allreduce
	slurmctld        # the simulated cluster's Slurm (tests/cluster/slurm.sh): controller in the head node,
	slurmd           # one slurmd per node,
	slurm-client     # sinfo, srun, scontrol, scancel,
	munge            # and its authentication
	make
)

if [[ $(id -u) -ne 0 ]]; then
	echo "system-deps: must run as root to install Debian packages (try: sudo $0)" >&2
	exit 1
fi

installed() {
	local status
	status=$(dpkg -s "$1" 2>/dev/null | sed -n 's/^Status: //p') || true
	[[ $status == "install ok installed" ]]
}

missing=()
for p in "${PKGS[@]}"; do
	installed "$p" || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
	echo "system-deps: all ${#PKGS[@]} packages already installed"
	exit 0
fi

echo "system-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# Packaged daemons (munge, slurmd, slurmctld) are not started: the simulated cluster starts its own.
policy=/usr/sbin/policy-rc.d
if [[ ! -e $policy ]]; then
	printf '#!/bin/sh\nexit 101\n' >"$policy"
	chmod 0755 "$policy"
	trap 'rm -f "$policy"' EXIT
fi
apt-get install -y -qq "${missing[@]}"
echo "system-deps: done"
