"""A Kafka-protocol endpoint over a lakelog store (``lakelog serve``): Kafka clients and tools
produce to and fetch from the store's topics, join its groups and run transactions; every
write goes through the commit core.

* :mod:`kafka_endpoint.server` -- the listener: frames in, responses out, in order;
* :mod:`kafka_endpoint.endpoint` -- the dispatch of each API (keyed by kio's API keys) to
  its area, and ApiVersions;
* the areas: :mod:`kafka_endpoint.produce`, :mod:`kafka_endpoint.fetch` (and ListOffsets),
  :mod:`kafka_endpoint.groups` (the group coordinator's APIs), :mod:`kafka_endpoint.transactions`,
  :mod:`kafka_endpoint.admin` (Metadata, topics, configs);
* what they use: :mod:`kafka_endpoint.messages` (kio messages, ``build``),
  :mod:`kafka_endpoint.record_batches` (record batches v2), :mod:`kafka_endpoint.error_codes`,
  :mod:`kafka_endpoint.produce_linger` (produce requests sharing commits),
  :mod:`kafka_endpoint.idempotence`, :mod:`kafka_endpoint.txn_proxy` (transactional ids' producers).
"""

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
