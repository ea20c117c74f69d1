"""Reading topics as DataFrames with the schema of Spark's Kafka source.

A read is pinned to one Delta version: the offsets it resolves
("earliest"/"latest") and the rows it returns come from the same snapshot.
Its filter has a partition-only part (so Delta prunes partition
directories) and per-partition offset ranges (so Delta skips files by their
``offset`` min/max statistics).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from lakelog.engine.commit.data_files import FILE_PREFIX
from lakelog.engine.offsets import OffsetRange
from lakelog.engine.schema import KAFKA_SOURCE_SELECT
from lakelog.engine.topics import TopicPartition
from lakelog.schemas.spark_columns import sql_string

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def partition_predicate(tps: Iterable[TopicPartition]) -> str:
    """SQL over the partition columns that matches exactly ``tps`` (Delta prunes directories by it)."""
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


def range_filter(ranges: Iterable[OffsetRange]) -> str | None:
    """SQL selecting exactly the rows of ``ranges``; None when they are all empty."""
    ranges = [r for r in ranges if r.count > 0]
    if not ranges:
        return None
    partitions = partition_predicate(r.tp for r in ranges)
    offsets = " OR ".join(
        f"(`topic` = {sql_string(r.tp.topic)} AND `partition` = {r.tp.partition} "
        f"AND `offset` >= {r.start} AND `offset` < {r.end})"
        for r in sorted(ranges, key=lambda r: r.tp)
    )
    return f"({partitions}) AND ({offsets})"


def log_table(spark: SparkSession, uri: str, version: int) -> DataFrame:
    return spark.read.format("delta").option("versionAsOf", version).load(uri)


def topic_frame(
    spark: SparkSession, uri: str, version: int, ranges: Iterable[OffsetRange], *, one_per_offset: bool = False
) -> DataFrame:
    """The records of ``ranges`` at ``version``, as Spark's Kafka source shapes them.

    With ``one_per_offset`` (files overlap: another writer's rows may repeat an offset),
    each offset's row is chosen as :class:`engine.commit.partition_reader.PartitionReader` chooses
    it: the one in lakelog's own file, else the earliest written.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    condition = range_filter(ranges)
    table = log_table(spark, uri, version)
    table = table.where("false") if condition is None else table.where(condition)
    if one_per_offset:
        preference = Window.partitionBy("topic", "partition", "offset").orderBy(
            F.when(F.col("_metadata.file_name").startswith(FILE_PREFIX), 0).otherwise(1),
            F.col("_metadata.file_modification_time"),
            F.col("_metadata.file_name"),
        )
        table = table.withColumn("__rank", F.row_number().over(preference)).where("__rank = 1").drop("__rank")
    return table.selectExpr(*KAFKA_SOURCE_SELECT)
