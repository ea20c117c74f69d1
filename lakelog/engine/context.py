"""The seam between a store and its clients: what a producer, a consumer, a transactional producer,
the admin functions, ``lakelog serve`` and the Spark connector get from a store.

:class:`lakelog.store.Store` is the façade a user opens; it owns one :class:`StoreContext`
and hands it to every client it creates, so that no client needs the façade (nor the Spark
it may start) and nobody reaches into another module's private names. A context holds the
store's URI, its resolved settings, the table's log as this process follows it (one
:class:`engine.commit.TableLog`, shared), a reader of its data files, committers for client
ids, the topics, their creation on first use (``auto.create.topics.enable``) and the internal
``__consumer_offsets`` topic.

The functions below do the same over a bare :class:`engine.commit.Committer`, for code that
has no store but a table URI (the Spark connector's Python workers).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from lakelog.engine.commit import Committer, RetryPolicy, TableLog
from lakelog.engine.commit.markers import Reservation
from lakelog.engine.commit.partition_reader import PartitionReader
from lakelog.engine.errors import TopicExistsError
from lakelog.engine.settings import Settings
from lakelog.engine.topic_changes import plan_create, plan_create_offsets_topic
from lakelog.engine.topics import OFFSETS_TOPIC, TopicMetadata

log = logging.getLogger(__name__)


def commit_topic_creation(
    committer: Committer, name: str, partitions: int, config: Mapping[str, Any], policy: RetryPolicy
) -> int:
    """Create topic ``name`` in one Delta metadata commit (planned again after each conflict, so
    validation runs against what commits); returns the version. Raises as
    :func:`engine.topic_changes.plan_create` does (TopicExistsError, InvalidTopicError, ...)."""
    now = int(time.time() * 1000)
    return committer.change_topics(
        lambda topics, props: plan_create(
            topics, props, name=name, partitions=partitions, config=config, now_ms=now, client_id=committer.client_id
        ),
        policy,
    )


def auto_create_topics(
    committer: Committer, names: Iterable[str], settings: Settings, policy: RetryPolicy
) -> list[str]:
    """Create those of ``names`` that do not exist, as a Kafka broker with ``auto.create.topics.enable``
    creates a topic a client asks for: ``num.partitions`` partitions and the ``topic.*`` settings.

    The one place every lakelog client (producer, consumer, the Spark sink, ``lakelog serve``)
    auto-creates topics. Nothing is created when ``settings`` disable it. A topic another
    client created meanwhile is no error: both end with the one topic. Returns the names this
    call created, in the order given; logs one INFO line for each. Raises InvalidTopicError
    for a name :meth:`lakelog.store.Store.create_topic` refuses (bad characters, reserved for
    internal use, colliding with an existing topic) and what the commit raises
    (CommitConflictError, StoreError); topics created before the failing name stay.
    """
    if not settings.auto_create_topics_enable:
        return []
    created = []
    for name in dict.fromkeys(names):
        try:
            commit_topic_creation(committer, name, settings.num_partitions, settings.topic, policy)
        except TopicExistsError:
            continue  # another creator won the race; its topic is the one everybody uses
        log.info("created topic %r (auto.create.topics.enable) with %d partition(s)", name, settings.num_partitions)
        created.append(name)
    return created


def ensure_offsets_topic(committer: Committer, policy: RetryPolicy) -> int:
    """Create ``__consumer_offsets`` (Kafka's 50 partitions, compacted) if the table has none;
    its partition count. Another client creating it first is no error. Raises what the commit
    raises (CommitConflictError, StoreError)."""
    topic = committer.latest().topics.get(OFFSETS_TOPIC)
    if topic is not None:
        return topic.partitions
    now = int(time.time() * 1000)
    with contextlib.suppress(TopicExistsError):  # another client created it first
        committer.change_topics(
            lambda topics, props: plan_create_offsets_topic(topics, props, now_ms=now, client_id=committer.client_id),
            policy,
        )
    return committer.latest().topics[OFFSETS_TOPIC].partitions


class StoreContext:
    """One open store as its clients see it. Thread-safe; one per :class:`lakelog.store.Store`.

    ``uri`` is the store's normalized URI, ``settings`` its resolved settings, ``log`` the
    table's log followed by this process (every client of the store shares it) and ``records``
    a reader of its data files. While the context lives, offset reservations whose writer
    stopped renewing them are aborted when the log comes across them (their offsets are then
    skipped and readers no longer wait at them).
    """

    def __init__(self, uri: str, settings: Settings) -> None:
        self.uri = uri
        self.settings = settings
        self.log = TableLog(uri)
        self.records = PartitionReader(uri)
        self._lock = threading.Lock()
        self._admin: Committer | None = None
        self.log.on_expired_reservations(self._abort_expired)

    def _abort_expired(self, found: list[Reservation]) -> None:
        self.committer("lakelog-reservation-sweeper").abort_expired(RetryPolicy(retries=5, backoff_ms=20))

    @property
    def admin(self) -> Committer:
        """The store's own committer (client id ``lakelog-<pid>``): topic changes, ``write(df)``."""
        with self._lock:
            if self._admin is None:
                self._admin = Committer(self.log, f"lakelog-{os.getpid()}")
            return self._admin

    def committer(self, client_id: str) -> Committer:
        """A new committer of the store's table whose commits name ``client_id``."""
        return Committer(self.log, client_id)

    def latest_topics(self) -> dict[str, TopicMetadata]:
        """The topics (internal ones too) at the latest version of the table, by name."""
        return dict(self.log.latest().topics)

    def auto_create_topics(self, names: Iterable[str]) -> bool:
        """Create those of ``names`` that do not exist when the setting ``auto.create.topics.enable``
        is true (:func:`auto_create_topics`); whether it is. True: each of ``names`` exists now
        (unless deleted meanwhile). False: nothing was created. Raises as :func:`auto_create_topics`."""
        if not self.settings.auto_create_topics_enable:
            return False
        known = self.latest_topics()
        missing = [n for n in names if n not in known]
        if missing:
            auto_create_topics(self.admin, missing, self.settings, RetryPolicy())
        return True

    def has_offsets_topic(self) -> bool:
        """Whether ``__consumer_offsets`` exists (a group ever committed or joined)."""
        return OFFSETS_TOPIC in self.latest_topics()

    def ensure_offsets_topic(self) -> int:
        """Create ``__consumer_offsets`` if it does not exist; its partition count (see
        :func:`ensure_offsets_topic`)."""
        return ensure_offsets_topic(self.admin, RetryPolicy())
