#!/usr/bin/env bash
# Builds the libFuzzer targets of Fuzz/ and runs each for FUZZ_SECONDS (default 60), seeded from
# Tests/Fixtures/fuzz/<target>/. A crasher is written next to the seeds as crash-<sha1>, where the default test
# suite replays it (FuzzFixtureReplayTests) — fix the bug, keep the file. The growing corpus stays in
# .build-fuzz/corpus/<target> (git-ignored). Usage: tools/fuzz.sh [target…]   (targets: file chunk json collation)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-60}"
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(file chunk json collation)

# `--sanitize=address` as a second SwiftPM flag would silently drop the fuzzer (shared/TOOLCHAIN.md).
(cd Fuzz && swift build --sanitize=fuzzer -Xswiftc -sanitize=fuzzer,address)
bin="$(cd Fuzz && swift build --sanitize=fuzzer -Xswiftc -sanitize=fuzzer,address --show-bin-path)"

status=0
for t in "${targets[@]}"; do
    mkdir -p ".build-fuzz/corpus/$t"
    echo "== fuzz-$t for ${seconds}s"
    # -rss_limit_mb: the file target maps its inputs; 4 GiB leaves room for ASan's shadow.
    if ! SWIFT_BACKTRACE=enable=no ASAN_OPTIONS=detect_leaks=0 "$bin/fuzz-$t" \
        ".build-fuzz/corpus/$t" "Tests/Fixtures/fuzz/$t" \
        -max_total_time="$seconds" -print_final_stats=1 -rss_limit_mb=4096 -max_len=65536 \
        -artifact_prefix="Tests/Fixtures/fuzz/$t/" 2> ".build-fuzz/fuzz-$t.log"; then
        echo "fuzz-$t found a crash: see .build-fuzz/fuzz-$t.log and Tests/Fixtures/fuzz/$t/crash-*"
        status=1
    fi
    grep -E "stat::number_of_executed_units|stat::new_units_added|Done [0-9]+ runs" ".build-fuzz/fuzz-$t.log" || true
done
exit $status
