"""Pure, engine-free logic of a copy: routes and plans, batching, the ledger of what is safe to commit.

May import: transcoder.config, transcoder.codecs, transcoder.errors. No Kafka client, no I/O.
"""
