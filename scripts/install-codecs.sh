#!/usr/bin/env bash
# Installs the native JPEG decoder segtune loads at run time when it is
# there (imageio/internal/nativecodec, dlopen): Debian's libturbojpeg0
# (libjpeg-turbo's TurboJPEG API). segtune builds and runs without it,
# decoding with Go's image/jpeg instead, about 2x slower. Only the run-time
# library is needed: no headers, no -dev package. PNG is Go's image/png.
# Idempotent and quiet: does nothing when it is there already.
# --check only reports (exit 0 when installed), never installs.
set -euo pipefail

PKGS=(libturbojpeg0)

say() { echo "install-codecs: $*" >&2; }

have() {
  command -v ldconfig >/dev/null 2>&1 || return 1
  local libs
  libs=$(ldconfig -p 2>/dev/null || /sbin/ldconfig -p)
  grep -q 'libturbojpeg\.so\.0 ' <<<"$libs"
}

if have; then
  exit 0
fi
if [ "${1:-}" = "--check" ]; then
  say "libturbojpeg.so.0 is not installed"
  exit 1
fi

. "$(dirname "$0")/apt.sh"
apt_install "libturbojpeg.so.0 is missing" \
  "install libjpeg-turbo's TurboJPEG library (Debian: ${PKGS[*]}) yourself" "${PKGS[@]}" || exit 1

if ! have; then
  say "installed ${PKGS[*]}, but ldconfig still does not list libturbojpeg.so.0"
  exit 1
fi
