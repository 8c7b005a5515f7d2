"""Records of a source gone before an engine copied them (retention or DeleteRecords overtaking the copy, a partition
truncated): the same for every engine - one line naming topic, partition and offsets, counted in
transcoder_source_records_lost_total where the count is known, the offset map's gap for each destination (verify
and cutover see it), and under on_source_loss: stop the error that ends the copy.

A topic deleted and recreated is the service's own (service.source_watch: its topic ids)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import structlog

from transcoder.errors import DataLossError
from transcoder.kafka import offset_map_topic as offset_map
from transcoder.kafka.fetcher import SourceLoss

if TYPE_CHECKING:
    from transcoder.config import Config
    from transcoder.metrics.registry import LaneMetrics

log = structlog.get_logger("transcoder.lane")


def loss_line(loss: SourceLoss) -> str:
    """Pure: what was lost, in one line (topic, partition, offsets, how many when known)."""
    where = f"{loss.topic} [{loss.partition}]"
    n = loss.records
    if n is not None:
        return (f"source records {loss.offset}..{loss.first - 1} of {where} ({n}) were deleted before they were "
                "copied (retention or DeleteRecords overtook the lane)")
    return (f"{where} ends at offset {loss.end}, before the lane's position {loss.offset} (truncated, or the "
            f"topic deleted and recreated): records from {loss.offset} on were lost before they were copied")


def report_loss(config: Config, lane: str, loss: SourceLoss, metrics: LaneMetrics,
                destinations: Sequence[str], source_id: str | None = None) -> DataLossError | None:
    """Say, count and mark one loss (not a recreation); the error that ends the lane under on_source_loss: stop,
    else None (the copy goes on from the partition's first offset). `destinations`: the source topic's
    destinations in this lane; `source_id`: the topic's id, when known."""
    n = loss.records
    what = loss_line(loss)
    stop = config.on_source_loss == "stop"
    log.error("source_records_lost", lane=lane, topic=loss.topic, partition=loss.partition,
              offset=loss.offset, first_offset=loss.first, end_offset=loss.end, records_lost=n,
              on_source_loss=config.on_source_loss,
              note=what + ("; the lane stops (on_source_loss: stop)" if stop else
                           f"; copying on from offset {loss.first} (on_source_loss: continue)"))
    if n:
        metrics.source_records_lost(loss.topic, loss.partition, n)
    if config.migration is not None:
        hi = loss.first if n is not None else loss.offset + 1
        offset_map.store_lost(config, [(loss.topic, d, loss.partition, loss.offset, hi) for d in destinations],
                              config.shutdown_timeout_s, source_id=source_id)
    return stop_error(lane, loss) if stop else None


def stop_error(lane: str, loss: SourceLoss) -> DataLossError:
    """Pure: the error that ends lane `lane` for `loss` under on_source_loss: stop."""
    return DataLossError(f"lane {lane}: {loss_line(loss)}; stopped (on_source_loss: stop): to copy on from offset "
                         f"{loss.first}, run once with on_source_loss: continue", topic=loss.topic,
                         partition=loss.partition, offset=loss.offset)
