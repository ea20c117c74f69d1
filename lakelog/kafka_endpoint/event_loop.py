"""The event loop ``lakelog serve`` runs on (``serve.event.loop``).

The agent's event loop reads every request, answers it and takes every hand-over from the group
and commit threads (:class:`kafka_endpoint.server.ThreadCallbacks`); all of it holds the
interpreter lock, which the agent's threads take in turn on one CPU
(:mod:`kafka_endpoint.cpu_affinity`), so what the loop itself costs per request comes out of
every other thread's time. uvloop (asyncio's event loop on libuv, a drop-in
``asyncio.AbstractEventLoop``) runs its transports, stream buffering and cross-thread wake-ups
in C: measured under Kafka's ProducerPerformance (warm, one partition, Java's defaults), the
event loop thread's CPU per commit of ~740 records went from 0.86 to 0.72 ms and the agent's
from 2.89 to 2.62 ms, and three alternating pairs gave 182.7k -> 191.0k records/s (median; faster
in each, +2-6%), the seconds after the warm-up 224.9k -> 251.3k. ``asyncio`` keeps Python's own
loop (a fallback, and a baseline to measure against).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

# serve.event.loop's values (engine.settings lists the choices).
UVLOOP = "uvloop"
ASYNCIO = "asyncio"


def new_event_loop(serve_settings: Mapping[str, Any]) -> asyncio.AbstractEventLoop:
    """A new event loop of the kind ``serve.event.loop`` names: uvloop's, or asyncio's when it
    names asyncio or uvloop cannot be imported (not installed, a platform without it: logged as
    a warning). Never raises for the setting."""
    if serve_settings["serve.event.loop"] == UVLOOP:
        try:
            import uvloop
        except ImportError as exc:
            log.warning("serve.event.loop=uvloop but uvloop cannot be imported (%s): asyncio's event loop", exc)
        else:
            return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def run(main: Coroutine[Any, Any, T], serve_settings: Mapping[str, Any]) -> T:
    """``asyncio.run(main)`` on a loop of :func:`new_event_loop`: ``main``'s result or what it
    raises; the loop is closed after, its remaining tasks cancelled, as asyncio.run does."""
    with asyncio.Runner(loop_factory=lambda: new_event_loop(serve_settings)) as runner:
        return runner.run(main)
