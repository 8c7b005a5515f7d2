"""Benchmarks: speed belongs here, reported side by side in one run, never asserted in tests."""
