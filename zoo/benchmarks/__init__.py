"""Benchmarks. Each measures its baselines in the same process, so ratios hold on a noisy machine."""
