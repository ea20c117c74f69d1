"""The Schema Registry over one store: ``_schemas`` read on each request, written through the commit core.

Reads fold the topic's records past the last one folded (the log's latest version
is looked up on every request, so an agent answers with what any other agent
committed before, and a restarted one folds the topic once and answers). Writes
append to the topic's one partition through :class:`engine.commit.Committer`: the
plan (the next id, the next version, the compatibility check) is made in the
batch's ``prepare`` against the records up to the partition's end, and the commit
core's conflict rule for appends (:func:`engine.commit.conflicts.append_verdict`)
re-plans whenever another writer appended to the partition first. Two agents
registering at once thus never give one id or one version twice: the loser plans
again on the winner's records (the same schema then finds the winner's id).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from copy import deepcopy
from typing import Any, TypeVar

import pyarrow as pa

from lakelog.engine.commit import RetryPolicy, TableLog, TableState
from lakelog.engine.commit.partition_reader import PartitionReader
from lakelog.engine.context import StoreContext, commit_topic_creation
from lakelog.engine.errors import RetriableError, StoreError, TopicExistsError
from lakelog.engine.groups.coordinator import record_rows
from lakelog.engine.topics import TopicMetadata, TopicPartition
from lakelog.schemas.registry_errors import StoreUnavailableError
from lakelog.schemas.schemas_topic import SCHEMAS_TOPIC, SCHEMAS_TOPIC_CONFIG, RegistryState
from lakelog.schemas.subject_rules import Records

log = logging.getLogger(__name__)

T = TypeVar("T")
TP = TopicPartition(SCHEMAS_TOPIC, 0)
# Registrations racing keep re-planning while others land; bounded by time, as Kafka's request.timeout.ms.
WRITE_POLICY = RetryPolicy(retries=1_000, backoff_ms=5, backoff_max_ms=200, timeout_ms=30_000)


class Registry:
    """The registry state of one store as of its latest version. Thread-safe."""

    def __init__(self, context: StoreContext, client_id: str = "lakelog-schema-registry") -> None:
        self._context = context
        self._committer = context.committer(client_id)
        self._lock = threading.Lock()
        self._state = RegistryState()
        # What readers get: a copy made after each fold that changed something, never mutated
        # afterwards (the plans and answers only read it), so a request costs no copy.
        self._snapshot = RegistryState()
        self._topic_id: str | None = None

    def state(self) -> RegistryState:
        """The state folded up to the table's latest version; callers must not change it."""
        return self._state_at(self._context.log.latest())

    def _state_at(self, view: TableState) -> RegistryState:
        with self._lock:
            topic = view.topics.get(SCHEMAS_TOPIC)
            if topic is None:
                return RegistryState()
            if topic.topic_id != self._topic_id:  # created, or deleted and created again
                self._state, self._snapshot, self._topic_id = RegistryState(), RegistryState(), topic.topic_id
            table = self._context.records.read(view.files_of(TP), TP, self._state.next_offset)
            if table.num_rows:
                fold_rows(self._state, table)
                self._snapshot = deepcopy(self._state)
            return self._snapshot

    def read(self, answer: Callable[[RegistryState], T]) -> T:
        """``answer`` of the latest state. Raises what it raises, StoreUnavailableError (50002) when
        the store cannot be read."""
        try:
            return answer(self.state())
        except StoreError as exc:
            raise StoreUnavailableError(f"Error while reading the store: {exc}") from exc

    def write(self, plan: Callable[[RegistryState], tuple[T, Records]]) -> T:
        """Append the records ``plan`` returns for the latest state, planned again on the newer state
        after every conflict; its answer. Raises what ``plan`` raises (nothing appended then) and
        StoreUnavailableError (50002) when the commit failed or kept conflicting."""
        answer, records = self.read(plan)
        if not records:  # nothing to write (a schema registered before): no commit
            return answer
        self._ensure_topic()
        batch = _SchemaRecordsBatch(self, plan)
        try:
            self._committer.append(batch, WRITE_POLICY)
        except (RetriableError, StoreError) as exc:
            raise StoreUnavailableError(f"Error while writing {SCHEMAS_TOPIC}: {exc}") from exc
        return batch.answer

    def _ensure_topic(self) -> None:
        if SCHEMAS_TOPIC in self._context.latest_topics():
            return
        with contextlib.suppress(TopicExistsError):  # another agent created it first
            commit_topic_creation(self._committer, SCHEMAS_TOPIC, 1, SCHEMAS_TOPIC_CONFIG, RetryPolicy())
            log.info("created topic %r for the schema registry", SCHEMAS_TOPIC)


def fold_rows(state: RegistryState, table: pa.Table) -> None:
    """Fold the ``_schemas`` records of ``table`` (the log's columns, in offset order) into ``state``."""
    state.fold(
        zip(
            table.column("offset").to_pylist(),
            table.column("key").to_pylist(),
            table.column("value").to_pylist(),
            strict=True,
        )
    )


def read_state(uri: str) -> RegistryState:
    """The registry state of the store at ``uri`` as of its latest Delta version, read from its
    ``_schemas`` topic with no agent running (Spark's Python workers, planning a typed read);
    empty when the topic does not exist. Raises StoreError when the store cannot be read."""
    view = TableLog(uri).latest()
    state = RegistryState()
    if SCHEMAS_TOPIC in view.topics:
        fold_rows(state, PartitionReader(uri).read(view.files_of(TP), TP, 0))
    return state


class _SchemaRecordsBatch:
    """The records of one registry write, planned in each attempt on the state at that attempt's view."""

    app_transactions = ()
    commit_when_empty = False
    operation = "schema_registry"

    def __init__(self, registry: Registry, plan: Callable[[RegistryState], tuple[Any, Records]]) -> None:
        self._registry = registry
        self._plan = plan
        self._records: Records = []
        self._now_ms = 0
        self.answer: Any = None

    def prepare(self, view: TableState) -> dict[TopicPartition, int]:
        self._now_ms = int(time.time() * 1000)
        self.answer, self._records = self._plan(self._registry._state_at(view))
        return {TP: len(self._records)} if self._records else {}

    def check(self, committed: Mapping[str, int], view: TableState) -> None:
        """The plan checks, against the records at ``view``."""

    def target_partitions(self, view: TableState) -> list[TopicPartition]:
        return [TP]

    def build(self, ends: Mapping[TopicPartition, int], topics: Mapping[str, TopicMetadata], append_time_ms: int):
        return record_rows(TP, ends.get(TP, 0), self._records, self._now_ms)
