#!/usr/bin/env bash
# Finds or installs the ONNX Runtime shared library that segtune loads, and
# prints its path on the last line of standard output.
#
# Order: $ONNXRUNTIME_SHARED_LIBRARY_PATH (the user's own library), then the
# copy installed earlier in the per-user cache, then a fresh install from the
# npm package onnxruntime-node (fetched with `npm pack`, so none of its install
# scripts run), checked against a pinned SHA-256. Idempotent; offline once the
# cache holds the library.
set -euo pipefail

ORT_VERSION=1.30.0
ORT_TGZ_SHA256=6e3390d6b783e7be946fad629292799da28d0b42f84856e50d2c1b0383291e75
cache_root=${SEGTUNE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/segtune}
dest_dir=$cache_root/onnxruntime/$ORT_VERSION
dest=$dest_dir/libonnxruntime.so.1

say() { echo "install-ort: $*" >&2; }

if [ -n "${ONNXRUNTIME_SHARED_LIBRARY_PATH:-}" ]; then
  if [ -r "$ONNXRUNTIME_SHARED_LIBRARY_PATH" ]; then
    say "using ONNXRUNTIME_SHARED_LIBRARY_PATH=$ONNXRUNTIME_SHARED_LIBRARY_PATH"
    echo "$ONNXRUNTIME_SHARED_LIBRARY_PATH"
    exit 0
  fi
  say "ONNXRUNTIME_SHARED_LIBRARY_PATH=$ONNXRUNTIME_SHARED_LIBRARY_PATH is not a readable file"
  exit 1
fi

if [ -s "$dest" ]; then
  say "already installed: $dest"
  echo "$dest"
  exit 0
fi

case "$(uname -s)/$(uname -m)" in
  Linux/x86_64) arch=x64 ;;
  Linux/aarch64) arch=arm64 ;;
  *) say "no prebuilt ONNX Runtime for $(uname -s)/$(uname -m) in onnxruntime-node; install ONNX Runtime $ORT_VERSION yourself and set ONNXRUNTIME_SHARED_LIBRARY_PATH"; exit 1 ;;
esac

if ! command -v npm >/dev/null 2>&1; then
  say "npm is not installed (apt-get install npm), and no ONNX Runtime library was found."
  say "Either install npm, or set ONNXRUNTIME_SHARED_LIBRARY_PATH to your libonnxruntime.so"
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
say "fetching onnxruntime-node@$ORT_VERSION with npm pack (about 110 MB, no scripts run)"
if ! (cd "$work" && npm pack --silent "onnxruntime-node@$ORT_VERSION" >/dev/null); then
  say "npm pack onnxruntime-node@$ORT_VERSION failed (no network to the npm registry?)"
  exit 1
fi
tgz=$work/onnxruntime-node-$ORT_VERSION.tgz
got=$(sha256sum "$tgz" | cut -d' ' -f1)
if [ "$got" != "$ORT_TGZ_SHA256" ]; then
  say "checksum mismatch for $tgz: got $got, want $ORT_TGZ_SHA256"
  exit 1
fi
member=package/bin/napi-v6/linux/$arch/libonnxruntime.so.1
tar -xzf "$tgz" -C "$work" "$member"
mkdir -p "$dest_dir"
# Atomic: a half-written library must never be found by a later run.
cp "$work/$member" "$dest.tmp.$$"
mv -f "$dest.tmp.$$" "$dest"
say "installed $dest"
echo "$dest"
