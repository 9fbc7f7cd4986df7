#!/usr/bin/env bash
# Installs what building Tessera needs on a fresh Debian machine that has only the
# Rust toolchain: libclang (RocksDB's bindgen), a C++ compiler, curl, and the
# PocketSphinx library and its English model (the meetings application's
# offline speech recognition links libpocketsphinx).
set -euo pipefail
missing=()
dpkg -s libclang-dev >/dev/null 2>&1 || missing+=(libclang-dev)
command -v c++ >/dev/null 2>&1 || missing+=(g++)
command -v curl >/dev/null 2>&1 || missing+=(curl)
dpkg -s libpocketsphinx-dev >/dev/null 2>&1 || missing+=(libpocketsphinx-dev libsphinxbase-dev)
dpkg -s pocketsphinx-en-us >/dev/null 2>&1 || missing+=(pocketsphinx-en-us)
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}" >&2
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
