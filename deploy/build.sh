#!/usr/bin/env bash
# The one build both README commands share: every binary of the workspace, with the
# same package set, profile and features, so `cluster.sh up` followed by `test.sh`
# compiles RocksDB once. Installs the prerequisites first when they are missing.
#
#   deploy/build.sh            # debug (TESSERA_PROFILE=release for an optimized build)
#
# Prints the out directory of librocksdb-sys's build script on the last line of
# $CARGO_TARGET_DIR/<profile>/rocksdb-out-dir, which test.sh compares with the
# test build's to prove RocksDB was not built a second time.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tessera/target}"
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
PROFILE="${TESSERA_PROFILE:-debug}"
"$ROOT/deploy/prerequisites.sh"
flags=()
[[ "$PROFILE" == release ]] && flags+=(--release)
if [[ ! -d "$CARGO_TARGET_DIR/$PROFILE/build" ]] || ! ls -d "$CARGO_TARGET_DIR/$PROFILE"/build/librocksdb-sys-* >/dev/null 2>&1; then
  echo "building Tessera ($PROFILE): the first build compiles RocksDB, about 10-16 minutes on two cores" >&2
fi
start=$SECONDS
mkdir -p "$CARGO_TARGET_DIR/$PROFILE"
cargo build --workspace --bins "${flags[@]}" --message-format=json-render-diagnostics \
  | "$ROOT/deploy/rocksdb-out-dir.sh" >"$CARGO_TARGET_DIR/$PROFILE/rocksdb-out-dir"
echo "build finished in $((SECONDS - start)) s" >&2
