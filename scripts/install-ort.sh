#!/usr/bin/env bash
# Finds or installs the ONNX Runtime shared library that segtune loads, and
# prints its path on the last line of standard output.
#
# Order: $ONNXRUNTIME_SHARED_LIBRARY_PATH (the user's own library), then the
# copy installed earlier in the per-user cache, then a fresh install from the
# npm package onnxruntime-node (fetched with `npm pack`, so none of its install
# scripts run), checked against a pinned SHA-256. Idempotent; offline once the
# cache holds the library.
#
# --cuda installs ONNX Runtime's CUDA build instead (see install_cuda below)
# and prints the path of its core library; $ONNXRUNTIME_SHARED_LIBRARY_PATH
# plays no part there.
set -euo pipefail

if [ "${1:-}" = "--cuda" ]; then
  cuda=1
elif [ -n "${1:-}" ]; then
  echo "usage: $0 [--cuda]" >&2
  exit 2
fi

ORT_VERSION=1.30.0
ORT_TGZ_SHA256=6e3390d6b783e7be946fad629292799da28d0b42f84856e50d2c1b0383291e75
cache_root=${SEGTUNE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/segtune}
dest_dir=$cache_root/onnxruntime/$ORT_VERSION
dest=$dest_dir/libonnxruntime.so.1

say() { echo "install-ort: $*" >&2; }

# install_cuda installs ONNX Runtime 1.29.0 with its CUDA execution provider,
# from npm (`npm pack`, no scripts run): the core library from
# onnxruntime-node@1.29.0 (Microsoft's build, with CUDA support compiled in),
# and the CUDA provider (built against CUDA 13 and cuDNN 9, which it needs at
# run time; a plugin EP too) with libonnxruntime_providers_shared.so from
# Unity's com.github.asus4.onnxruntime.linux-x64-gpu@0.4.9, which repackages
# Microsoft's 1.29.0 GPU release. (The CPU-only core of
# com.github.asus4.onnxruntime does not fit that provider: sessions on it
# crash in Run.) All three go side by side into
# $cache_root/onnxruntime-cuda/1.29.0, apart from the CPU build. About 290 MB
# to download, 275 MB installed.
install_cuda() {
  local ver=1.29.0
  local core_pkg=onnxruntime-node core_ver=1.29.0
  local core_sha=cfdfb45ec4044b1fdca43e5d2e180fb6817e649ff8ad1e0dfc90e18e51b67037
  local gpu_pkg=com.github.asus4.onnxruntime.linux-x64-gpu gpu_ver=0.4.9
  local gpu_sha=2b459e0c17f340c92970c10ed86de4f37a3009f93c14053e6ad4334cbb6be412
  local dir=$cache_root/onnxruntime-cuda/$ver
  local core=$dir/libonnxruntime.so.1 cudaep=$dir/libonnxruntime_providers_cuda.so
  local shared=$dir/libonnxruntime_providers_shared.so
  if [ -s "$core" ] && [ -s "$cudaep" ] && [ -s "$shared" ]; then
    say "already installed: $dir"
    echo "$core"
    return 0
  fi
  if [ "$(uname -s)/$(uname -m)" != Linux/x86_64 ]; then
    say "the CUDA build of ONNX Runtime is packaged for Linux x86-64 only, not $(uname -s)/$(uname -m)"
    return 1
  fi
  if ! command -v npm >/dev/null 2>&1; then
    say "npm is not installed (apt-get install npm); it fetches the CUDA build of ONNX Runtime"
    return 1
  fi
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  local spec pkg pv sha tgz got
  for spec in "$core_pkg:$core_ver:$core_sha" "$gpu_pkg:$gpu_ver:$gpu_sha"; do
    IFS=: read -r pkg pv sha <<<"$spec"
    say "fetching $pkg@$pv with npm pack (no scripts run)"
    if ! (cd "$work" && npm pack --silent "$pkg@$pv" >/dev/null); then
      say "npm pack $pkg@$pv failed (no network to the npm registry?)"
      return 1
    fi
    tgz=$work/$pkg-$pv.tgz
    got=$(sha256sum "$tgz" | cut -d' ' -f1)
    if [ "$got" != "$sha" ]; then
      say "checksum mismatch for $pkg@$pv: got $got, want $sha"
      return 1
    fi
  done
  local m=package/Plugins/Linux/x64 n=package/bin/napi-v6/linux/x64
  tar -xzf "$work/$core_pkg-$core_ver.tgz" -C "$work" "$n/libonnxruntime.so.1"
  tar -xzf "$work/$gpu_pkg-$gpu_ver.tgz" -C "$work" "$m/libonnxruntime_providers_cuda.so" "$m/libonnxruntime_providers_shared.so"
  mkdir -p "$dir"
  # Each file lands atomically; the core library last, since its presence
  # with the provider's is what "installed" means to this script.
  cp "$work/$m/libonnxruntime_providers_shared.so" "$shared.tmp.$$" && mv -f "$shared.tmp.$$" "$shared"
  cp "$work/$m/libonnxruntime_providers_cuda.so" "$cudaep.tmp.$$" && mv -f "$cudaep.tmp.$$" "$cudaep"
  cp "$work/$n/libonnxruntime.so.1" "$core.tmp.$$" && mv -f "$core.tmp.$$" "$core"
  say "installed $dir (the CUDA provider needs CUDA 13 and cuDNN 9 at run time: \`segtune doctor\` checks)"
  echo "$core"
}

if [ -n "${cuda:-}" ]; then
  install_cuda
  exit
fi

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
