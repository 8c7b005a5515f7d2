"""Measuring a running copy: the metric vocabulary and registry, CPU by thread, broker figures, status, endpoints.

`registry` declares every metric (the only importer of prometheus_client); `cpu` the CPU of each thread;
`broker_figures` polls the brokers (disk bytes, records, recompression); `status` builds health, readiness and
/status from lane snapshots; `endpoints` is the HTTP server of /metrics, /healthz, /readyz and /status (what an
engine serves on it: transcoder.engine.served), with TLS and basic auth from `web_config` (exporter-toolkit's web
config file). May import: transcoder.kafka and below.
"""
