#!/usr/bin/env bash
# Installs the Python side of segtune's tests and benchmarks: Debian's
# python3-torch, python3-torchvision, python3-onnx and python3-protobuf (the
# independent reader of TensorBoard files in internal/tfevents' test), for /usr/bin/python3
# (not a pyenv/venv python3 that may come first on PATH), and OpenBLAS.
# Idempotent and quiet: does nothing when all is there already.
#
# Why OpenBLAS: Debian's torch calls the system libblas.so.3 (BLAS_INFO=
# generic) for matrix products and some convolutions, and the default
# alternative is netlib's reference BLAS (about 4 GFLOP/s here). With
# libopenblas0-pthread installed, PyTorch's single-thread DeepLabV3+ step
# is 2.5x faster; the benchmarks compare against PyTorch at its best.
set -euo pipefail

PY=/usr/bin/python3
PKGS=(python3-torch python3-torchvision python3-onnx python3-protobuf libopenblas0-pthread)

say() { echo "install-python-deps: $*" >&2; }

have() {
  [ -x "$PY" ] && "$PY" -c 'import torch, torchvision, onnx, google.protobuf' >/dev/null 2>&1 &&
    { ! command -v dpkg-query >/dev/null 2>&1 ||
      dpkg-query -W -f='${Status}' libopenblas0-pthread 2>/dev/null | grep -q 'install ok installed'; }
}

if have; then
  exit 0
fi

. "$(dirname "$0")/apt.sh"
apt_install "torch, torchvision and onnx do not import in $PY" \
  "install ${PKGS[*]} (Debian 12 packages) or torch, torchvision and onnx for $PY yourself" --recommends "${PKGS[@]}" || exit 1

if ! have; then
  "$PY" -c 'import torch, torchvision, onnx' >&2 || true
  say "installed ${PKGS[*]}, but $PY still cannot import torch, torchvision and onnx"
  exit 1
fi
say "ok: $("$PY" -c 'import torch, torchvision, onnx; print("torch", torch.__version__, "torchvision", torchvision.__version__, "onnx", onnx.__version__)' 2>/dev/null)"
