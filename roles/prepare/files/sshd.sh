# shellcheck shell=sh
# Runs inside the workload container: install the operator's key (stdin) and start sshd on port $1
# unless an sshd already runs here (persistent containers keep theirs).
set -eu
port="$1"
mkdir -p /root/.ssh /run/sshd
chmod 700 /root/.ssh
cat > /root/.ssh/authorized_keys
chmod 600 /root/.ssh/authorized_keys
if pgrep -x sshd >/dev/null 2>&1; then
  echo "sshd already running"
else
  ssh-keygen -A >/dev/null 2>&1 || true
  /usr/sbin/sshd -p "$port" -o PermitRootLogin=prohibit-password -o PasswordAuthentication=no -o UseDNS=no
  echo "sshd started on port $port"
fi
