"""Benchmark harness: datasets, metrics, baselines, ablations, reports, scale."""
