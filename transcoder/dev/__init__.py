"""Development tools: the local Kafka broker, realistic data generators, `seed` and the `demo`.

May import: transcoder.service and below. Nothing in the runtime imports dev.
"""
