#!/usr/bin/env bash
# D2 (single-document durable commits) of several sofa-compare builds and SQLite, interleaved in rounds so that
# the disk's quiet and busy minutes hit them alike: each run is one `--engine-child` process on a fresh
# directory, loading N documents and then committing D2's 2,000 single documents.
#
#   Benchmarks/tools/d2-interleaved.sh ROUNDS N DATA BUILD... 
#
# BUILD is a path to a sofa-compare binary (its sofa engine is run), or `sqlite` (the SQLite engine of the first
# binary). Prints one line per run: round, UTC time, load, build, commits/s, p50, p99, CPU µs per commit.
set -euo pipefail
rounds=$1 n=$2 data=$3
shift 3
builds=("$@")
first=""
for b in "${builds[@]}"; do [[ $b != sqlite ]] && { first=$b; break; }; done
work=$(mktemp -d /tmp/d2-interleaved.XXXXXX)
trap 'rm -rf "$work"' EXIT
printf 'round\tutc\tload\tbuild\tcommits/s\tp50_us\tp99_us\tcpu_us\n'
for ((r = 1; r <= rounds; r++)); do
    for b in "${builds[@]}"; do
        engine=sofa bin=$b
        if [[ $b == sqlite ]]; then engine=sqlite bin=$first; fi
        rm -rf "$work/db" && mkdir -p "$work/db/$engine"
        sync
        out=$("$bin" --engine-child "$engine" --n "$n" --data "$data" --db "$work/db" --workloads D2 --no-cold \
              --suite docs 2>/dev/null)
        get() { awk -F'\t' -v m="$1" '$2 == "D2" && $3 == m { printf "%.0f", $4 }' <<<"$out"; }
        printf '%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$(date -u +%H:%M:%S)" "$(cut -d' ' -f1 /proc/loadavg)" \
            "$(basename "$b")" "$(get 'single-document durable commits')" "$(get 'commit p50')" \
            "$(get 'commit p99')" "$(get 'CPU time per commit')"
    done
done
