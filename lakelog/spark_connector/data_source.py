"""The ``lakelog`` format: a PySpark Python Data Source (``pyspark.sql.datasource``).

Spark builds it in a Python worker from the query's options; every option
is checked there, so a wrong option fails ``load()`` (a read) or ``save()`` /
``start()`` (a write) with an :class:`engine.errors.InvalidConfigError`
naming it. Options of Kafka's that mean nothing here are logged once, when
the source is loaded or the sink created.

With lakelog-jvm.jar, ``format("lakelog")`` is the JVM provider
``io.lakelog.spark.LakelogProvider`` (jvm/src/main/java/io/lakelog/spark/),
which runs :class:`LakelogPythonDataSource` and adds the Kafka source's
progress metrics; see :func:`spark_connector.register`.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from lakelog.engine.errors import InvalidConfigError
from lakelog.spark_connector.options import parse_sink_options, parse_source_options, warn_ignored
from lakelog.spark_connector.sink import LakelogBatchWriter, LakelogStreamWriter, check_sink_schema
from lakelog.spark_connector.source import (
    FailedStreamReader,
    LakelogBatchReader,
    LakelogStreamReader,
    kafka_schema,
    typed_schema,
)

# The name the JVM provider delegates to (LakelogProvider.PYTHON_SOURCE).
PYTHON_SOURCE_NAME = "lakelog_python"


class LakelogDataSource(DataSource):
    """``format("lakelog")``: read topics like Spark's Kafka source, write them like its sink."""

    @classmethod
    def name(cls) -> str:
        return "lakelog"

    def schema(self) -> StructType:
        # Spark asks for the schema at load(): the options fail there, not at query start
        # (batch- or streaming-only ones too when LakelogProvider says which the read is).
        options = parse_source_options(self.options, streaming=None)
        warn_ignored(options.ignored, "source")
        return typed_schema(kafka_schema(options.include_headers), options, self.options)

    def reader(self, schema: StructType) -> LakelogBatchReader:
        return LakelogBatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> LakelogStreamReader | FailedStreamReader:
        # PySpark 4.2's stream runner (python_streaming_source_runner.py) calls reader.stop()
        # in a `finally` even when this raised, so the error would reach the query as
        # "UnboundLocalError: ... 'reader'". The reader that fails on first use keeps it.
        try:
            return LakelogStreamReader(parse_source_options(self.options, streaming=True))
        except InvalidConfigError as error:
            return FailedStreamReader(error)

    def writer(self, schema: StructType, overwrite: bool) -> LakelogBatchWriter:
        options = parse_sink_options(self.options)
        warn_ignored(options.ignored, "sink")
        if overwrite:
            raise InvalidConfigError("topics are append-only: write with mode('append')")
        check_sink_schema(schema, options)
        return LakelogBatchWriter(options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> LakelogStreamWriter:
        options = parse_sink_options(self.options)
        warn_ignored(options.ignored, "sink")
        if overwrite:
            raise InvalidConfigError("topics are append-only: use outputMode('append')")
        check_sink_schema(schema, options)
        return LakelogStreamWriter(options, schema)


class LakelogPythonDataSource(LakelogDataSource):
    """The same data source under the name lakelog-jvm.jar's ``lakelog`` provider runs.

    Spark's Python worker checks the name it was asked for against
    ``name()`` (pyspark/sql/worker/create_data_source.py), hence a class.
    """

    @classmethod
    def name(cls) -> str:
        return PYTHON_SOURCE_NAME
