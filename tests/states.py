"""Table states for pure tests: a given set of topics, no files."""

from __future__ import annotations

from collections.abc import Iterable

from lakelog.engine.commit.actions import Metadata, Protocol
from lakelog.engine.commit.state import TableState
from lakelog.engine.topics import TopicMetadata, encode_topic, topic_property_key


def state_with(topics: Iterable[TopicMetadata], version: int = 1) -> TableState:
    configuration = {topic_property_key(t.name): encode_topic(t) for t in topics}
    return TableState.build(version, Protocol(1, 2), Metadata("m", "{}", ("topic", "partition"), configuration), [])
