#!/usr/bin/env bash
# Builds github.com/goccy/bigquery-emulator once and prints the binary's path.
#
# The emulator embeds ZetaSQL: a cold build takes ~10-13 min and ~7 GB of
# memory and only succeeds with clang (GCC 12 fails on ZetaSQL), so the binary
# is cached outside the repository and never rebuilt while it exists.
# `go install ...@latest` is refused by the filtered module proxy, so the
# pinned version is downloaded into the module cache and built from a copy
# with its own go.mod (the module cache is read-only).
#
# Usage: export BIGQUERY_EMULATOR="$(.ci/bigquery-emulator.sh)"
# Everything except the final path goes to stderr.
set -euo pipefail

VERSION="${BIGQUERY_EMULATOR_VERSION:-v0.6.6}"
MODULE="github.com/goccy/bigquery-emulator"
CACHE_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/tributary"
BIN="$CACHE_DIR/bigquery-emulator-$VERSION"

if [[ -x "$BIN" ]]; then
	echo "$BIN"
	exit 0
fi

log() { echo "bigquery-emulator: $*" >&2; }

if ! command -v clang-14 >/dev/null 2>&1 || ! command -v clang++-14 >/dev/null 2>&1; then
	log "installing clang-14 (ZetaSQL does not build with GCC 12)"
	SUDO=""
	if [[ "$(id -u)" != 0 ]]; then SUDO="sudo"; fi
	$SUDO apt-get update -y >&2
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y clang-14 >&2
fi

mkdir -p "$CACHE_DIR"
WORK="$(mktemp -d "$CACHE_DIR/build.XXXXXX")"
trap 'chmod -R u+w "$WORK" 2>/dev/null || true; rm -rf "$WORK"' EXIT

log "downloading $MODULE@$VERSION"
SRC="$(cd "$WORK" && GOFLAGS=-mod=mod go mod download -json "$MODULE@$VERSION" |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
if [[ -z "$SRC" || ! -d "$SRC" ]]; then
	log "go mod download did not report a source directory"
	exit 1
fi

# Copy (module cache files are read-only) and build with the emulator's own
# go.mod/go.sum, isolated from the caller's module and GOFLAGS.
cp -r "$SRC" "$WORK/src"
chmod -R u+w "$WORK/src"
log "building (cold: ~10-13 min, ~7 GB memory)"
start=$SECONDS
(
	cd "$WORK/src"
	env -u GOFLAGS GOWORK=off CGO_ENABLED=1 CC=clang-14 CXX=clang++-14 \
		go build -mod=mod -trimpath -o "$WORK/bigquery-emulator" ./cmd/bigquery-emulator
) >&2
# Rename into place atomically so a concurrent caller never sees half a file.
mv "$WORK/bigquery-emulator" "$BIN"
log "built in $((SECONDS - start))s: $BIN"
echo "$BIN"
