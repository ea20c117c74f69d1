"""Delta's optimistic transaction, driven through py4j.

Every lakelog commit goes through ``OptimisticTransaction`` so that it
*reads* what it depends on (see DESIGN.md, "the one invariant"):
``trackReadPredicates`` with partition-only predicates on the partitions a
commit appends to makes Delta's conflict checker fail it with
ConcurrentAppendException when a concurrent commit added files to one of
them (ConflictChecker.checkForAddedFilesThatShouldHaveBeenReadByCurrentTxn,
delta-io/delta v4.4.0), while commits to other partitions are merged by
Delta's own retry. Because the commit records a read, it is not a blind
append, so concurrent lakelog writers conflict with it too.

This module only translates between Python values and JVM objects; what to
commit is decided in :mod:`engine.commit`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from py4j.protocol import Py4JError
from pyspark.errors.exceptions.captured import CapturedException
from pyspark.sql import DataFrame, SparkSession

from engine.errors import StoreError
from engine.offsets import FileStats, TopicPartition

# What a call into the JVM may raise: py4j's own errors, or PySpark's
# conversion of Spark's exceptions.
JVM_ERRORS = (Py4JError, CapturedException)

# Delta's conflict exceptions (io.delta.exceptions.Concurrent*Exception,
# MetadataChangedException, ProtocolChangedException) share no useful
# Python base class, but on the JVM they all extend this one.
_CONFLICT_BASE = "java.util.ConcurrentModificationException"
_CONFLICT_NAMES = frozenset(
    {
        "ConcurrentAppendException",
        "ConcurrentDeleteReadException",
        "ConcurrentDeleteDeleteException",
        "ConcurrentTransactionException",
        "ConcurrentWriteException",
        "MetadataChangedException",
        "ProtocolChangedException",
    }
)


def is_conflict(class_names: Sequence[str]) -> bool:
    """True when a JVM exception's class chain marks a commit conflict (safe to retry)."""
    return any(name == _CONFLICT_BASE or name.rsplit(".", 1)[-1] in _CONFLICT_NAMES for name in class_names)


def _java_exception(error: BaseException) -> Any:
    # Py4JJavaError keeps it as java_exception; PySpark's CapturedException
    # (what PySpark turns Spark's own errors into) as _origin.
    return getattr(error, "java_exception", None) or getattr(error, "_origin", None)


def java_class_chain(error: BaseException) -> list[str]:
    """Class names of a JVM error's exception and its superclasses (empty for other errors)."""
    java_exc = _java_exception(error)
    if java_exc is None:
        return []
    names = []
    try:
        cls = java_exc.getClass()
        while cls is not None:
            names.append(cls.getName())
            cls = cls.getSuperclass()
    except Exception:  # the gateway itself may be gone; then nothing is known
        return names
    return names


def java_message(error: BaseException) -> str:
    java_exc = _java_exception(error)
    if java_exc is not None:
        try:
            return str(java_exc.getMessage() or java_exc.toString())
        except Exception:
            pass
    return str(error)


def partition_predicate(tps: Iterable[TopicPartition]) -> str:
    """SQL over the partition columns that matches exactly ``tps``."""
    by_topic: dict[str, list[int]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    if not by_topic:
        return "false"
    clauses = []
    for topic, parts in sorted(by_topic.items()):
        values = ", ".join(str(p) for p in sorted(set(parts)))
        clauses.append(f"(`topic` = {sql_string(topic)} AND `partition` IN ({values}))")
    return " OR ".join(clauses)


def topic_predicate(topic: str) -> str:
    return f"`topic` = {sql_string(topic)}"


def sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass
class WrittenFiles:
    """Data files written for a transaction but not yet committed."""

    actions: Any  # scala Seq[FileAction]
    stats: list[FileStats]


class Jvm:
    """Conversions between Python values and Scala collections/options."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.jvm = spark._jvm
        self.jspark = spark._jsparkSession
        self._utils = self.jvm.org.apache.spark.api.python.PythonUtils
        self.none = getattr(getattr(self.jvm.scala, "None$"), "MODULE$")

    def seq(self, items: Iterable[Any]) -> Any:
        array = self.jvm.java.util.ArrayList()
        for item in items:
            array.add(item)
        return self._utils.toSeq(array)

    def seq_items(self, seq: Any) -> list[Any]:
        return list(self.jvm.scala.jdk.javaapi.CollectionConverters.asJava(seq))

    def scala_map(self, values: Mapping[str, str]) -> Any:
        hashmap = self.jvm.java.util.HashMap()
        for k, v in values.items():
            hashmap.put(k, v)
        return self._utils.toScalaMap(hashmap)

    def py_map(self, scala_map: Any) -> dict[str, str]:
        return dict(self.jvm.scala.jdk.javaapi.CollectionConverters.asJava(scala_map))

    def some(self, value: Any) -> Any:
        return self.jvm.scala.Some(value)

    def expression(self, sql: str) -> Any:
        return self.jspark.sessionState().sqlParser().parseExpression(sql)

    def new_padded(self, java_class: Any, *leading: Any) -> Any:
        """Construct a Scala case class, filling trailing Option parameters with None.

        DeltaOperations' case classes gain optional parameters between
        releases; padding keeps this working across them.
        """
        constructors = java_class._java_lang_class.getConstructors()
        arity = max(c.getParameterCount() for c in constructors)
        args = list(leading) + [self.none] * (arity - len(leading))
        return java_class(*args)


class DeltaTableHandle:
    """One Delta table's DeltaLog; starts transactions on it."""

    def __init__(self, spark: SparkSession, uri: str) -> None:
        self.jvm = Jvm(spark)
        delta = self.jvm.jvm.org.apache.spark.sql.delta
        if type(delta.DeltaLog).__name__ != "JavaClass":
            raise StoreError(
                "Delta Lake's classes are not on the Spark classpath: build the session with "
                "engine.session.build_session() or add io.delta:delta-spark to spark.jars"
            )
        self._delta = delta
        self.uri = uri
        self._log = delta.DeltaLog.forTable(self.jvm.jspark, uri)

    def start(self) -> DeltaTxn:
        return DeltaTxn(self, self._log.startTransaction())

    def latest_version(self) -> int:
        return int(self._log.update(False, self.jvm.none, self.jvm.none).version())

    # Operations as they appear in DESCRIBE HISTORY.
    def append_operation(self, user_metadata: str) -> Any:
        mode = self.jvm.jvm.org.apache.spark.sql.SaveMode.Append
        return self.jvm.new_padded(
            self._delta.DeltaOperations.Write, mode, self.jvm.none, self.jvm.none, self.jvm.some(user_metadata)
        )

    def set_properties_operation(self, properties: Mapping[str, str]) -> Any:
        return self._delta.DeltaOperations.SetTableProperties(self.jvm.scala_map(properties))

    def delete_operation(self, predicate_sql: str, user_metadata: str) -> Any:
        # An overwrite of the matching partitions with nothing: Delta's own
        # Delete operation insists on DML metrics a hand-made commit lacks.
        mode = self.jvm.jvm.org.apache.spark.sql.SaveMode.Overwrite
        return self.jvm.new_padded(
            self._delta.DeltaOperations.Write,
            mode,
            self.jvm.none,
            self.jvm.some(predicate_sql),
            self.jvm.some(user_metadata),
        )


class DeltaTxn:
    """A started OptimisticTransaction. Not thread-safe; use from one thread."""

    def __init__(self, table: DeltaTableHandle, txn: Any) -> None:
        self._table = table
        self._jvm = table.jvm
        self._txn = txn
        self.read_version = int(txn.readVersion())

    def configuration(self) -> dict[str, str]:
        return self._jvm.py_map(self._txn.metadata().configuration())

    def track_partitions(self, tps: Iterable[TopicPartition]) -> None:
        """Record a read of these partitions, so concurrent appends to them conflict."""
        predicate = self._jvm.expression(partition_predicate(tps))
        self._txn.trackReadPredicates(self._jvm.seq([predicate]), True, True)

    def files_of_topic(self, topic: str) -> list[Any]:
        """The topic's live AddFiles (recording the read)."""
        files = self._txn.filterFiles(self._jvm.seq([self._jvm.expression(topic_predicate(topic))]), False)
        return self._jvm.seq_items(files)

    def read_app(self, app_id: str) -> None:
        """Record a read of application transaction ``app_id``: a concurrent commit that
        sets it makes this transaction fail with ConcurrentTransactionException.

        What ``txnVersion(app_id)`` records, without its cost: that call
        reconstructs the snapshot's transaction set with a Spark job (~1 s)
        in every commit, while the version itself is known from the writer's
        view (:attr:`engine.log_view.LogView.app_versions`).
        """
        self._txn.readTxn().append(app_id)

    def set_transaction(self, app_id: str, version: int, now_ms: int) -> Any:
        """A SetTransaction action (Delta's ``txn``: appId/version) for :meth:`commit`'s ``extra``."""
        last_updated = self._jvm.some(self._jvm.jvm.java.lang.Long.valueOf(now_ms))
        return self._table._delta.actions.SetTransaction(app_id, version, last_updated)

    def add_files(self, add_jsons: Iterable[str], stats: list[FileStats]) -> WrittenFiles:
        """Files written outside Spark (:mod:`engine.data_files`) as actions of this transaction."""
        from_json = self._table._delta.actions.Action.fromJson
        return WrittenFiles(self._jvm.seq([from_json(text) for text in add_jsons]), stats)

    def write_files(self, df: DataFrame) -> WrittenFiles:
        actions = self._txn.writeFiles(df._jdf)
        stats = []
        for action in self._jvm.seq_items(actions):
            parsed = json.loads(action.json())
            if "add" in parsed:
                stats.append(FileStats.from_add(parsed["add"]))
        return WrittenFiles(actions, stats)

    def update_configuration(self, properties: Mapping[str, str]) -> None:
        """Replace the table configuration (a Delta metadata change) in this transaction."""
        metadata = self._txn.metadata()
        arity = metadata.productArity()
        names = [metadata.productElementName(i) for i in range(arity)]
        args = [metadata.productElement(i) for i in range(arity)]
        args[names.index("configuration")] = self._jvm.scala_map(properties)
        self._txn.updateMetadata(self._table._delta.actions.Metadata(*args), False)

    def commit(
        self,
        actions: Iterable[Any] | WrittenFiles,
        operation: Any,
        tags: Mapping[str, str],
        extra: Sequence[Any] = (),
    ) -> int:
        """Commit ``actions`` (JVM actions, or what write_files wrote) plus ``extra``
        actions; raises the JVM's error on conflict or failure (classified by the caller)."""
        if isinstance(actions, WrittenFiles):
            seq = actions.actions
            if extra:
                seq = self._jvm.seq([*self._jvm.seq_items(seq), *extra])
        else:
            seq = self._jvm.seq([*actions, *extra])
        return int(self._txn.commit(seq, operation, self._jvm.scala_map(tags)))

    @staticmethod
    def removes(add_files: Iterable[Any]) -> list[Any]:
        return [f.remove() for f in add_files]
