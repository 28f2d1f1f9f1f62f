#!/usr/bin/env bash
# Build the execution environment of execution-environment.yml on a machine that reaches no container registry and
# whose pip reaches the package index (or its mirror) only from the host, with the host's dockerd:
#
#   1. the base image localhost/cvs-cluster-ee-base:trixie: Debian 13 (trixie, Python 3.13) from Debian's
#      packages with mmdebstrap (the mirrors of the host's apt sources), imported into docker. It already holds
#      what the definition's first step would install (python3, pip, venv, an SSH client), so that step fetches
#      nothing
#   2. the wheelhouse .cache/ee/wheelhouse: `pip download` on the host of every wheel the image build installs
#      (ansible-core and ansible-runner as the definition asks, meta/ee-requirements.txt, ansible-builder's own
#      bindep, pyyaml, packaging and dumb-init), pinned by constraints-core2.21.txt; in the build context, it is
#      all the build's pip reads (the definition's first step)
#   3. .cache/ee/collections: community.docker and its dependency as installed for the second controller line
#      (scripts/controller_line.sh setup: from Galaxy, else from the `ansible` wheel); the galaxy stage copies them
#      and its `ansible-galaxy collection install` runs with --offline
#   4. the collection's tarball (ansible-galaxy collection build) and `ansible-builder build` in a work directory
#      (nothing is written into the checkout but .cache/ee)
#
# The image is tagged cvs-cluster-ee:<inputs hash> and cvs-cluster-ee:latest. When an image of that hash exists
# nothing is built: the hash covers the definition, this script, ee_pkgmgr.sh, the constraints, the base image,
# community.docker and the collection's files (its FILES.json). Each step is cached the same way, and docker's layer
# cache keeps a rebuild after a change of the collection alone to its last stages.
#
# Prints the image (cvs-cluster-ee:<hash>) as its last line. Progress and the build log go to stderr and
# .cache/ee/build.log. Needs root (mmdebstrap, docker), mmdebstrap and docker.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

IMAGE=cvs-cluster-ee
BASE_IMAGE=localhost/cvs-cluster-ee-base:trixie
BASE_SUITE=trixie
BASE_PACKAGES=python3,python3-pip,python3-venv,openssh-client,ca-certificates
LABEL=org.cvs-cluster.ee.input-hash
EE_DIR=$root/.cache/ee
LOG=$EE_DIR/build.log
LINE_VENV=$root/.cache/venv-core2.21
LINE_COLLECTIONS=$root/.cache/collections-core2.21/ansible_collections
# what ansible-builder installs besides the definition's packages: the builder stage's tools and the final stage's
# init (the default of options.container_init)
BUILDER_PACKAGES=(bindep pyyaml packaging dumb-init)

say() { printf 'ee_build: %s\n' "$*" >&2; }
die() {
  say "$*"
  exit 1
}
hash_of() { sha256sum | cut -c1-16; }
image_label() { docker image inspect -f "{{ index .Config.Labels \"$LABEL\" }}" "$1" 2>/dev/null || true; }

mkdir -p "$EE_DIR"
: >"$LOG"
for bin in docker mmdebstrap; do
  command -v "$bin" >/dev/null || die "$bin is not installed (apt-get install $bin)"
done
docker info >/dev/null 2>&1 || die "docker does not answer on its socket: start dockerd"

# Debian's mirrors as the host's apt sources name them, moved to $BASE_SUITE (-updates and -security alike)
mirrors() {
  local codename
  # shellcheck disable=SC1091  # the host's
  codename=$(. /etc/os-release && printf '%s' "${VERSION_CODENAME:-}")
  {
    for f in /etc/apt/sources.list.d/*.sources; do
      [[ -f $f ]] || continue
      awk 'tolower($1) == "uris:" { $1 = ""; uris = $0 } tolower($1) == "suites:" { $1 = ""; print uris "|" $0 }' "$f"
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
      [[ -f $f ]] || continue
      sed -E 's/\[[^]]*\]//' "$f" | awk '$1 == "deb" { print $2 "|" $3 }'
    done
  } | while IFS='|' read -r uris suites; do
    for uri in $uris; do
      for suite in $suites; do
        [[ -z $codename || $suite == "$codename" || $suite == "$codename"-* ]] || continue
        printf 'deb %s %s main\n' "$uri" "$BASE_SUITE${suite#"$codename"}"
      done
    done
  done | sort -u
}

build_base() {
  local h tar list
  list=$(mirrors)
  [[ -n $list ]] || die "no Debian mirror in the host's apt sources (/etc/apt/sources.list*)"
  h=$(printf '%s\n' v1 "$BASE_SUITE" "$BASE_PACKAGES" "$list" | hash_of)
  [[ $(image_label "$BASE_IMAGE") == "$h" ]] && return 0
  say "building $BASE_IMAGE from Debian $BASE_SUITE packages (mmdebstrap; about a minute)"
  tar=$EE_DIR/base.tar
  mapfile -t sources <<<"$list"
  # shellcheck disable=SC2016  # $1 is the hook's argument, the root filesystem
  mmdebstrap --variant=minbase --include="$BASE_PACKAGES" --format=tar \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/usr/share/doc "$1"/usr/share/man' \
    "$BASE_SUITE" "$tar" "${sources[@]}" </dev/null >>"$LOG" 2>&1 ||
    die "mmdebstrap failed (log: $LOG)"
  docker import --change "LABEL $LABEL=$h" --change 'CMD ["bash"]' "$tar" "$BASE_IMAGE" >>"$LOG" 2>&1 ||
    die "docker import of the base root filesystem failed (log: $LOG)"
  rm -f "$tar"
}

# the ansible-core and ansible-runner requirements of the definition
definition_packages() {
  "$LINE_VENV/bin/python" - <<'EOF'
import yaml

deps = yaml.safe_load(open("execution-environment.yml"))["dependencies"]
for key in ("ansible_core", "ansible_runner"):
    print(deps[key]["package_pip"])
EOF
}

# $1: the pip requirements the build's introspection finds in the collections (ansible-builder introspect)
build_wheelhouse() {
  local collection_reqs=$1 h wheels=$EE_DIR/wheelhouse
  local -a wanted
  mapfile -t wanted < <(definition_packages)
  wanted+=("${BUILDER_PACKAGES[@]}")
  h=$({
    printf '%s\n' v1 "${wanted[@]}"
    cat "$collection_reqs" meta/ee-requirements.txt constraints-core2.21.txt
  } | hash_of)
  [[ -f $wheels/.stamp && $(<"$wheels/.stamp") == "$h" ]] && return 0
  say "downloading the image's wheels into $wheels (pip download; Python 3.13)"
  rm -rf "$wheels"
  mkdir -p "$wheels"
  # the line's Python 3.13 on this x86_64 host: the wheels pip picks are the ones Debian trixie's Python takes
  "$LINE_VENV/bin/pip" download --disable-pip-version-check --only-binary=:all: -d "$wheels" \
    -c constraints-core2.21.txt -r "$collection_reqs" "${wanted[@]}" >>"$LOG" 2>&1 ||
    die "pip download failed (log: $LOG)"
  printf '%s\n' "$h" >"$wheels/.stamp"
}

# community.docker and community.library_inventory_filtering_v1 as installed, for the galaxy stage to copy
build_collections() {
  local out=$EE_DIR/collections/ansible_collections/community name
  [[ -f $LINE_COLLECTIONS/community/docker/MANIFEST.json ]] ||
    die "no community.docker in $LINE_COLLECTIONS (bash scripts/controller_line.sh setup)"
  rm -rf "$EE_DIR/collections"
  mkdir -p "$out"
  for name in docker library_inventory_filtering_v1; do
    cp -rL "$LINE_COLLECTIONS/community/$name" "$out/$name"
  done
  find "$out" -name __pycache__ -prune -exec rm -rf {} +
}

main() {
  local work tarball h
  bash scripts/controller_line.sh setup >>"$LOG" 2>&1 ||
    die "the ansible-core 2.21 line could not be set up (log: $LOG)"
  build_base
  build_collections
  work=$(mktemp -d /var/tmp/cvs-ee.XXXXXX)
  # shellcheck disable=SC2064  # expand now
  trap "rm -rf '$work'" EXIT
  "$LINE_VENV/bin/ansible-galaxy" collection build --output-path "$work" "$root" >>"$LOG" 2>&1 ||
    die "ansible-galaxy collection build failed (log: $LOG)"
  tarball=$(compgen -G "$work/cvs-cluster-*.tar.gz")
  # the collections as the image will hold them, for the pip requirements ansible-builder finds in them
  cp -r "$EE_DIR/collections" "$work/introspect"
  "$LINE_VENV/bin/ansible-galaxy" collection install --no-deps -p "$work/introspect" "$tarball" >>"$LOG" 2>&1 ||
    die "ansible-galaxy collection install of $tarball failed (log: $LOG)"
  "$LINE_VENV/bin/ansible-builder" introspect --write-pip "$work/requirements.txt" "$work/introspect" >>"$LOG" 2>&1 ||
    die "ansible-builder introspect failed (log: $LOG)"
  build_wheelhouse "$work/requirements.txt"
  h=$({
    printf '%s\n' v1 "$(docker image inspect -f '{{.Id}}' "$BASE_IMAGE")"
    cat execution-environment.yml scripts/ee_build.sh scripts/ee_pkgmgr.sh constraints-core2.21.txt \
      "$EE_DIR/wheelhouse/.stamp"
    tar -xOzf "$tarball" FILES.json
    cat "$EE_DIR"/collections/ansible_collections/community/*/MANIFEST.json
  } | hash_of)
  if [[ $(image_label "$IMAGE:$h") == "$h" ]]; then
    say "$IMAGE:$h is up to date"
  else
    say "building $IMAGE:$h with ansible-builder (log: $LOG)"
    # the definition, and what it names relative to itself, in the work directory
    cp execution-environment.yml "$work/"
    mkdir -p "$work/scripts" "$work/.cache"
    cp scripts/ee_pkgmgr.sh "$work/scripts/"
    ln -s "$EE_DIR" "$work/.cache/ee"
    (
      cd "$work"
      DOCKER_BUILDKIT=0 "$LINE_VENV/bin/ansible-builder" build -f execution-environment.yml -c context \
        --container-runtime docker -t "$IMAGE:$h" -v 2 \
        --build-arg "EE_BASE_IMAGE=$BASE_IMAGE" \
        --build-arg ANSIBLE_GALAXY_CLI_COLLECTION_OPTS=--offline \
        --extra-build-cli-args "--label $LABEL=$h"
    ) </dev/null >>"$LOG" 2>&1 || die "ansible-builder build failed (log: $LOG)"
    # earlier builds of this image
    docker images --format '{{.Repository}}:{{.Tag}}' "$IMAGE" | grep -vxF -e "$IMAGE:$h" -e "$IMAGE:latest" |
      xargs -r docker rmi >>"$LOG" 2>&1 || true
  fi
  docker tag "$IMAGE:$h" "$IMAGE:latest"
  printf '%s\n' "$IMAGE:$h"
}

main "$@"
