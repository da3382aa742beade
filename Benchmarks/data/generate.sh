#!/usr/bin/env bash
# Generates the W1–W7 data set for each N given, into DIR/N, unless DIR/N/expected.json already exists
# (gen.py writes expected.json last, so its presence means the set is complete).
#
#   Benchmarks/data/generate.sh [N ...]        default N: 100000 1000000
#   SOFA_BENCH_DATA=/somewhere Benchmarks/data/generate.sh 10000000
#
# DIR defaults to /tmp/sofa-bench-data: the files are large (≈ 0.3 GB per million rows) and must stay out of
# the repository. The data depends on whether /usr/share/dict/words exists (gen.py falls back to built-in
# syllables without it; expected.json records which in "words"), so compare runs only on the same source.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="${SOFA_BENCH_DATA:-/tmp/sofa-bench-data}"
seed="${SOFA_BENCH_SEED:-42}"
[ $# -eq 0 ] && set -- 100000 1000000

if ! command -v python3 >/dev/null; then
    echo "generate: python3 is missing; installing it" >&2
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || { echo "generate: need root or sudo to install python3" >&2; exit 1; }
        sudo="sudo"
    fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends python3 >/dev/null
fi

for n in "$@"; do
    case "$n" in
        ''|*[!0-9]*) echo "generate: N must be a number, got '$n'" >&2; exit 2 ;;
    esac
    out="$root/$n"
    if [ -f "$out/expected.json" ]; then
        echo "generate: $out already complete"
        continue
    fi
    mkdir -p "$out"
    # A partial earlier run leaves no expected.json; gen.py rewrites every file, so just run it again.
    python3 "$here/gen.py" --n "$n" --seed "$seed" --out "$out"
done
