#!/usr/bin/env bash
# Finds or builds MinIO, the S3-compatible server that the object-storage
# tests start on a loopback port, and prints the binary's path on the last
# line of standard output.
#
# Source: `go install github.com/minio/minio@$MINIO_VERSION` from the Go
# module proxy (checked against the Go checksum database, as every module
# is); MinIO publishes no semver tags, so the pin is the proxy's
# pseudo-version of the commit. Installed into the per-user cache
# ($SEGTUNE_CACHE_DIR, else $XDG_CACHE_HOME/segtune, else ~/.cache/segtune)
# under minio/$MINIO_VERSION/. The first build takes about ten minutes on two
# cores; idempotent and offline afterwards. $SEGTUNE_MINIO, if set, names a
# minio binary to use instead.
#
# With --check it only looks: it prints the path if the binary is there and
# exits 1 otherwise, never building.
set -euo pipefail

check_only=0
case "${1:-}" in
  "") ;;
  --check) check_only=1 ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
cache_root=${SEGTUNE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/segtune}
dest=$cache_root/minio/$MINIO_VERSION
bin=$dest/minio

say() { echo "install-minio: $*" >&2; }

if [ -n "${SEGTUNE_MINIO:-}" ]; then
  if [ -x "$SEGTUNE_MINIO" ]; then
    echo "$SEGTUNE_MINIO"
    exit 0
  fi
  say "SEGTUNE_MINIO=$SEGTUNE_MINIO is not an executable file"
  exit 1
fi
if [ -x "$bin" ] && "$bin" --version >/dev/null 2>&1; then
  say "already installed: $bin"
  echo "$bin"
  exit 0
fi
if [ "$check_only" = 1 ]; then
  say "not installed in $dest (run scripts/install-minio.sh)"
  exit 1
fi
if ! command -v go >/dev/null 2>&1; then
  say "go is not installed; cannot build github.com/minio/minio@$MINIO_VERSION"
  exit 1
fi

mkdir -p "$dest"
say "building github.com/minio/minio@$MINIO_VERSION into $dest (about ten minutes the first time)"
# Its own GOBIN (and no GOFLAGS of the caller's) so nothing else is touched;
# built under nice so that a shared machine stays usable.
GOBIN=$dest GOFLAGS= nice -n 10 go install "github.com/minio/minio@$MINIO_VERSION" >&2
"$bin" --version >/dev/null
say "installed $bin"
echo "$bin"
