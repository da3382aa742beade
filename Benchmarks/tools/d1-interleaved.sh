#!/usr/bin/env bash
# D1 (batched puts, 1,000 documents per durable commit) of several sofa-compare builds and SQLite, interleaved in
# rounds so that the machine's quiet and busy minutes hit them alike: each run is one `--engine-child` process on
# a fresh directory, putting the data set's N documents.
#
#   Benchmarks/tools/d1-interleaved.sh ROUNDS N DATA BUILD...
#
# BUILD is a path to a sofa-compare binary (its sofa engine is run), or `sqlite` (the SQLite engine of the first
# binary). Prints one line per run (round, UTC time, load, build, docs/s, µs and CPU µs per document), then each
# build's median docs/s and, for each sofa build, the ratio of its median to SQLite's.
set -euo pipefail
rounds=$1 n=$2 data=$3
shift 3
builds=("$@")
first=""
for b in "${builds[@]}"; do [[ $b != sqlite ]] && { first=$b; break; }; done
work=$(mktemp -d /tmp/d1-interleaved.XXXXXX)
trap 'rm -rf "$work"' EXIT
printf 'round\tutc\tload\tbuild\tdocs/s\tus_per_doc\tcpu_us_per_doc\n'
for ((r = 1; r <= rounds; r++)); do
    for b in "${builds[@]}"; do
        engine=sofa bin=$b
        if [[ $b == sqlite ]]; then engine=sqlite bin=$first; fi
        rm -rf "$work/db" && mkdir -p "$work/db/$engine"
        sync
        out=$("$bin" --engine-child "$engine" --n "$n" --data "$data" --db "$work/db" --workloads D1 --no-cold \
              --suite docs 2>/dev/null)
        get() { awk -F'\t' -v m="$1" '$2 == "D1" && $3 == m { printf "%.3f", $4 }' <<<"$out"; }
        printf '%d\t%s\t%s\t%s\t%.0f\t%s\t%s\n' "$r" "$(date -u +%H:%M:%S)" "$(cut -d' ' -f1 /proc/loadavg)" \
            "$b" "$(get 'batched puts (1,000 per commit)')" "$(get 'time per document')" \
            "$(get 'CPU time per document')" | tee -a "$work/runs"
    done
done
echo
median() { awk -F'\t' -v b="$1" '$4 == b { print $5 }' "$work/runs" | sort -n |
    awk '{ a[NR] = $1 } END { print NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
sqlite=""
for b in "${builds[@]}"; do [[ $b == sqlite ]] && sqlite=$(median sqlite); done
for b in "${builds[@]}"; do
    m=$(median "$b")
    if [[ -n $sqlite && $b != sqlite ]]; then
        printf 'median\t%s\t%.0f docs/s\t%.2fx sqlite\n' "$b" "$m" "$(awk -v a="$m" -v b="$sqlite" 'BEGIN { print a / b }')"
    else
        printf 'median\t%s\t%.0f docs/s\n' "$b" "$m"
    fi
done
