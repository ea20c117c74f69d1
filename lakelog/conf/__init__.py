"""lakelog's configuration files, shipped as package data.

``spark-defaults.conf`` holds the Spark and Delta settings of the sessions
lakelog builds itself, ``log4j2.properties`` keeps the JVM quiet, and
``lakelog.conf`` lakelog's own defaults (read by :mod:`engine.settings`).
"""

from __future__ import annotations

from pathlib import Path


def conf_path(name: str) -> Path:
    """Filesystem path of a file in this package."""
    # Beside this module: the package is installed as files (a path is what callers need, and
    # what importlib.resources gave here too); importing importlib.resources brings tempfile,
    # shutil and the compression modules into every process's start.
    return Path(__file__).parent / name


def read_properties(name: str) -> dict[str, str]:
    """Parse a ``spark-defaults.conf``-style file of this package."""
    return parse_properties(conf_path(name).read_text(encoding="utf-8"))


def parse_properties(text: str) -> dict[str, str]:
    """``key value`` lines (or ``key=value``), ``#`` comments, as Spark's spark-defaults.conf."""
    values: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 1)
        if "=" in parts[0]:  # key=value, as Java properties also allow
            key, _, value = line.partition("=")
        else:
            key, value = parts[0], parts[1] if len(parts) > 1 else ""
        values[key.strip()] = value.strip()
    return values
