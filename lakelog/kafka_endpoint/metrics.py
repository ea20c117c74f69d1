"""What an operator scrapes from an agent: ``--metrics-listen HOST:PORT`` serves Prometheus' text
format (``prometheus_client``) at ``/metrics`` and ``200 ok`` at ``/health``.

Metrics (each agent its own registry; names follow Prometheus' conventions):

* ``lakelog_requests_total{api,error}`` -- requests answered, by Kafka API name and the first
  error code of the answer that is not NONE (``none`` when all are);
* ``lakelog_request_latency_seconds{api}`` -- from the request read to its answer ready (histogram);
* ``lakelog_bytes_in_total`` / ``lakelog_bytes_out_total`` -- request and response frames;
* ``lakelog_open_connections{listener}`` and ``lakelog_connections_total{listener}`` (accepted);
* ``lakelog_commit_latency_seconds`` -- the served Produce requests' Delta commits (histogram),
  ``lakelog_commit_conflicts_total`` -- attempts lost to a concurrent commit and retried,
  ``lakelog_commit_batch_requests`` -- Produce requests sharing one commit (histogram);
* ``lakelog_consumer_group_lag{group,topic,partition}`` and
  ``lakelog_consumer_group_committed_offset{...}`` -- computed from the store at scrape time
  (every group's committed offsets against the partitions' end offsets), so every agent of a
  store shows the same lag.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from lakelog.kafka_endpoint.unexpected_errors import response_errors

log = logging.getLogger(__name__)


class GroupLag(Collector):
    """Consumer-group lag read from the store when scraped."""

    def __init__(self, context: Any) -> None:
        self._context = context

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from lakelog.engine.admin.groups import describe_group, list_groups

        labels = ["group", "topic", "partition"]
        lag = GaugeMetricFamily(
            "lakelog_consumer_group_lag", "Records after the group's committed offset", labels=labels
        )
        committed = GaugeMetricFamily(
            "lakelog_consumer_group_committed_offset", "The group's committed offset", labels=labels
        )
        try:
            for listing in list_groups(self._context):
                for p in describe_group(self._context, listing.group_id).partitions:
                    where = [listing.group_id, p.topic, str(p.partition)]
                    if p.committed is not None:
                        committed.add_metric(where, p.committed)
                    if p.lag is not None:
                        lag.add_metric(where, p.lag)
        except Exception:  # a scrape must answer even when the store cannot be read now
            log.exception("reading consumer group lag for metrics failed")
        yield lag
        yield committed


class Metrics:
    """One agent's metrics and the HTTP endpoint serving them. Thread-safe (prometheus_client's)."""

    def __init__(self, context: Any | None = None) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("lakelog_requests", "Requests answered", ["api", "error"], registry=r)
        self.latency = Histogram("lakelog_request_latency_seconds", "Request latency", ["api"], registry=r)
        self.bytes_in = Counter("lakelog_bytes_in", "Request bytes read", registry=r)
        self.bytes_out = Counter("lakelog_bytes_out", "Response bytes written", registry=r)
        self.connections = Gauge("lakelog_open_connections", "Open connections", ["listener"], registry=r)
        self.connections_total = Counter("lakelog_connections", "Connections accepted", ["listener"], registry=r)
        self.commit_latency = Histogram("lakelog_commit_latency_seconds", "Produce commits' latency", registry=r)
        self.commit_conflicts = Counter(
            "lakelog_commit_conflicts", "Commit attempts lost to a concurrent commit", registry=r
        )
        self.commit_batch = Histogram(
            "lakelog_commit_batch_requests",
            "Produce requests sharing one commit",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
            registry=r,
        )
        if context is not None:
            r.register(GroupLag(context))
        self._server: WSGIServer | None = None

    def answered(self, api: str, body: Any, seconds: float) -> None:
        """Count one answered request of ``api`` whose response is ``body`` (None: no answer)."""
        first = next(iter(response_errors(body)), None) if body is not None else None
        self.requests.labels(api, first[0].name if first is not None else "none").inc()
        self.latency.labels(api).observe(seconds)

    def committed(self, seconds: float, attempts: int, requests: int) -> None:
        """One Produce commit: how long it took, in how many attempts, for how many requests."""
        self.commit_latency.observe(seconds)
        self.commit_conflicts.inc(max(0, attempts - 1))
        self.commit_batch.observe(requests)

    def serve(self, host: str, port: int) -> tuple[str, int]:
        """Serve ``/metrics`` and ``/health`` on a thread; the bound address."""
        metrics_app = make_wsgi_app(self.registry)

        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
            if environ.get("PATH_INFO") == "/health":
                start_response("200 OK", [("Content-Type", "text/plain")])
                return [b"ok\n"]
            return metrics_app(environ, start_response)

        self._server = make_server(host, port, app, _ThreadingServer, handler_class=_QuietHandler)
        threading.Thread(target=self._server.serve_forever, name="lakelog-metrics", daemon=True).start()
        return host, self._server.server_port

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # a scrape every few seconds is not news
        pass
