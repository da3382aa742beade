# Everyday targets. Each installs missing Debian packages first (tools/setup.sh).
# The README's two commands do not need make: they are the `demo` and `test` recipes spelled out.

.PHONY: setup demo test build release bench bench-quick clean

setup:
	bash tools/setup.sh

demo: setup
	swift run -c release sofa demo

test: setup
	swift test

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
