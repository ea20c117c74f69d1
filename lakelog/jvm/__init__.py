"""lakelog's own JVM library, shipped as package data: ``lakelog-jvm.jar`` holds the Delta LogStores
(io.lakelog.storage), the partitioner UDF (io.lakelog.udf) and the ``format("lakelog")`` provider
(io.lakelog.spark). It is compiled from the repository's ``jvm/src`` by ``jvm/build_jar.py`` when a
wheel is built, or by ``make setup`` in a checkout."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

JAR_NAME = "lakelog-jvm.jar"


def jar_path() -> Path:
    """Where the jar is (or belongs) inside the installed package."""
    return Path(str(resources.files(__name__).joinpath(JAR_NAME)))
