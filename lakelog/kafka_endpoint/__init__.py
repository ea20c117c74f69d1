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

from lakelog.engine.kio_import import import_kio_without_hypothesis

# Before any module of this package imports kio.
import_kio_without_hypothesis()
