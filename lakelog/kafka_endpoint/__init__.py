"""A Kafka-protocol endpoint over a lakelog store (``lakelog serve``): Kafka clients and tools
produce to and fetch from the store's topics; every write goes through the commit core."""

from __future__ import annotations

import importlib
import sys


def _import_kio_without_hypothesis() -> None:
    """Import kio's types with hypothesis hidden.

    kio (0.6, ``kio/static/_phantom.py``) imports hypothesis whenever it is
    installed, only to register test strategies for its types, and hypothesis
    then writes its ``.hypothesis/`` directory (a Unicode table cache) into the
    working directory: ``lakelog serve`` and ``quickstart`` left one wherever
    they ran. kio treats hypothesis as optional (``except ImportError``), so it
    is hidden while kio's types load; a process that imported hypothesis itself
    (a test suite) keeps it, and hypothesis imports normally afterwards.
    """
    if "hypothesis" in sys.modules:
        importlib.import_module("kio.schema.errors")
        return
    sys.modules["hypothesis"] = None  # type: ignore[assignment]  # `import hypothesis` raises ImportError
    try:
        importlib.import_module("kio.schema.errors")
    finally:
        del sys.modules["hypothesis"]


# Before any module of this package imports kio.
_import_kio_without_hypothesis()
