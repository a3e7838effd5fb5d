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

. "$(dirname "$0")/apt.sh"
apt_install "OpenMPI (mpirun, pkg-config ompi-c) is missing" \
  "install OpenMPI's launcher and development files (Debian: ${PKGS[*]}) yourself" "${PKGS[@]}" || exit 1

if ! have; then
  say "installed ${PKGS[*]}, but mpirun or pkg-config ompi-c is still missing"
  exit 1
fi
say "ok: $(mpirun --version 2>/dev/null | head -n1)"
