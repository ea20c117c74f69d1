"""spark_connector.register: which names it gives the Python data source -- no Spark."""

from __future__ import annotations

import pytest
from pyspark.errors import AnalysisException

from spark_connector import register
from spark_connector.data_source import LakelogDataSource, LakelogPythonDataSource


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
