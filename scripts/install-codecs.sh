#!/usr/bin/env bash
# Installs the native image decoders segtune loads at run time when they are
# there (imageio/internal/nativecodec, dlopen): Debian's libturbojpeg0
# (libjpeg-turbo's TurboJPEG API, JPEG) and libspng0 (PNG). segtune builds
# and runs without them, decoding with Go's image/jpeg and image/png
# instead, about 2x (JPEG) and 1.3x (PNG) slower. Only the run-time
# libraries are needed: no headers, no -dev packages.
# Idempotent and quiet: does nothing when both are there already.
# --check only reports (exit 0 when installed), never installs.
set -euo pipefail

PKGS=(libturbojpeg0 libspng0)

say() { echo "install-codecs: $*" >&2; }

have() {
  command -v ldconfig >/dev/null 2>&1 || return 1
  local libs
  libs=$(ldconfig -p 2>/dev/null || /sbin/ldconfig -p)
  grep -q 'libturbojpeg\.so\.0 ' <<<"$libs" && grep -q 'libspng\.so\.0 ' <<<"$libs"
}

if have; then
  exit 0
fi
if [ "${1:-}" = "--check" ]; then
  say "libturbojpeg.so.0 or libspng.so.0 is not installed"
  exit 1
fi

. "$(dirname "$0")/apt.sh"
apt_install "libturbojpeg.so.0 or libspng.so.0 is missing" \
  "install libjpeg-turbo's TurboJPEG library and libspng (Debian: ${PKGS[*]}) yourself" "${PKGS[@]}" || exit 1

if ! have; then
  say "installed ${PKGS[*]}, but ldconfig still does not list libturbojpeg.so.0 and libspng.so.0"
  exit 1
fi
