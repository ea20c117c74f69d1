"""``lakelog serve``: an asyncio TCP server speaking the Kafka protocol over one store.

Each connection's requests are answered in the order they came (as a Kafka
broker does), each handled on a worker thread so that a commit or a long
poll of one connection never holds up another; a Produce request is read,
decoded and handed to the group commit while the connection's earlier ones
are still committing, and waits for its commit on the event loop, holding
no thread. A frame that cannot be
parsed closes only its connection. An API or version the endpoint does not
answer gets UNSUPPORTED_VERSION in a response of that API (ApiVersions with
its v0 response, as Kafka does, so that a client learns what is supported),
and a warning once per client and API (:class:`UnsupportedRequests`), so that
what a client needs and the agent does not serve shows in its log; an answer carrying an error
code that is not routine for its API is logged once per client, API and code
(:class:`kafka_endpoint.unexpected_errors.UnexpectedErrors`).
SIGTERM or SIGINT: stop accepting, let requests in flight finish (long polls
return at once), close the producer, exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import gc
import logging
import signal
import struct
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from kio.schema.errors import ErrorCode

from lakelog.engine.errors import InvalidConfigError
from lakelog.kafka_endpoint import cpu_affinity, event_loop
from lakelog.kafka_endpoint.endpoint import API_VERSIONS, SUPPORTED, Endpoint, api_versions_body
from lakelog.kafka_endpoint.listeners import (
    Listener,
    advertised,
    certificate_principal,
    parse_listener,
    parse_listeners,
    server_ssl_context,
)
from lakelog.kafka_endpoint.messages import (
    MalformedRequestError,
    Request,
    api_name,
    build,
    encode_response,
    header_client_id,
    known_fields,
    parse_request,
    response_class,
)
from lakelog.kafka_endpoint.metrics import Metrics
from lakelog.kafka_endpoint.produce import PRODUCE, StartedProduce
from lakelog.kafka_endpoint.sasl import SASL_AUTHENTICATE, SASL_HANDSHAKE
from lakelog.kafka_endpoint.session import Session
from lakelog.kafka_endpoint.unexpected_errors import UnexpectedErrors
from lakelog.store import Store

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
# Kafka's socket.request.max.bytes.
MAX_FRAME_BYTES = 100 * 1024 * 1024
# Requests of one connection read ahead of their answers (a client's max.in.flight is 5).
MAX_IN_FLIGHT = 16
# A Produce request up to this size (a Java producer's default batch.size is 16 KB, librdkafka's
# 1 MB message batches mostly less) is decoded and handed to the produce linger on the event
# loop itself. Its decode costs ~0.5 ms of Python; a hop to a worker thread and back cost
# 3 ms of wall time per request (two waits for the GIL, up to the switch interval each,
# while the commit and write-ahead threads run), and a connection's next request is read
# only after the one before was handed over: traced with Kafka's ProducerPerformance (five
# 16 KB requests in flight), reading and handing over took 3.0-3.4 ms p50 per request.
# Transactional requests and bigger ones still go to a worker.
INLINE_PRODUCE_BYTES = 256 * 1024
# The interpreter's GIL switch interval in the agent (CPython's default is 5 ms). A thread woken
# by I/O (a commit's fsync, a worker's answer) waits for the GIL until the running thread
# drops it, at most this long: with the event loop, the commit thread and the write-ahead
# thread busy at once, each of a commit's system calls paid that wait. Traced under
# ProducerPerformance: a group's commit p50 6.2 -> 4.6 ms, first arrival to landed
# 20.4 -> 16.2 ms at 0.5 ms.
SWITCH_INTERVAL_S = 0.0005
# The cyclic garbage collector's thresholds while serving (CPython's: 700, 10, 10). Every
# collection holds the GIL, so it stalls the event loop and the commit threads alike. Under
# ProducerPerformance the defaults spent ~380 ms of every 8 s collecting (gen1 ~1.8 ms each,
# 77 of them; gen2 50-80 ms): a commit's objects outlive the young generation, so gen1 and
# gen2 walk them again and again. Frozen startup objects (gc.freeze) and a young generation
# collected every 3,000 allocations, gen1 every 50: ~200 ms of 8 s, the longest ~22 ms (traced;
# gen1 every 100 instead walked more survivors each time: 34 ms apiece, 300 ms in all).
SERVE_GC_THRESHOLDS = (3000, 50, 10)


async def _quietly(awaitable: Any) -> None:
    with contextlib.suppress(Exception, asyncio.CancelledError):
        await awaitable


def error_response(
    api_key: int, api_version: int, correlation_id: int, code: ErrorCode = ErrorCode.unsupported_version
) -> bytes | None:
    """A response of the request's API and version whose error codes say ``code`` (by default
    UNSUPPORTED_VERSION), or None when there is no way to write one (an API kio does not know)."""
    if api_key == API_VERSIONS:
        # Kafka answers a version it does not serve with v0, which every client parses.
        return encode_response(API_VERSIONS, 0, correlation_id, api_versions_body(0, ErrorCode.unsupported_version))
    try:
        cls = response_class(api_key, api_version)
    except Exception:
        return None
    # Some responses (DeleteRecords, Produce, ...) carry error codes only per partition: an empty
    # one of those still answers the correlation id, which is all the client needs to go on.
    fields = {"error_code": code} if "error_code" in known_fields(cls) else {}
    return encode_response(api_key, api_version, correlation_id, build(cls, **fields))


class ThreadCallbacks:
    """Callbacks other threads hand to one event loop, run on it in the order they were
    handed, with one wake-up of the loop for all those handed before it runs them. asyncio's
    ``call_soon_threadsafe`` writes to the loop's self-pipe on every call: traced under Kafka's
    ProducerPerformance, ~75 us of the commit thread per call on this machine, once per request
    of every commit, between the commit landing and its answers."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._pending: list[Callable[[], None]] = []
        self._scheduled = False

    def call(self, fn: Callable[[], None]) -> None:
        """Run ``fn()`` on the loop soon (from any thread); nothing if the loop is closed."""
        with self._lock:
            self._pending.append(fn)
            if self._scheduled:
                return
            self._scheduled = True
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            self._loop.call_soon_threadsafe(self._run)

    def _run(self) -> None:
        with self._lock:
            pending, self._pending, self._scheduled = self._pending, [], False
        for fn in pending:
            fn()


def _when_all_done(futures: tuple[Future, ...], callbacks: ThreadCallbacks, then: Callable[[], None]) -> None:
    """Run ``then()`` on the loop once every one of ``futures`` (set by other threads, which
    tell the loop through ``callbacks``) is done; right away when there are none. Unlike
    asyncio.wrap_future, nothing here ever cancels them: their owner still sets them."""
    if not futures:
        then()
        return
    left = [len(futures)]

    def one_done() -> None:
        left[0] -= 1
        if left[0] == 0:
            then()

    for future in futures:
        future.add_done_callback(lambda _: callbacks.call(one_done))


class UnsupportedRequests:
    """Logs one warning per (client id, API) answered with UNSUPPORTED_VERSION: which client,
    from where, which API and version, and which versions the agent serves. ApiVersions is left
    out: a client newer than the agent asks with a version above its range and, answered with
    the range, asks again, as Kafka's version negotiation (KIP-511) goes, with nothing missing.
    At most ``limit`` pairs are remembered; past that nothing more is logged."""

    def __init__(self, supported: dict[int, tuple[int, int]], limit: int = 10_000) -> None:
        self._supported = supported
        self._limit = limit
        self._seen: set[tuple[str | None, int]] = set()
        self._lock = threading.Lock()

    def note(self, frame: bytes, api_key: int, api_version: int, peer: object) -> bool:
        """Log the request in ``frame`` unless its (client id, API) was logged before; whether it logged."""
        if api_key == API_VERSIONS:
            return False
        client_id = header_client_id(frame)
        with self._lock:
            if (client_id, api_key) in self._seen or len(self._seen) >= self._limit:
                return False
            self._seen.add((client_id, api_key))
        served = self._supported.get(api_key)
        log.warning(
            "answered UNSUPPORTED_VERSION to client %r at %s: %s (key %d) v%d; this agent serves %s",
            client_id,
            peer,
            api_name(api_key, api_version),
            api_key,
            api_version,
            "no version of it" if served is None else f"v{served[0]}-v{served[1]}",
        )
        return True


class Server:
    """The listeners of one agent over one :class:`Endpoint` (each listener's clients are told
    its advertised address; ``host``/``port`` are the first listener's)."""

    def __init__(
        self,
        endpoint_factory: Callable[[int], Endpoint],
        listeners: list[Listener],
        serve_settings: dict[str, Any] | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self._factory = endpoint_factory
        self.metrics = metrics
        self.listeners = list(listeners)
        self.host, self.port = self.listeners[0].host, self.listeners[0].port
        self._settings = serve_settings or {}
        self._advertised: dict[str, tuple[str, int]] = {}
        self.endpoint: Endpoint | None = None
        self.metrics_address: tuple[str, int] | None = None
        self._servers: list[asyncio.base_events.Server] = []
        self._pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="lakelog-serve")
        self._stopping = False
        self._connections: set[asyncio.Task] = set()
        self._unsupported = UnsupportedRequests(SUPPORTED)
        self._unexpected = UnexpectedErrors()
        self._callbacks: ThreadCallbacks | None = None  # on the loop start() runs on

    async def start(self) -> None:
        """Bind every listener (raises InvalidConfigError for TLS settings that do not load)."""
        bound = []
        for listener in self.listeners:
            server = await asyncio.start_server(
                functools.partial(self._connection, listener),
                listener.host,
                listener.port,
                ssl=server_ssl_context(self._settings, listener) if listener.tls else None,
            )
            self._servers.append(server)
            bound.append(dataclasses.replace(listener, port=server.sockets[0].getsockname()[1]))
        self.listeners = bound
        self.host, self.port = bound[0].host, bound[0].port
        self._advertised = advertised(bound, self._settings.get("advertised.listeners", ""))
        self.endpoint = self._factory(self.port)
        self._callbacks = ThreadCallbacks(asyncio.get_running_loop())
        for listener in bound:
            log.info("lakelog serve: listening on %s (Kafka protocol)", listener)

    async def stop(self) -> None:
        self._stopping = True
        for server in self._servers:
            server.close()
            await server.wait_closed()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        self._pool.shutdown(wait=True)
        if self.endpoint is not None:
            self.endpoint.close()

    async def _connection(self, listener: Listener, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Read a connection's requests and answer them in order. Produce requests are
        pipelined (a client keeps up to max.in.flight of them outstanding): each is handed
        to the produce linger as it is read, so requests in flight share commits and keep
        their order; the others are answered one at a time. On a SASL listener, a request
        other than ApiVersions and the SASL APIs before authentication closes the connection,
        as does a failed authentication (after its answer), as with Kafka's broker."""
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peer = writer.get_extra_info("peername")
        session = Session.open(
            listener,
            self._advertised[listener.protocol],
            str(peer[0]) if peer else "",
            certificate_principal(writer.get_extra_info("peercert")),
        )
        if self.metrics is not None:
            self.metrics.connections.labels(listener.protocol).inc()
            self.metrics.connections_total.labels(listener.protocol).inc()
        loop = asyncio.get_running_loop()
        answers: asyncio.Queue[asyncio.Future | None] = asyncio.Queue(maxsize=MAX_IN_FLIGHT)
        sender = asyncio.create_task(self._send_in_order(answers, writer))
        try:
            while not self._stopping and not sender.done():
                try:
                    size = _SIZE.unpack(await reader.readexactly(4))[0]
                    if not 0 < size <= MAX_FRAME_BYTES:
                        raise MalformedRequestError(f"a frame of {size} bytes")
                    frame = await reader.readexactly(size)
                    if self.metrics is not None:
                        self.metrics.bytes_in.inc(4 + size)
                except asyncio.IncompleteReadError:
                    return
                if session.raw_tokens and not session.authenticated:
                    # After a v0 SaslHandshake the tokens are bare frames (Kafka's SaslServerAuthenticator).
                    assert self.endpoint is not None
                    reply, _ = await loop.run_in_executor(self._pool, self.endpoint.sasl.step, session, frame)
                    done = loop.create_future()
                    done.set_result(b"" if session.closing else _SIZE.pack(len(reply)) + reply)
                    await answers.put(done)
                    if session.closing:
                        return
                    continue
                parsed = parse_request(frame, SUPPORTED, session)
                key, version = (
                    (parsed[0], parsed[1]) if not isinstance(parsed, Request) else (parsed.api_key, parsed.api_version)
                )
                if not session.authenticated and key not in (API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE):
                    log.warning(
                        "closing the connection from %s on %s: %s before SASL authentication",
                        peer,
                        listener,
                        api_name(key, version),
                        extra=session.log_context(header_client_id(frame)),
                    )
                    return
                if not isinstance(parsed, Request):
                    self._unsupported.note(frame, parsed[0], parsed[1], peer)
                    answer = error_response(*parsed)
                    if answer is None:
                        return
                    done = loop.create_future()
                    done.set_result(answer)
                elif parsed.api_key == PRODUCE:
                    if len(frame) <= INLINE_PRODUCE_BYTES and parsed.body.transactional_id is None:
                        started = self._start_produce(parsed, peer)
                    else:
                        started = await loop.run_in_executor(self._pool, self._start_produce, parsed, peer)
                    done = self._produced(started)
                else:
                    done = loop.run_in_executor(self._pool, self._answer, parsed, None, peer)
                    await asyncio.wait([done])
                await answers.put(done)
                if session.closing:
                    return
        except MalformedRequestError as exc:
            log.warning("closing the connection from %s: %s", peer, exc)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            if not sender.done():
                await _quietly(answers.put(None))
            await _quietly(sender)
            self._connections.discard(task)
            if self.metrics is not None:
                self.metrics.connections.labels(listener.protocol).dec()
            with contextlib.suppress(Exception):
                writer.close()

    async def _send_in_order(self, answers: asyncio.Queue, writer: asyncio.StreamWriter) -> None:
        """Write the answers in the order of their requests. Answers already done behind the
        one awaited go out in the same write: the answers of one commit's requests are one
        send and one read for the client instead of one each (traced under ProducerPerformance:
        2,710 sends for 2,704 answers before, 852 after). An answer that failed is awaited on
        its own, after everything before it was written, as each was before."""
        ahead: asyncio.Future | None = None
        closing = False
        while not closing:
            done = ahead if ahead is not None else await answers.get()
            ahead = None
            if done is None:
                return
            frames = [await done]
            while not answers.empty():
                following = answers.get_nowait()
                if following is None:
                    closing = True
                    break
                if not following.done() or following.cancelled() or following.exception() is not None:
                    ahead = following
                    break
                frames.append(following.result())
            data = b"".join(frame for frame in frames if frame)
            if data:
                if self.metrics is not None:
                    self.metrics.bytes_out.inc(len(data))
                writer.write(data)
                await writer.drain()

    def _start_produce(self, request: Request, peer: object = None) -> StartedProduce:
        assert self.endpoint is not None
        try:
            started = self.endpoint.start_produce(request)
        except Exception:
            log.exception("produce v%s failed", request.api_version)
            failed = error_response(
                PRODUCE, request.api_version, request.correlation_id, ErrorCode.unknown_server_error
            )
            return StartedProduce((), lambda: failed)
        return StartedProduce(started.waits, lambda: self._answer(request, started.answer, peer))

    def _produced(self, started: StartedProduce) -> asyncio.Future:
        """A future of a Produce request's answer, set once the commits holding its records
        ended. No worker thread waits for them (a connection keeps several requests in flight,
        and many connections would hold the whole pool), nor a task per request: the last
        commit's callback builds the answer on the loop when that cannot block, on a worker
        otherwise (a duplicate batch's offsets are read back). A task cost the loop two more
        steps per request, one of them between a commit landing and its answer going out."""
        assert self._callbacks is not None
        loop = asyncio.get_running_loop()
        answer: asyncio.Future = loop.create_future()

        def settle(source: asyncio.Future) -> None:
            if answer.done():  # the connection went away and cancelled it
                return
            if source.cancelled():
                answer.cancel()
            elif (exc := source.exception()) is not None:
                answer.set_exception(exc)
            else:
                answer.set_result(source.result())

        def build() -> None:
            if answer.done():
                return
            if not started.ready():
                loop.run_in_executor(self._pool, started.answer).add_done_callback(settle)
                return
            try:
                answer.set_result(started.answer())
            except Exception as exc:  # the sender awaits it and ends the connection, as with a task
                answer.set_exception(exc)

        _when_all_done(started.waits, self._callbacks, build)
        return answer

    def _answer(self, request: Request, handler: Callable[[], Any] | None = None, peer: object = None) -> bytes | None:
        """The response frame (b"" when none is sent); a handler's unexpected failure is
        logged and answered with UNKNOWN_SERVER_ERROR (None: close the connection). Error codes
        the answer carries that are not routine for its API are logged (:attr:`_unexpected`)."""
        assert self.endpoint is not None
        started = time.monotonic()
        try:
            body = handler() if handler is not None else self.endpoint.handle(request, lambda: self._stopping)
        except Exception:
            context = request.session.log_context(request.client_id) if request.session is not None else {}
            log.exception("api %s v%s failed", request.api_key, request.api_version, extra=context)
            return error_response(
                request.api_key, request.api_version, request.correlation_id, ErrorCode.unknown_server_error
            )
        if self.metrics is not None:
            self.metrics.answered(api_name(request.api_key, request.api_version), body, time.monotonic() - started)
        if body is None:
            return b""
        try:
            self._unexpected.note(request.client_id, request.api_key, request.api_version, body, peer)
        except Exception:  # a log line must never cost a client its answer
            log.exception("logging the error codes of api %s failed", request.api_key)
        return encode_response(request.api_key, request.api_version, request.correlation_id, body)


def collect_garbage_for_serving() -> None:
    """Freeze what exists once the agent is up (modules, schemas, the store's first state:
    never garbage, no longer walked by a full collection) and collect less often
    (:data:`SERVE_GC_THRESHOLDS`)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*SERVE_GC_THRESHOLDS)


async def _serve(
    store: Store,
    listeners: list[Listener],
    ready: Callable[[Server], None] | None = None,
    metrics_listen: tuple[str, int] | None = None,
) -> None:
    first = listeners[0]
    metrics = Metrics(store.context) if metrics_listen is not None else None
    server = Server(
        lambda bound: Endpoint(store, first.host, bound, metrics=metrics), listeners, store.settings.serve, metrics
    )
    await server.start()
    collect_garbage_for_serving()
    if metrics is not None and metrics_listen is not None:
        server.metrics_address = metrics.serve(*metrics_listen)
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, done.set)
    if ready is not None:
        ready(server)
    await done.wait()
    log.warning("lakelog serve: stopping")
    await server.stop()
    if metrics is not None:
        metrics.close()


def serve(
    store: Store,
    listen: str | list[str],
    ready: Callable[[Server], None] | None = None,
    metrics_listen: str | None = None,
) -> None:
    """Serve ``store`` on the listeners of ``listen`` (``[PROTOCOL://]HOST:PORT``, comma-separated
    or a list; port 0 picks a free one; :mod:`kafka_endpoint.listeners`) until SIGTERM/SIGINT,
    and Prometheus metrics on ``metrics_listen`` (``HOST:PORT``; :mod:`kafka_endpoint.metrics`).
    Raises InvalidConfigError for a listener or TLS setting that is wrong."""
    listeners = parse_listeners([listen] if isinstance(listen, str) else listen)
    metrics_at = None
    if metrics_listen is not None:
        address = parse_listener(metrics_listen)
        if address.protocol != "PLAINTEXT":
            raise InvalidConfigError(f"--metrics-listen is HOST:PORT (plain HTTP), not {metrics_listen!r}")
        metrics_at = (address.host, address.port)
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    if cpu_affinity.on_one_cpu(store.settings.serve):
        cpu_affinity.pin_to_one_cpu()
    event_loop.run(_serve(store, listeners, ready, metrics_at), store.settings.serve)
