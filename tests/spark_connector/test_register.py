"""lakelog.spark_connector.register: which names it gives the Python data source; a second session."""

from __future__ import annotations

import pytest
from pyspark.errors import AnalysisException

from lakelog.spark_connector import register
from lakelog.spark_connector.data_source import LakelogDataSource, LakelogPythonDataSource


class Refused(AnalysisException):
    def __init__(self, condition: str) -> None:
        super().__init__(message=condition)
        self.condition = condition

    def getCondition(self) -> str:
        return self.condition


class FakeSession:
    """Records registrations; ``jvm_lakelog`` stands for lakelog-jvm.jar on spark.jars."""

    def __init__(self, jvm_lakelog: bool, other_error: str | None = None) -> None:
        self.names: list[str] = []
        self.jvm_lakelog = jvm_lakelog
        self.other_error = other_error
        self.dataSource = self

    def register(self, source: type) -> None:
        if source.name() == "lakelog" and self.other_error:
            raise Refused(self.other_error)
        if source.name() == "lakelog" and self.jvm_lakelog:
            raise Refused("DATA_SOURCE_ALREADY_EXISTS")  # DataSourceRegistration.checkDataSourceExists
        self.names.append(source.name())


def test_with_the_jvm_provider_the_python_source_is_only_lakelog_python():
    spark = FakeSession(jvm_lakelog=True)
    register(spark)
    register(spark)  # idempotent
    assert spark.names == [LakelogPythonDataSource.name()] == ["lakelog_python"]


def test_without_the_jar_the_python_source_is_lakelog_itself():
    spark = FakeSession(jvm_lakelog=False)
    register(spark)
    assert spark.names == ["lakelog_python", LakelogDataSource.name()]


def test_any_other_registration_error_is_raised():
    with pytest.raises(AnalysisException):
        register(FakeSession(jvm_lakelog=False, other_error="SOMETHING_ELSE"))


@pytest.mark.spark
def test_a_second_session_gets_format_lakelog_too(spark, store):
    """spark.newSession() shares the SparkContext but not the registered Python data sources."""
    from lakelog.engine import LogStore

    store.create_topic("t", partitions=1)
    with store.producer() as producer:
        producer.send("t", key=b"k", value=b"v")
    other = spark.newSession()
    reopened = LogStore.open(store.uri, spark=other)  # registers in `other`
    assert reopened.read("t").count() == 1
    frame = other.read.format("lakelog").option("path", store.uri).option("subscribe", "t").load()
    assert [(r.key, r.value) for r in frame.collect()] == [(b"k", b"v")]
    # and the first session still has it
    assert spark.read.format("lakelog").option("path", store.uri).option("subscribe", "t").load().count() == 1
