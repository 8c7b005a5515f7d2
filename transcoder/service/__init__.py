"""The single-process engine: lanes (consume loop, rebalance, backpressure, commits) and the runner.

May import: transcoder.metrics and below.
"""
