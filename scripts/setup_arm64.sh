#!/usr/bin/env bash
# Prepares what the aarch64 cross-build and its emulated tests need, on an
# x86-64 Debian 12 machine, idempotently (seconds when it is all there):
#   * Debian packages: the cross compiler (crossbuild-essential-arm64, GCC 12),
#     qemu-user (qemu-aarch64) and mmdebstrap;
#   * an arm64 sysroot in $ARM64_SYSROOT (default .cache/sysroot-arm64) with the
#     project's -dev libraries, unpacked from Debian's own arm64 packages by
#     mmdebstrap --variant=extract (no maintainer scripts, no emulation, and no
#     foreign architecture added to the host's dpkg).
# Then cmake --preset linux-arm64-cross && cmake --build build-arm64 builds tern
# for aarch64; scripts/test_arm64.sh runs its tests under qemu-aarch64.
# The recipe is ../shared/design/ARM-CROSS.md's.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
S=${ARM64_SYSROOT:-$ROOT/.cache/sysroot-arm64}
log() { echo "[setup-arm64] $*" >&2; }
t0=$(date +%s)
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"

PKGS=(crossbuild-essential-arm64 qemu-user mmdebstrap)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The arm64 packages the build links against; bookworm keeps glibc and
# libstdc++ equal to the cross compiler's (Boost must be 1.81: bookworm's
# libboost-dev is 1.74).
SYSROOT_PKGS=libc6-dev,libstdc++-12-dev,libboost1.81-dev,nlohmann-json3-dev,libspdlog-dev,libfmt-dev,libuv1-dev,libssl-dev,libwebp-dev,libavformat-dev,libavcodec-dev,libswscale-dev,libavutil-dev,libcli11-dev,libgtest-dev,libgmock-dev,libstb-dev,zlib1g-dev
stamp="$S/.tern-packages"
if [ "$(cat "$stamp" 2>/dev/null)" != "$SYSROOT_PKGS" ]; then
  # The mirror this machine's apt uses (deb822 or one-line sources), never a hard-coded host.
  mirror=""
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    u=$(awk '/^URIs:/ {print $2; exit}' "$f")
    case "$u" in *debian-security*) ;; */debian) mirror=${u%/debian}; break ;; esac
  done
  if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
    u=$(awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) {print $i; exit}}' /etc/apt/sources.list)
    mirror=${u%/debian}
  fi
  [ -n "$mirror" ] || { echo "[setup-arm64] no Debian mirror found in /etc/apt/sources.list*" >&2; exit 1; }
  log "unpacking an arm64 sysroot into $S from $mirror (about 30 s, 515 MB)"
  rm -rf "$S.part"
  mkdir -p "$(dirname "$S")"
  mmdebstrap --quiet --arch=arm64 --variant=extract --include="$SYSROOT_PKGS" bookworm "$S.part" \
    "deb $mirror/debian bookworm main" "deb $mirror/debian bookworm-updates main" \
    "deb $mirror/debian-security bookworm-security main" >/dev/null
  # Absolute symlinks inside the packages would lead the linker out of the
  # sysroot: make them relative.
  (cd "$S.part" && find . -type l -lname '/*' ! -path './dev/*' -print0 |
    while IFS= read -r -d '' l; do
      t=$(readlink "$l")
      ln -sfn "$(realpath -m --relative-to="$(dirname "$l")" ".$t")" "$l"
    done)
  rm -rf "$S"
  mv "$S.part" "$S"
  echo "$SYSROOT_PKGS" > "$stamp"
fi
log "ready in $(($(date +%s) - t0)) s (sysroot $S)"
