"""The project's build backend: setuptools', plus lakelog's JVM library compiled into the wheel.

A wheel (or an install from the checkout) must carry lakelog/jvm/lakelog-jvm.jar; when it is missing or
older than jvm/src, jvm/build_jar.py compiles it first, and the isolated build environment then also
gets PySpark (its jars are the compile class path). Editable installs read the jar from the checkout
(``make setup`` builds it) and need nothing extra.
"""

from __future__ import annotations

from typing import Any

import build_jar
from setuptools import build_meta as _setuptools
from setuptools.build_meta import (  # noqa: F401 - the hooks this backend does not change
    build_editable,
    build_sdist,
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)


def _pyspark_importable() -> bool:
    import importlib.util

    return importlib.util.find_spec("pyspark") is not None


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    requires = list(_setuptools.get_requires_for_build_wheel(config_settings))
    if build_jar.stale() and not _pyspark_importable():
        requires.append(f"pyspark=={build_jar.pinned('pyspark')}")
    return requires


def build_wheel(
    wheel_directory: str, config_settings: dict[str, Any] | None = None, metadata_directory: str | None = None
) -> str:
    if build_jar.stale():
        build_jar.build()
    return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)
