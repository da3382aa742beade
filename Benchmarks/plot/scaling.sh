#!/usr/bin/env bash
# Scaling: runs sofa-compare --csv at each N and renders how each workload's cost grows with N as PNG plots.
#
#   Benchmarks/plot/scaling.sh                         N = 100000 1000000 10000000, every engine
#   Benchmarks/plot/scaling.sh 100000 1000000          some N only
#   SCALING_ENGINES=sofa,lmdb Benchmarks/plot/scaling.sh 10000000    some engines only (merged into that N's CSV)
#   Benchmarks/plot/scaling.sh --plot-only             re-render the plots from the CSVs already there
#   SCALING_NO_BUILD=1 ...                              skip `swift build` (use .build/release/sofa-compare as is)
#
# Writes Benchmarks/plots/scaling-N.csv (sofa-compare's rows workload,engine,n,metric,value,unit, plus a
# comment line with the command, UTC time and load average) and, from every scaling-*.csv present,
#   plots/throughput.png   W1 build, W2 queries, W3 scan, W4 range reduce, W6 update: per second, vs N
#   plots/size.png         size on disk after W1 and peak RSS of the engine's child process, vs N
#   plots/latency.png      W2 p50 and p99 per query, vs N
# Needs gnuplot (`bash tools/setup.sh gnuplot-nox`, which `make bench` runs) and the data sets
# (Benchmarks/data/generate.sh N, run here when missing: ~2.5 min and 2.4 GB for 10M). The cold-cache W7 is
# skipped (--no-cold): it measures the page cache, not growth with N.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bench="$(dirname "$here")"
out="$bench/plots"
plot_only=0
if [ "${1:-}" = "--plot-only" ]; then plot_only=1; shift; fi
[ $# -eq 0 ] && set -- 100000 1000000 10000000
engines="${SCALING_ENGINES:-}"

command -v gnuplot >/dev/null || { echo "scaling: gnuplot is missing (bash tools/setup.sh gnuplot-nox)" >&2; exit 1; }
mkdir -p "$out"

if [ $plot_only -eq 0 ]; then
    # SCALING_NO_BUILD=1 uses the sofa-compare already built (while another SwiftPM command holds .build).
    [ "${SCALING_NO_BUILD:-0}" = 1 ] || (cd "$bench" && swift build -c release --product sofa-compare >&2)
    for n in "$@"; do
        "$bench/data/generate.sh" "$n" >&2
        args=(--n "$n" --csv --no-cold)
        [ -n "$engines" ] && args+=(--engines "$engines")
        started="$(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
        echo "scaling: N = $n: sofa-compare ${args[*]} ($started)" >&2
        new="$(mktemp)"
        (cd "$bench" && ./.build/release/sofa-compare "${args[@]}") > "$new"
        csv="$out/scaling-$n.csv"
        {
            echo "# cd Benchmarks && ./.build/release/sofa-compare ${args[*]}   # started $started," \
                 "ended load $(cut -d' ' -f1-3 /proc/loadavg)"
            # With some engines only, the other engines' rows of an earlier run stay, under their own command.
            if [ -n "$engines" ] && [ -f "$csv" ]; then
                grep '^#' "$csv" | grep -v -- "--engines $engines " || true
            fi
            echo "workload,engine,n,metric,value,unit"
            tail -n +2 "$new"
            if [ -n "$engines" ] && [ -f "$csv" ]; then
                grep -v '^#' "$csv" | grep -v '^workload,' | \
                    awk -F, -v e="$engines" 'BEGIN { split(e, k, ","); for (i in k) drop[k[i]] = 1 } !($2 in drop)'
            fi
        } > "$csv.tmp"
        mv "$csv.tmp" "$csv"
        rm -f "$new"
    done
fi

# One series per (engine, workload, metric): "N value" lines, sorted by N.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cat "$out"/scaling-*.csv | grep -v '^#' | grep -v '^workload,' | grep -v ',answer,' > "$work/all.csv"
engine_list="$(cut -d, -f2 "$work/all.csv" | sort -u | awk '{ order["sofa"]=1; order["lmdb"]=2; order["sqlite"]=3;
    print (($0 in order) ? order[$0] : 9) " " $0 }' | sort -n | cut -d' ' -f2 | tr '\n' ' ')"
series() {  # workload metric → file name
    local file="$work/$(echo "$1-$2" | tr -c 'A-Za-z0-9\n' '_')"
    for e in $engine_list; do
        awk -F, -v w="$1" -v m="$2" -v e="$e" '$1 == w && $2 == e && $4 == m { print $3, $5 }' "$work/all.csv" \
            | sort -n > "$file.$e"
    done
    echo "$file"
}

plot_panel() {  # title ylabel workload metric
    local file
    file="$(series "$3" "$4")"
    echo "set title '$1'; set ylabel '$2'"
    local parts=()
    for e in $engine_list; do
        [ -s "$file.$e" ] && parts+=("'$file.$e' using 1:2 with linespoints title '$e'")
    done
    (IFS=,; echo "plot ${parts[*]}")
}

common="set terminal pngcairo size 1500,900 font ',10' noenhanced; set logscale xy; set grid;
set xlabel 'N (documents)'; set format x '%.0s%c'; set key top left; set style line 1 lw 2;"

{
    echo "$common set output '$out/throughput.png'; set multiplot layout 2,3 title 'sofa-compare: throughput vs N (higher is better)'"
    plot_panel 'W1 build' 'rows/s' W1 build
    plot_panel 'W2 range query, 20 rows' 'queries/s' W2 'range query (20 rows)'
    plot_panel 'W3 scan' 'rows/s' W3 scan
    plot_panel 'W4 range reduce, ~1% each' 'ranges/s' W4 'range reduce (~1% each)'
    plot_panel 'W6 update 1% of rows' 'rows/s' W6 'update (1% of rows)'
    echo "unset multiplot"
} | gnuplot

{
    echo "$common set terminal pngcairo size 1200,500 font ',10' noenhanced; set output '$out/size.png'"
    echo "set multiplot layout 1,2 title 'sofa-compare: size on disk after W1, peak RSS (lower is better)'"
    plot_panel 'size on disk after W1 (st_size, all files)' 'MiB' W1 'size on disk (st_size)'
    plot_panel 'peak RSS of the engine process (includes the loaded data set)' 'MiB' RSS peak
    echo "unset multiplot"
} | gnuplot

{
    echo "$common set terminal pngcairo size 1200,500 font ',10' noenhanced; set output '$out/latency.png'"
    echo "set multiplot layout 1,2 title 'sofa-compare: W2 latency per query, 20 rows (lower is better)'"
    plot_panel 'W2 p50' 'µs' W2 p50
    plot_panel 'W2 p99' 'µs' W2 p99
    echo "unset multiplot"
} | gnuplot

echo "scaling: wrote $out/throughput.png, size.png, latency.png from $(ls "$out"/scaling-*.csv | wc -l) CSV files" >&2
