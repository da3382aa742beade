#!/usr/bin/env bash
# Peak resident memory of a view index build from stored documents (issue 5: "peak RSS during a 10M-document
# build ≤ 1 GiB"), measured with the `sofa` tool alone so that nothing else is in the process: `sofa load` the
# data set's documents (untimed for this purpose), then `sofa view create` the "by hierarchy" view with `_sum`
# (the view V1 builds) under `/usr/bin/time -v`, which reports the build's maximum resident set.
#
#   Benchmarks/tools/build-rss.sh N [DIR]
#
# N selects $SOFA_BENCH_DATA/N (default /tmp/sofa-bench-data/N; Benchmarks/data/generate.sh N makes it when
# missing). DIR holds the database (default: a new temporary directory, removed at the end). Run from the
# repository root.
set -euo pipefail

n=${1:?usage: Benchmarks/tools/build-rss.sh N [DIR]}
data=${SOFA_BENCH_DATA:-/tmp/sofa-bench-data}/$n
[ -f "$data/docs.jsonl" ] || Benchmarks/data/generate.sh "$n"

swift build -c release --product sofa >&2
sofa=$(swift build -c release --show-bin-path)/sofa

if [ $# -ge 2 ]; then
    dir=$2
    mkdir -p "$dir"
else
    dir=$(mktemp -d)
    trap 'rm -rf "$dir"' EXIT
fi
db=$dir/rss-$n.sofa
rm -rf "$db"

echo "loading $n documents into $db (durability none)" >&2
"$sofa" load "$db" "$data/docs.jsonl" --durability none >&2

echo "building the view (date: $(date -u +%FT%TZ), load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
/usr/bin/time -v "$sofa" view create "$db" byHierarchy --key genre,artist,album,title --value duration \
    --reduce _sum --type track 2> "$dir/time.txt"
grep -E 'Elapsed|Maximum resident|User time|System time' "$dir/time.txt"
rss_kib=$(awk '/Maximum resident set size/ {print $6}' "$dir/time.txt")
echo "peak RSS of the build: $((rss_kib / 1024)) MiB ($n documents; limit at 10M: 1024 MiB)"
