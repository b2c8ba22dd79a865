"""The project's benchmark suites, beside the library: each uses zoo's public API and writes its results to
benchmarks/results/; `scripts/benchmark.py SUITE` runs one."""
