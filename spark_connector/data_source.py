"""The ``lakelog`` format: a PySpark Python Data Source (``pyspark.sql.datasource``).

Spark builds it in a Python worker from the query's options; every option
is checked there, so a wrong option fails the query at start with an
:class:`engine.errors.InvalidConfigError` naming it.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from spark_connector.options import parse_sink_options, parse_source_options
from spark_connector.sink import LakelogBatchWriter, LakelogStreamWriter, check_sink_schema
from spark_connector.source import LakelogBatchReader, LakelogStreamReader, kafka_schema


class LakelogDataSource(DataSource):
    """``format("lakelog")``: read topics like Spark's Kafka source, write them like its sink."""

    @classmethod
    def name(cls) -> str:
        return "lakelog"

    def schema(self) -> StructType:
        # Spark asks for the schema at load(): the options fail there, not at query start.
        return kafka_schema(parse_source_options(self.options, streaming=None).include_headers)

    def reader(self, schema: StructType) -> LakelogBatchReader:
        return LakelogBatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> LakelogStreamReader:
        return LakelogStreamReader(parse_source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> LakelogBatchWriter:
        options = parse_sink_options(self.options)
        if overwrite:
            from engine.errors import InvalidConfigError

            raise InvalidConfigError("topics are append-only: write with mode('append')")
        check_sink_schema(schema, options)
        return LakelogBatchWriter(options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> LakelogStreamWriter:
        options = parse_sink_options(self.options)
        if overwrite:
            from engine.errors import InvalidConfigError

            raise InvalidConfigError("topics are append-only: use outputMode('append')")
        check_sink_schema(schema, options)
        return LakelogStreamWriter(options, schema)
