#!/usr/bin/env bash
# Reads cargo's JSON messages on stdin and prints the out directories of every
# librocksdb-sys build script the build used (one per distinct build of RocksDB).
set -euo pipefail
grep '"reason":"build-script-executed"' | grep '"package_id":"[^"]*librocksdb-sys' \
  | sed 's/.*"out_dir":"\([^"]*\)".*/\1/' | sort -u || true
