"""lakelog's engine: Kafka-style topics kept in one Delta Lake table, without a JVM.

The map, rooms by concern; arrows point down (an import-linter contract in pyproject.toml,
run by ``tests/test_architecture.py``, keeps them so)::

    admin/      topic and group administration: groups (kafka-consumer-groups), check
                (`lakelog check`), history, time_travel, list_offsets (Kafka's ListOffsets)
    produce/    where a record is placed and how it is sent: producer (send, linger, the
                sender thread), batches (the accumulator, futures), placement (Kafka's default
                partitioner over columns: send's batches, send_batch, the sink), partitioner (murmur2, sticky)
    consume/    where records are fetched: consumer (poll, positions, commits) and its
                group_client (the member side of the group protocol, heartbeats)
    groups/     where a group assigns partitions: classic (Kafka's classic group protocol as
                pure functions), classic_coordinator (its requests over the store, no
                coordinator process), coordinator (group records, offset commits), leases
                (liveness off the Delta log), offsets_topic (``__consumer_offsets`` records),
                consumer_protocol (the members' bytes), assignors (range, roundrobin, sticky, ...)
    context     THE SEAM: StoreContext, what every client gets from a store (log, settings,
                committers, topics, auto-creation, the offsets topic)
    settings, topic_changes    lakelog's settings in layers; topic changes as pure plans
    commit/     where a record is committed: typed Delta actions, the put-if-absent loop,
                pure conflict rules, data files (writer and reader); see its own map
    storage/    object_store: local paths and S3, put-if-absent, fsync
    topics, offsets, records, schema, config, client_config, errors
                values every room shares: TopicPartition and topic metadata, offset
                arithmetic, record checks, the log table's columns, typed config keys, the
                one exception hierarchy

Above the engine sit :mod:`lakelog.store` (the ``Store`` façade a user opens),
:mod:`lakelog.transactions`, :mod:`lakelog.spark_connector` (everything Spark),
:mod:`lakelog.compaction`, :mod:`lakelog.kafka_endpoint` and :mod:`lakelog.cli`; the engine
imports none of them. Users import from :mod:`lakelog`; clients of the store get a
:class:`StoreContext`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lakelog.engine.context import StoreContext, auto_create_topics, commit_topic_creation, ensure_offsets_topic

# The seam's names are imported on first use: importing any module of the engine runs this
# package first, and the seam pulls in the whole commit core (pyarrow, the Delta log, data
# files) -- a third of a second that ``lakelog.engine.errors`` (every CLI module's) or
# ``lakelog.engine.topics`` alone does not need.
_SEAM = frozenset({"StoreContext", "auto_create_topics", "commit_topic_creation", "ensure_offsets_topic"})


def __getattr__(name: str) -> Any:
    if name not in _SEAM:
        raise AttributeError(f"module 'lakelog.engine' has no attribute {name!r}")
    value = getattr(importlib.import_module("lakelog.engine.context"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_SEAM])


__all__ = ["StoreContext", "auto_create_topics", "commit_topic_creation", "ensure_offsets_topic"]
