#!/usr/bin/env bash
# Installs OpenMPI for segtune's data-parallel fine-tuning (`make build-mpi`,
# bin/segtune-mpi, `go build -tags mpi`) and its tests: Debian's
# libopenmpi-dev (mpi.h, libmpi and its pkg-config module ompi-c, which the
# cgo layer in internal/mpi builds against), openmpi-bin (mpirun) and
# pkg-config. Idempotent and quiet: does nothing when all is there already.
# --check only reports (exit 0 when installed), never installs.
set -euo pipefail

PKGS=(libopenmpi-dev openmpi-bin pkg-config)

say() { echo "install-openmpi: $*" >&2; }

have() {
  command -v mpirun >/dev/null 2>&1 && command -v pkg-config >/dev/null 2>&1 &&
    pkg-config --exists ompi-c
}

if have; then
  exit 0
fi
if [ "${1:-}" = "--check" ]; then
  say "OpenMPI is not installed (mpirun, pkg-config ompi-c)"
  exit 1
fi

if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  say "OpenMPI (mpirun, pkg-config ompi-c) is missing, and installing it needs root."
  say "Run as root (or with passwordless sudo): apt-get install -y ${PKGS[*]}"
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  say "apt-get not found: install OpenMPI's launcher and development files (Debian: ${PKGS[*]}) yourself"
  exit 1
fi

say "installing ${PKGS[*]} with apt-get"
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${PKGS[@]}" >"$log" 2>&1; then
  # A fresh machine may have no package lists yet.
  if ! { "${as_root[@]}" apt-get update -qq && "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${PKGS[@]}"; } >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    say "apt-get install ${PKGS[*]} failed"
    exit 1
  fi
fi

if ! have; then
  say "installed ${PKGS[*]}, but mpirun or pkg-config ompi-c is still missing"
  exit 1
fi
say "ok: $(mpirun --version 2>/dev/null | head -n1)"
