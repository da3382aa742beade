# Everyday targets. Each installs missing Debian packages first (tools/setup.sh).
# The README's two commands do not need make: they are the `demo` and `test` recipes spelled out.

.PHONY: setup demo test build release crash-test bench bench-quick clean

setup:
	bash tools/setup.sh

demo: setup
	swift run -c release sofa demo

test: setup
	swift test

# The crash tests at length: 2,000 SIGKILLs per seed instead of the default suite's 60, and three seeds.
crash-test: setup
	SOFA_CRASH_KILLS=2000 swift test --filter CrashTests
	for seed in 101 202 303; do SOFA_SEED=$$seed SOFA_CRASH_KILLS=1000 swift test --filter 'CrashTests|PowerLossTests|FaultInjectionTests' || exit 1; done

build: setup
	swift build

release: setup
	swift build -c release

bench: setup
	cd Benchmarks && swift package benchmark

bench-quick: setup
	cd Benchmarks && swift package benchmark --filter 'JSON.*|Collation.*'

clean:
	rm -rf .build .build-* Benchmarks/.build
