"""Which engines there are, by name, and how each is built: the one registry behind `transcoder run` and
`transcoder validate` (`--engine`: ENGINES, each building a transcoder.engine.Engine) and `transcoder evaluate`
(`--engine`: MEASURERS, each measuring a sample's grid of cells).

An engine's module is imported only when that engine is built (pyspark for spark alone, and no engine for
`--help`). A third engine is its module (the Engine contract), a builder here that imports it and one line in
ENGINES; docs/architecture.md, "How to add an engine". May import: transcoder.service, transcoder.spark and below.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported by the CLI's modules as they load: kept free of the engines and Kafka clients
    from transcoder.config import Config
    from transcoder.engine import Engine
    from transcoder.evaluate.batches import Record
    from transcoder.evaluate.grid import Cell
    from transcoder.evaluate.measure import CellResult
    from transcoder.evaluate.sample import TopicPlan


@dataclass(frozen=True)
class EngineEntry:
    """One engine of `run` and `validate`."""

    #: (the config, --master or None) -> the engine, its module imported now
    build: Callable[[Config, str | None], Engine]
    #: what --help says of it
    help: str
    #: whether it takes --master (a Spark master URL)
    takes_master: bool = False


def _service(config: Config, master: str | None) -> Engine:
    from transcoder.service.runner import Service

    return Service(config)


def _spark(config: Config, master: str | None) -> Engine:
    from transcoder.config import with_spark_master
    from transcoder.spark.engine import SparkEngine

    return SparkEngine(config if master is None else with_spark_master(config, master))


#: `run --engine NAME` / `validate --engine NAME`; the first is the default
ENGINES: dict[str, EngineEntry] = {
    "service": EngineEntry(_service, "this process, a thread per lane"),
    "spark": EngineEntry(_spark, "one streaming query per lane on Spark (the config's spark: section)",
                         takes_master=True),
}


@dataclass(frozen=True)
class Measuring:
    """How a measurer measures: timed repeats per cell, records per batch at most, the Spark master (for an engine
    that takes one) and, for one that reports it, a callback per (partition, cell) measured."""

    repeats: int
    max_records: int
    master: str
    progress: Callable[[], None] | None = None


@dataclass(frozen=True)
class MeasurerEntry:
    """One engine of `evaluate`: every cell's figures on a sample, the same bytes whichever engine measures."""

    #: (partition -> records in offset order, cells, how) -> one result per cell, in the cells' order
    measure: Callable[[Mapping[int, Sequence[Record]], Sequence[Cell], Measuring], list[CellResult]]
    #: help text for --engine
    help: str
    #: a topic's sample read where it is measured (the plan's offsets); None: the sample is read in this process
    measure_topic: Callable[[TopicPlan, Sequence[Cell], Measuring], list[CellResult]] | None = None
    #: whether it calls Measuring.progress (the CLI shows a progress bar)
    reports_progress: bool = False


def _measure_here(partitions: Mapping[int, Sequence[Record]], cells: Sequence[Cell],
                  how: Measuring) -> list[CellResult]:
    from transcoder.evaluate.measure import measure_sample

    return measure_sample(partitions, cells, repeats=how.repeats, max_records=how.max_records, progress=how.progress)


def _measure_on_spark(partitions: Mapping[int, Sequence[Record]], cells: Sequence[Cell],
                      how: Measuring) -> list[CellResult]:
    from transcoder.spark.evaluate import measure_on_spark

    return measure_on_spark(partitions, cells, repeats=how.repeats, max_records=how.max_records, master=how.master)


def _measure_topic_on_spark(plan: TopicPlan, cells: Sequence[Cell], how: Measuring) -> list[CellResult]:
    from transcoder.spark.evaluate import measure_topic_on_spark

    return measure_topic_on_spark(plan, cells, repeats=how.repeats, max_records=how.max_records, master=how.master)


#: `evaluate --engine NAME`; the first is the default. A name means the same engine as in ENGINES (`service`: this
#: process; `spark`: on Spark), so one --engine value is one engine on every command.
MEASURERS: dict[str, MeasurerEntry] = {
    "service": MeasurerEntry(_measure_here, "in this process, as the service compresses", reports_progress=True),
    "spark": MeasurerEntry(_measure_on_spark, "partitions spread over Spark executors",
                           measure_topic=_measure_topic_on_spark),
}


def choices_help(entries: Mapping[str, EngineEntry] | Mapping[str, MeasurerEntry]) -> str:
    """`--engine`'s help: each name with what it is."""
    return "; ".join(f"{name}: {entry.help}" for name, entry in entries.items()) + "."
