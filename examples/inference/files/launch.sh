#!/usr/bin/env bash
# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# Runs one job of examples/inference (docs/extending.md) in the foreground of its own process group:
#   setsid env CVS_EXAMPLE_JOB=<dir>/<name> nohup bash launch.sh <dir> <name> <command> [args...] &
# Records the process group in <dir>/<name>.pgid, appends the command's stdout and stderr to <dir>/<name>.log and
# writes its exit status to <dir>/<name>.exit. stop.sh <dir> <name> signals that group and nothing else.
set -u
dir=$1
name=$2
shift 2
cd "$dir" || exit 1
read -r _ _ _ _ pgid _ </proc/$$/stat
echo "$pgid" >"$name.pgid.tmp" && mv -f "$name.pgid.tmp" "$name.pgid"
exec >>"$name.log" 2>&1 </dev/null
export PYTHONUNBUFFERED=1
"$@"
rc=$?
echo "$rc" >"$name.exit.tmp" && mv -f "$name.exit.tmp" "$name.exit"
exit "$rc"
