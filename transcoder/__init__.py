"""transcoder: copy Kafka topics into per-codec destination topics and measure each codec."""

__version__ = "0.1.0"
