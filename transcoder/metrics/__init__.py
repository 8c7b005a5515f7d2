"""Measuring a running copy: the metric vocabulary and registry, CPU by thread, broker figures, status, endpoints.

May import: transcoder.kafka and below. The only importer of prometheus_client is metrics.registry.
"""
