"""Benchmark suites beside the library, on zoo's public API (`scripts/benchmark.py SUITE`); results in
`benchmarks/results/`."""
