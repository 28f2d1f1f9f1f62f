# shellcheck shell=sh
# scratch.sh ROOT RUN_ID SCRATCH DAYS, run by cvs.cluster.prepare on every workload host (values are arguments,
# never part of this script): create the run's scratch directory SCRATCH (mode 0755, as its missing parents), mark
# ROOT/RUN_ID as a scratch directory this role made (.cvs-scratch holding the run id, written once), then remove
# every marked directory under ROOT (depth 2 at most) whose marker is DAYS days old or older; prints each removed
# directory.
set -eu
root=$1 run=$2 scratch=$3 days=$4
umask 022
mkdir -p -- "$scratch"
chmod 0755 -- "$scratch"
marker=$root/$run/.cvs-scratch
if [ ! -e "$marker" ]; then
    printf '%s\n' "$run" >"$marker"
    chmod 0644 -- "$marker"
fi
# -mtime +N matches files modified at least N+1 whole days ago; 0 days matches every marker
if [ "$days" -gt 0 ]; then
    set -- -mtime "+$((days - 1))"
else
    set --
fi
# like ansible.builtin.find, skip what vanishes while it looks (the nodes of one run may share ROOT)
old=$(find "$root" -maxdepth 2 -type f -name .cvs-scratch "$@" 2>/dev/null) || true
printf '%s\n' "$old" | while IFS= read -r found; do
    [ -n "$found" ] || continue
    dir=$(dirname -- "$found")
    rm -rf -- "$dir"
    printf '%s\n' "$dir"
done
