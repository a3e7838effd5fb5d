#!/usr/bin/env bash
# reshape-packages.sh moves segtune's helper packages under the package they
# serve (issue #42), so that the top level names the pipeline: graphs (onnx),
# the ORT layer (runtime), images and data (imageio), models, inference,
# fine-tuning, the regularizer (projection, dual), scoring (metrics,
# evaluate), deployment, serving and the CLI.
#
# It is written to run on a merged tree, after the other branches of the
# reshaping landed: it git-mv's whole folders, rewrites import paths in every
# .go file and package paths in the Makefile, scripts, CI and docs, renames
# the package clause where a folder's name changes, gofmt's what it touched,
# and ends with go build and go vet. A second run finds nothing to move and
# changes nothing.
#
# Why each folder goes where it goes (folder-level floors as farm-studio
# draws them: no move may add an import that runs back up):
#   gradcheck, ortprobe -> onnx/grad/…: both run the gradient compiler's
#     graphs in ONNX Runtime; under runtime/ they would make the ground floor
#     import onnx/ (3 new back-arrows).
#   doctor -> cmd/segtune/doctor, placement -> cmd/segtune/doctor/placement:
#     the machine check of `segtune doctor` and the placement report it
#     prints, the CLI's alone; under internal/ they would lift internal/
#     above onnx/, whose imports of internal/ would then run back up.
#   demo -> cmd/segtune/demo: the workflow of `segtune demo`, the CLI's alone.
#   datalayout -> imageio/datalayout: how data folders pair images and masks.
#   artifacts -> deploy/trainingraph: ORT training graphs compiled for one
#     input size, an export for on-device training; "artifacts" named several
#     things, the package is renamed trainingraph.
#   preprocsearch -> evaluate/preprocsearch: scores candidate preprocessings
#     with evaluate's runs, on the user's labelled images.
set -euo pipefail

cd "$(git rev-parse --show-toplevel)"
export PATH="$PATH:/usr/local/go/bin"
module=$(go list -m)

# old folder -> new folder, in the order the moves must run (a folder that
# receives another moves first).
moves=(
	"gradcheck onnx/grad/gradcheck"
	"ortprobe onnx/grad/ortprobe"
	"doctor cmd/segtune/doctor"
	"placement cmd/segtune/doctor/placement"
	"demo cmd/segtune/demo"
	"datalayout imageio/datalayout"
	"artifacts deploy/trainingraph"
	"preprocsearch evaluate/preprocsearch"
)
# folder -> package name, where the folder's new name differs from its package's.
renames=(
	"deploy/trainingraph artifacts trainingraph"
)

moved=0
for m in "${moves[@]}"; do
	read -r old new <<<"$m"
	if [ -d "$old" ] && [ -n "$(git ls-files "$old")" ]; then
		if [ -e "$new" ]; then
			echo "reshape-packages: $new exists already; move $old by hand" >&2
			exit 1
		fi
		mkdir -p "$(dirname "$new")"
		git mv "$old" "$new"
		# git mv leaves ignored files behind (a package's testdata/generated, say).
		if [ -d "$old" ]; then
			cp -a "$old/." "$new/" && rm -rf "$old"
		fi
		# Tests that reach the repository's root with filepath.Join("..", …)
		# climb one folder more for each level the package went down.
		depth=$(awk -F/ '{print NF}' <<<"$new")
		if [ "$depth" -gt 1 ]; then
			export UPS
			UPS=$(printf '"..", %.0s' $(seq "$depth"))
			for f in $(grep -lF 'filepath.Join("..", ' "$new"/*.go 2>/dev/null || true); do
				perl -pi -e 's/filepath\.Join\("\.\.", /filepath.Join($ENV{UPS}/g' "$f"
			done
		fi
		echo "moved $old -> $new"
		moved=$((moved + 1))
	fi
done

# Rewrite import paths and the package paths that Makefile, scripts and docs
# name (./old/..., module/old). The patterns match only the old paths, so a
# second run finds nothing.
gofiles=$(git ls-files -- '*.go')
textfiles=$(git ls-files -- '*.md' '*.sh' '*.py' '*.yml' '*.yaml' 'Makefile' '.ci/*' 'staticcheck.conf')
for m in "${moves[@]}"; do
	read -r old new <<<"$m"
	export MODULE="$module" OLD="$old" NEW="$new"
	# module/old in Go imports and anywhere else; ./old as a package pattern
	# (go test ./old/...) only outside Go sources, where it names a folder.
	for f in $(grep -lF "${module}/${old}" $gofiles $textfiles 2>/dev/null || true); do
		perl -pi -e 's#\Q$ENV{MODULE}/$ENV{OLD}\E(?=["/]|$)#$ENV{MODULE}/$ENV{NEW}#g' "$f"
	done
	for f in $(grep -lF "./${old}" $textfiles 2>/dev/null || true); do
		perl -pi -e 's#(?<![A-Za-z0-9_./-])\./\Q$ENV{OLD}\E(?=/|$|[\s:"\x27`])#./$ENV{NEW}#g' "$f"
	done
done

# Package clauses and qualified names where a folder's package is renamed.
for r in "${renames[@]}"; do
	read -r dir oldpkg newpkg <<<"$r"
	[ -d "$dir" ] || continue
	export OLDPKG="$oldpkg" NEWPKG="$newpkg"
	for f in $(grep -lE "^package ${oldpkg}(_test)?\$" "$dir"/*.go 2>/dev/null || true); do
		perl -pi -e 's/^package \Q$ENV{OLDPKG}\E(_test)?$/package $ENV{NEWPKG}$1/; s#^// Package \Q$ENV{OLDPKG}\E #// Package $ENV{NEWPKG} #' "$f"
	done
	# Importers: the unaliased import now names newpkg; exported names only,
	# so a local variable of the old name is left alone (go build checks).
	for f in $(grep -lF "\"${module}/${dir}\"" $gofiles 2>/dev/null || true); do
		perl -pi -e 's/\b\Q$ENV{OLDPKG}\E\.(?=[A-Z])/$ENV{NEWPKG}./g' "$f"
	done
	# The README and docs name the package's errors and functions too.
	for f in $(grep -lE "\`${oldpkg}\.[A-Z]" $(git ls-files -- '*.md') 2>/dev/null || true); do
		perl -pi -e 's/`\Q$ENV{OLDPKG}\E\.(?=[A-Z])/`$ENV{NEWPKG}./g' "$f"
	done
done

# Files whose name says what the package called them before.
filemoves=(
	"deploy/trainingraph/artifacts.go deploy/trainingraph/compile.go"
	"deploy/trainingraph/artifacts_test.go deploy/trainingraph/compile_test.go"
)
for m in "${filemoves[@]}"; do
	read -r old new <<<"$m"
	if [ -n "$(git ls-files "$old")" ] && [ ! -e "$new" ]; then
		git mv "$old" "$new"
		echo "moved $old -> $new"
	fi
done

# The README's package table names each moved folder by its new path.
readme_rows=(
	"| \`ortprobe\`, \`gradcheck\` | @@ | \`onnx/grad/ortprobe\`, \`onnx/grad/gradcheck\` |"
	"| \`placement\` | @@ | \`cmd/segtune/doctor/placement\` |"
	"| \`doctor\` | @@ | \`cmd/segtune/doctor\` |"
	"| \`demo/\` | @@ | \`cmd/segtune/demo\` |"
	"| \`datalayout/\` | @@ | \`imageio/datalayout\` |"
	"| \`artifacts\` | @@ | \`deploy/trainingraph\` |"
)
for row in "${readme_rows[@]}"; do
	export FROM="${row%% @@ *}" TO="${row#* @@ }"
	perl -pi -e 's/^\Q$ENV{FROM}\E/$ENV{TO}/' README.md
done

# The layout test holds the new top level to its count.
perl -pi -e 's/^(\tmaxTopLevel = )20$/${1}13/' internal/layout/layout_test.go

# gofmt sorts the import blocks whose paths changed.
changed=$(git diff --name-only -- '*.go'; git ls-files --others --exclude-standard -- '*.go')
if [ -n "$changed" ]; then
	gofmt -w $(echo "$changed" | sort -u | while read -r f; do [ -f "$f" ] && echo "$f"; done)
fi
if [ -n "$(gofmt -l $(git ls-files -- '*.go'))" ]; then
	echo "reshape-packages: gofmt -l lists files:" >&2
	gofmt -l $(git ls-files -- '*.go') >&2
	exit 1
fi

echo "reshape-packages: $moved folder(s) moved; go build and go vet"
go build ./...
go vet ./...
go test ./internal/layout/
