"""Loading kio (Kafka's message schemas as Python types) without touching the working directory.

kio (0.6, ``kio/static/_phantom.py``) imports hypothesis whenever it is installed, only to
register test strategies for its types, and hypothesis then writes its ``.hypothesis/``
directory (a Unicode table cache) into the working directory: ``lakelog serve``, the
quickstart and every Spark verb whose consumers exchange Kafka's consumer-protocol bytes left
one wherever they ran. kio treats hypothesis as optional (``except ImportError``), so it is
hidden while kio's types load; a process that imported hypothesis itself (a test suite) keeps
it, and hypothesis imports normally afterwards.
"""

from __future__ import annotations

import importlib
import sys


def import_kio_without_hypothesis() -> None:
    """Import kio's types (idempotent: later imports of kio find them loaded)."""
    if "hypothesis" in sys.modules or "kio.schema.errors" in sys.modules:
        importlib.import_module("kio.schema.errors")
        return
    sys.modules["hypothesis"] = None  # type: ignore[assignment]  # `import hypothesis` raises ImportError
    try:
        importlib.import_module("kio.schema.errors")
    finally:
        del sys.modules["hypothesis"]
