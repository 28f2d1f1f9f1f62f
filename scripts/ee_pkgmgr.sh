#!/bin/sh
# The package manager ansible-builder calls while it builds execution-environment.yml (options.package_manager_path)
# on a Debian base, in the two forms its scripts use:
#   ee_pkgmgr.sh install [-y] PACKAGE...   installs, with apt-get, the packages that are not installed yet
#                                          (nothing to fetch, no apt-get update, when the base has them all)
#   ee_pkgmgr.sh clean all                 empties apt's caches
set -eu
command=${1:-}
[ $# -gt 0 ] && shift
case $command in
  install)
    missing=
    for package in "$@"; do
      case $package in -*) continue ;; esac
      if ! dpkg-query -W -f '${Status}\n' "$package" 2>/dev/null | grep -q ' installed$'; then
        missing="$missing $package"
      fi
    done
    [ -n "$missing" ] || exit 0
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    # shellcheck disable=SC2086  # one word per package
    apt-get install -y --no-install-recommends $missing
    ;;
  clean)
    apt-get clean
    rm -rf /var/lib/apt/lists/*
    ;;
  *)
    echo "ee_pkgmgr.sh: unsupported command '$command' (install PACKAGE... | clean all)" >&2
    exit 2
    ;;
esac
