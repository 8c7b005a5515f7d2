"""Kafka I/O every engine shares: clients, admin and provisioning, the raw protocol, the batch producer, the writer.

May import: transcoder.pipeline, transcoder.config, transcoder.codecs, transcoder.errors.
"""
