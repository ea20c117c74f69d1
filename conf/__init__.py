"""lakelog's configuration files, shipped as package data.

``spark-defaults.conf`` holds the Spark and Delta settings of the sessions
lakelog builds itself, ``log4j2.properties`` keeps the JVM quiet.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def conf_path(name: str) -> Path:
    """Filesystem path of a file in this package."""
    return Path(str(resources.files(__name__).joinpath(name)))


def read_properties(name: str) -> dict[str, str]:
    """Parse a ``spark-defaults.conf``-style file: ``key value`` lines, ``#`` comments."""
    values: dict[str, str] = {}
    for raw in conf_path(name).read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 1)
        values[parts[0]] = parts[1].strip() if len(parts) > 1 else ""
    return values
