#!/usr/bin/env bash
# Installs the Debian packages Sofa builds against, when any is missing. Safe to run again: it does
# nothing when everything is present. Used by the README's two commands, the Makefile and .ci/run.
#
#   liblz4-dev     page compression            libicu-dev      string collation (ICU root collator)
#   libxxhash-dev  revision digests (XXH3-128)
#   pkg-config     how SwiftPM finds them      liblmdb-dev, libsqlite3-dev   the peers in Benchmarks/
#
# Extra packages a target needs on top of these are named as arguments, e.g. `bash tools/setup.sh gnuplot-nox`
# (the benchmark plots: only `make bench`/`bench-quick` ask for it, so `make test` never installs it).
set -euo pipefail

packages=(pkg-config liblz4-dev libicu-dev libxxhash-dev liblmdb-dev libsqlite3-dev "$@")
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "setup: need root or sudo to install ${missing[*]}" >&2; exit 1; }
    sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
