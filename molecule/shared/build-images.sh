#!/usr/bin/env bash
# Build the container-host base images for the molecule scenarios from Debian's packages.
#
# No image registry is reachable from every site (nor from CI), so the images are made
# with debootstrap and `podman import`.  Each image is tagged
#   localhost/sparkforge-bookworm:<arch>
# and labelled with a hash of its recipe; an image whose label matches is reused, and
# the root file system tarball is cached under ~/.cache/sparkforge/images/ so that a
# wiped podman store costs seconds, not minutes.  arm64 runs through qemu-user (binfmt).
#
# Usage: molecule/shared/build-images.sh [amd64] [arm64]      (default: both)
#        molecule/shared/build-images.sh --status ARCH...      prints, per arch, "current" (the image is there),
#                                                              "cached" (its root tarball is) or "build"
set -euo pipefail
status_only=false
if [ "${1:-}" = --status ]; then status_only=true; shift; fi

SUITE=bookworm
# What every host needs for Ansible and for the stack's build fixtures.  The roles still
# install what they need themselves; having it here only saves emulated minutes.
PACKAGES=python3,python3-apt,python3-venv,python3-dev,ca-certificates,gnupg,git,procps,gcc,g++,make,cmake,ninja-build,xz-utils,curl
# amd64 hosts also stand in for a cluster's nodes (tests/e2e/test_xhost_containers.py): sshd for the
# passwordless SSH between them, iproute2, and Debian's netplan.io to validate the fabric's drop-in.
PACKAGES_AMD64=$PACKAGES,openssh-server,iproute2,netplan.io
PACKAGES_ARM64=$PACKAGES
RECIPE_VERSION=2
CACHE_DIR=${SPARKFORGE_CACHE:-$HOME/.cache/sparkforge}/images

arches=("$@")
[ ${#arches[@]} -gt 0 ] || arches=(amd64 arm64)

# The Debian mirror this machine's apt uses (so mirrors and proxies configured for apt apply).
debian_mirror() {
  if [ -n "${SPARKFORGE_DEBIAN_MIRROR:-}" ]; then echo "$SPARKFORGE_DEBIAN_MIRROR"; return; fi
  local uri
  uri=$(grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v security | head -n1 || true)
  [ -n "$uri" ] || uri=$(grep -hE '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | head -n1 || true)
  [ -n "$uri" ] || { echo "no Debian mirror found in /etc/apt; set SPARKFORGE_DEBIAN_MIRROR" >&2; exit 1; }
  echo "$uri"
}

enable_binfmt() {
  if [ ! -e /proc/sys/fs/binfmt_misc/register ]; then
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
  fi
  if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
    update-binfmts --enable qemu-aarch64
  fi
  [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || { echo "qemu-aarch64 binfmt handler is not registered" >&2; exit 1; }
}

mkdir -p "$CACHE_DIR"

recipe_hash() {  # recipe_hash ARCH: the label an image of this recipe carries
  local packages=$PACKAGES_AMD64
  [ "$1" = arm64 ] && packages=$PACKAGES_ARM64
  printf '%s' "$RECIPE_VERSION $SUITE $1 $packages" | sha256sum | cut -c1-16
}
if $status_only; then
  for arch in "${arches[@]}"; do
    hash=$(recipe_hash "$arch")
    have=$(podman image inspect --format '{{ index .Labels "sparkforge.recipe" }}' "localhost/sparkforge-bookworm:$arch" \
           2>/dev/null || true)
    if [ "$have" = "$hash" ]; then echo "$arch current"
    elif [ -s "$CACHE_DIR/bookworm-$arch-$hash.tar" ]; then echo "$arch cached"
    else echo "$arch build"; fi
  done
  exit 0
fi

mirror=$(debian_mirror)
for arch in "${arches[@]}"; do
  case "$arch" in amd64|arm64) ;; *) echo "unsupported arch $arch (amd64, arm64)" >&2; exit 2;; esac
  # One builder per arch: a concurrent caller for the same arch waits, then finds the image current;
  # the two arches build side by side (scripts/test starts arm64's early, beside amd64's).
  exec 9>"$CACHE_DIR/.lock-$arch"
  flock 9
  [ "$arch" = arm64 ] && enable_binfmt
  packages=$PACKAGES_AMD64
  [ "$arch" = arm64 ] && packages=$PACKAGES_ARM64
  hash=$(recipe_hash "$arch")
  tag="localhost/sparkforge-bookworm:$arch"
  have=$(podman image inspect --format '{{ index .Labels "sparkforge.recipe" }}' "$tag" 2>/dev/null || true)
  if [ "$have" = "$hash" ]; then
    echo "image $tag is current ($hash)"
    continue
  fi
  tarball="$CACHE_DIR/bookworm-$arch-$hash.tar"
  if [ ! -s "$tarball" ]; then
    start=$(date +%s)
    root=$(mktemp -d "$CACHE_DIR/rootfs-$arch.XXXXXX")
    log="$CACHE_DIR/debootstrap-$arch.log"
    echo "debootstrap $SUITE $arch from $mirror (log: $log)"
    # Stage 1 runs natively for every arch: resolve, download and check the .debs, unpack the
    # essential ones.  Stage 2 runs the target's own dpkg inside the root (emulated for arm64):
    # unpacking and configuring every package, the part that qemu makes slow.
    if ! debootstrap --foreign --variant=minbase --arch="$arch" --include="$packages" "$SUITE" "$root" "$mirror" \
        >"$log" 2>&1; then
      tail -n 30 "$log" >&2; rm -rf "$root"; exit 1
    fi
    mid=$(date +%s)
    # dpkg syncs every file it writes; a root that is thrown away on failure needs none of that.
    mkdir -p "$root/etc/dpkg/dpkg.cfg.d"
    echo force-unsafe-io > "$root/etc/dpkg/dpkg.cfg.d/sparkforge-build"
    if ! chroot "$root" /debootstrap/debootstrap --second-stage >>"$log" 2>&1; then
      tail -n 30 "$log" >&2; rm -rf "$root"; exit 1
    fi
    rm -f "$root/etc/dpkg/dpkg.cfg.d/sparkforge-build"
    end=$(date +%s)
    # Containers reach Debian over plain HTTP; keep the image's apt lists empty and small.
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    # openssh-server's postinst made host keys: every container would share them. A host makes its own.
    rm -f "$root"/etc/ssh/ssh_host_*
    tar -C "$root" -cf "$tarball.tmp" .
    mv "$tarball.tmp" "$tarball"
    rm -rf "$root"
    echo "rootfs $arch built in $(( $(date +%s) - start ))s: download and unpack (native) $((mid - start))s," \
      "install and configure ($([ "$arch" = "$(dpkg --print-architecture)" ] && echo native || echo emulated))" \
      "$((end - mid))s, $(echo "$packages" | tr ',' '\n' | wc -l) packages asked for"
  fi
  podman import --arch "$arch" --change "LABEL sparkforge.recipe=$hash" --change 'CMD ["sleep","infinity"]' \
    "$tarball" "$tag" >/dev/null
  echo "image $tag imported ($hash)"
done
