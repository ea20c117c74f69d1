"""Consuming: where records are fetched, and the member side of the group protocol.

* :mod:`engine.consume.consumer` -- Kafka's ``subscribe`` / ``assign`` / ``poll`` / ``seek`` /
  ``commit`` over the partitions' Parquet files (pyarrow, no Spark), positions and offset
  commits into ``__consumer_offsets``;
* :mod:`engine.consume.group_client` -- one member of a consumer group, as Kafka's
  ``ConsumerCoordinator``: join, revoke and sync, heartbeats (leases), removal of silent
  members, leave. ``lakelog serve`` drives it for Kafka clients too.

The group itself -- membership, generation, assignment -- is :mod:`engine.groups`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from lakelog.engine.consume.consumer import (
    Consumer,
    ConsumerGroupMetadata,
    ConsumerRebalanceListener,
    ConsumerRecord,
)

if TYPE_CHECKING:
    from lakelog.engine.consume.group_client import GroupClient


def __getattr__(name: str) -> Any:
    # GroupClient on first use: a consumer without a group.id never imports the group side.
    if name != "GroupClient":
        raise AttributeError(f"module 'lakelog.engine.consume' has no attribute {name!r}")
    value = importlib.import_module("lakelog.engine.consume.group_client").GroupClient
    globals()[name] = value
    return value


__all__ = ["Consumer", "ConsumerGroupMetadata", "ConsumerRebalanceListener", "ConsumerRecord", "GroupClient"]
