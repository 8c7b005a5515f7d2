"""What an engine is: the contract `transcoder run` holds every engine to (`contract.Engine`), and the base that
serves an engine's health, readiness, /status and /metrics from its lanes (`served.Served`).

The engines themselves (transcoder.service, transcoder.spark) import this package; which engines there are, and
how each is built, is transcoder.engines (the registry, above them). May import: transcoder.migrate and below.
"""

from transcoder.engine.contract import Engine, EngineLane
from transcoder.engine.served import Served

__all__ = ["Engine", "EngineLane", "Served"]
