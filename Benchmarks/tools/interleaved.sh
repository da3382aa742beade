#!/usr/bin/env bash
# D1 (batched puts, 1,000 documents per durable commit) or D2 (single-document durable commits) of several
# sofa-compare builds and SQLite, interleaved in rounds so that the machine's quiet and busy minutes hit them alike:
# each run is one `--engine-child` process on a fresh directory (D1 puts the data set's N documents; D2 loads them,
# then commits 2,000 single documents).
#
#   Benchmarks/tools/interleaved.sh D1|D2 ROUNDS N DATA BUILD...
#
# BUILD is a path to a sofa-compare binary (its sofa engine is run), or `sqlite` (the SQLite engine of the first
# binary). Prints one line per run, then each build's median throughput and, for each sofa build, the ratio of its
# median to SQLite's. D1 lines: round, UTC time, load, build, docs/s, µs and CPU µs per document. D2 lines: round,
# UTC time, load, build, commits/s, p50 and p99 µs, CPU µs per commit.
set -euo pipefail
workload=$1 rounds=$2 n=$3 data=$4
shift 4
builds=("$@")
case $workload in
    D1) metrics=('batched puts (1,000 per commit)' 'time per document' 'CPU time per document')
        printf 'round\tutc\tload\tbuild\tdocs/s\tus_per_doc\tcpu_us_per_doc\n' ;;
    D2) metrics=('single-document durable commits' 'commit p50' 'commit p99' 'CPU time per commit')
        printf 'round\tutc\tload\tbuild\tcommits/s\tp50_us\tp99_us\tcpu_us\n' ;;
    *) echo "workload must be D1 or D2, not $workload" >&2; exit 2 ;;
esac
first=""
for b in "${builds[@]}"; do [[ $b != sqlite ]] && { first=$b; break; }; done
work=$(mktemp -d /tmp/interleaved.XXXXXX)
trap 'rm -rf "$work"' EXIT
for ((r = 1; r <= rounds; r++)); do
    for b in "${builds[@]}"; do
        engine=sofa bin=$b
        if [[ $b == sqlite ]]; then engine=sqlite bin=$first; fi
        rm -rf "$work/db" && mkdir -p "$work/db/$engine"
        sync
        out=$("$bin" --engine-child "$engine" --n "$n" --data "$data" --db "$work/db" --workloads "$workload" \
              --no-cold --suite docs 2>/dev/null)
        line="$r\t$(date -u +%H:%M:%S)\t$(cut -d' ' -f1 /proc/loadavg)\t$b"
        for m in "${metrics[@]}"; do
            line+="\t$(awk -F'\t' -v w="$workload" -v m="$m" '$2 == w && $3 == m { printf "%.3f", $4 }' <<<"$out")"
        done
        printf '%b\n' "$line" | tee -a "$work/runs"
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
        printf 'median\t%s\t%.0f/s\t%.2fx sqlite\n' "$b" "$m" "$(awk -v a="$m" -v b="$sqlite" 'BEGIN { print a / b }')"
    else
        printf 'median\t%s\t%.0f/s\n' "$b" "$m"
    fi
done
