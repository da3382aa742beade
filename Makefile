# Everyday targets. Each installs missing Debian packages first (tools/setup.sh).
# The README's two commands do not need make: they are the `demo` and `test` recipes spelled out.

.PHONY: setup demo test build release crash-test bench bench-quick clean fuzz tsan

setup:
	bash tools/setup.sh

demo: setup
	swift run -c release sofa demo

test: setup
	swift test

# The crash tests at length: 2,000 SIGKILLs per seed instead of the default suite's 60 (storage level,
# CrashTests) and 40 (whole database: documents, views, compaction, DatabaseCrashTests), then three more seeds.
# The seeded loop also enumerates every crash point of a 100-step database workload per seed.
# CRASH_KILLS=N for a shorter or longer run.
CRASH_KILLS ?= 2000
crash-test: setup
	SOFA_CRASH_KILLS=$(CRASH_KILLS) swift test --filter 'CrashTests|DatabaseCrashTests'
	for seed in 101 202 303; do SOFA_SEED=$$seed SOFA_CRASH_KILLS=$$(( $(CRASH_KILLS) / 2 )) SOFA_CRASH_POINT_STEPS=100 \
		swift test --filter 'CrashTests|DatabaseCrashTests|DatabaseCrashPointTests|PowerLossTests|FaultInjectionTests' || exit 1; done

build: setup
	swift build

release: setup
	swift build -c release

# The whole benchmark suite (Benchmarks/README.md): every microbenchmark, their malloc counts against
# Benchmarks/Thresholds/, sofa-compare's tables at 100k and 1M (3 runs each), and the scaling run (sofa-compare
# --csv at 100k, 1M and 10M, plotted into Benchmarks/plots/; 10M needs ~2.4 GB of data and takes a while).
# Only this target installs gnuplot (for the plots).
BENCH_SCALING_N ?= 100000 1000000 10000000
bench: setup
	bash tools/setup.sh gnuplot-nox
	Benchmarks/data/generate.sh $(sort 100000 1000000 $(BENCH_SCALING_N))
	cd Benchmarks && swift package benchmark --no-progress
	cd Benchmarks && swift package benchmark thresholds check --metric mallocCountTotal --metric mallocBytesCount --no-progress
	cd Benchmarks && swift run -c release sofa-compare --n 100000 --repeat 3
	cd Benchmarks && swift run -c release sofa-compare --n 1000000 --repeat 3
	Benchmarks/plot/scaling.sh $(BENCH_SCALING_N)

# A subset in under two minutes on a quiet machine once built: one or more microbenchmarks per layer, shortened
# (SOFA_BENCH_QUICK=1), and sofa-compare at 100k without the cold-cache W7.
BENCH_QUICK_FILTER = JSON.parse.track|Collation.encode.hierarchyKey|Storage.*|BTree.(get|reduce|scan).*|Documents.get.*|Views.update.*|Query.(range|group.level1).*
bench-quick: setup
	Benchmarks/data/generate.sh 100000
	cd Benchmarks && SOFA_BENCH_QUICK=1 swift package benchmark --no-progress --filter '$(BENCH_QUICK_FILTER)'
	cd Benchmarks && swift run -c release sofa-compare --n 100000 --no-cold

clean:
	rm -rf .build .build-* Benchmarks/.build

# R6: build the libFuzzer targets (Fuzz/, a package of its own) and run each for FUZZ_SECONDS (default 60), seeded
# from Tests/Fixtures/fuzz/<target>/; crashers land there as crash-* and the default suite replays them.
# `make fuzz FUZZ_SECONDS=600 FUZZ_TARGETS="file chunk"` for a longer run of some targets.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= file chunk json collation
fuzz: setup
	FUZZ_SECONDS=$(FUZZ_SECONDS) bash tools/fuzz.sh $(FUZZ_TARGETS)

# R10: the concurrency suites under ThreadSanitizer, longer than in the default suite, in a scratch directory of
# their own so they do not rebuild .build. halt_on_error makes any report fail the run. -DSOFA_TSAN makes Sofa's
# Lock a pthread mutex, which TSan sees (not so Synchronization.Mutex: Sources/SofaStorage/Support/Lock.swift).
TSAN_COMMITS ?= 1000
tsan: setup
	SOFA_CONCURRENCY_COMMITS=$(TSAN_COMMITS) TSAN_OPTIONS=halt_on_error=1 \
		swift test --sanitize=thread -Xswiftc -DSOFA_TSAN --scratch-path .build-tsan --filter 'ConcurrencyTests'
