"""What the endpoint answers over one store: the dispatch of each Kafka API to its area.

The APIs are answered by area, each in a module of its own: :mod:`kafka_endpoint.produce`
(Produce), :mod:`kafka_endpoint.fetch` (Fetch, ListOffsets), :mod:`kafka_endpoint.groups`
(the group coordinator's APIs), :mod:`kafka_endpoint.transactions` (producer ids and
transactions), :mod:`kafka_endpoint.transaction_states` (what kafka-transactions describes)
and :mod:`kafka_endpoint.admin` (Metadata, topics and configs, DeleteRecords). Each area
keys its handlers and the versions it parses by the API keys of kio's request classes;
ApiVersions, answered here, tells clients the union. Errors are Kafka's codes
(:mod:`kafka_endpoint.error_codes`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode

from lakelog.kafka_endpoint import (
    admin,
    fetch,
    groups,
    produce,
    sasl,
    security_apis,
    transaction_states,
    transactions,
)
from lakelog.kafka_endpoint.admin import AdminApis
from lakelog.kafka_endpoint.authorization import RequestAuthorizer
from lakelog.kafka_endpoint.fetch import FETCH, FetchApis
from lakelog.kafka_endpoint.groups import GroupApis
from lakelog.kafka_endpoint.messages import Request, api_key, build, response_class
from lakelog.kafka_endpoint.produce import ProduceApis, StartedProduce
from lakelog.kafka_endpoint.sasl import SaslApis
from lakelog.kafka_endpoint.security_apis import SecurityApis
from lakelog.kafka_endpoint.transaction_states import TransactionStateApis
from lakelog.kafka_endpoint.transactions import TransactionApis
from lakelog.store import Store

API_VERSIONS = api_key(ApiVersionsRequest)

# The versions this endpoint parses and answers, per API key (ApiVersions tells clients).
SUPPORTED: dict[int, tuple[int, int]] = {
    API_VERSIONS: (0, 3),
    **produce.VERSIONS,
    **fetch.VERSIONS,
    **groups.VERSIONS,
    **transactions.VERSIONS,
    **transaction_states.VERSIONS,
    **admin.VERSIONS,
    **sasl.VERSIONS,
    **security_apis.VERSIONS,
}


def api_versions_body(api_version: int, code: ErrorCode = ErrorCode.none) -> Any:
    """An ApiVersions response of ``api_version`` listing :data:`SUPPORTED` (with ``code``:
    UNSUPPORTED_VERSION for a client asking a newer version than served, as Kafka answers)."""
    keys = [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in sorted(SUPPORTED.items())]
    return build(response_class(API_VERSIONS, api_version), error_code=code, api_keys=keys)


@dataclass
class Endpoint:
    """The store behind one agent: its address (advertised as node 0) and what it answers."""

    store: Store
    host: str
    port: int
    cluster_id: str = "lakelog"
    # Produce requests arriving within this long of each other share one Delta commit.
    linger_ms: float = 5.0
    # The agent's metrics (kafka_endpoint.metrics.Metrics), told of every Produce commit; None: none kept.
    metrics: Any = None

    def __post_init__(self) -> None:
        self.transactions = TransactionApis(self.store)
        observe = self.metrics.committed if self.metrics is not None else None
        self.produce = ProduceApis(self.store, self.transactions, self.linger_ms, observe)
        self.fetch = FetchApis(self.store)
        self.groups = GroupApis(self.store, self.host, self.port)
        self.admin = AdminApis(self.store, self.host, self.port, self.cluster_id)
        self.transaction_states = TransactionStateApis(self.store, self.transactions.held)
        serve_settings = self.store.settings.serve
        self.sasl = SaslApis(self.store.uri, serve_settings["sasl.enabled.mechanisms"])
        self.security = SecurityApis(self.store.uri)
        self.authorizer = RequestAuthorizer(
            self.store.uri,
            serve_settings,
            self.store.context.latest_topics,
            self.store.settings.auto_create_topics_enable,
        )
        self._handlers: dict[int, Callable[[Request], Any]] = {
            API_VERSIONS: lambda request: api_versions_body(request.api_version),
            **self.produce.handlers(),
            **self.fetch.handlers(),
            **self.groups.handlers(),
            **self.transactions.handlers(),
            **self.transaction_states.handlers(),
            **self.admin.handlers(),
            **self.sasl.handlers(),
            **self.security.handlers(),
        }

    def close(self) -> None:
        self.produce.close()
        self.groups.close()
        self.transactions.close()

    def start_produce(self, request: Request) -> StartedProduce:
        """A Produce request handed to its commits (see
        :meth:`kafka_endpoint.produce.ProduceApis.start`). Topics the connection's principal may
        not write are taken out before (:mod:`kafka_endpoint.authorization`) and answered refused."""
        decision = self.authorizer.decide(request)
        if decision.answer is not None:
            return StartedProduce((), lambda: decision.answer)
        started = self.produce.start(decision.request)
        return StartedProduce(started.waits, lambda: decision.complete(started.answer()))

    def handle(self, request: Request, stopping: Callable[[], bool] = lambda: False) -> Any | None:
        """The response body for ``request``; None when none is sent (Produce with acks=0). A
        Fetch waiting for records (long polling) returns early once ``stopping()``. With an
        authorizer set, what the connection's principal may not do is answered refused and
        not handled (:mod:`kafka_endpoint.authorization`)."""
        decision = self.authorizer.decide(request)
        if decision.answer is not None:
            return decision.answer
        request = decision.request
        if request.api_key == FETCH:
            return decision.complete(self.fetch.fetch(request, stopping))
        return decision.complete(self._handlers[request.api_key](request))
