"""The agent's threads on one CPU (``serve.cpu.affinity``).

The agent's threads take the interpreter lock in turn: a produced request is read on the event
loop, its group written on the group thread, committed on the commit thread (its fsyncs on
native threads beside it, :mod:`engine.storage.parallel_sync`) and answered on the event loop
again, and each hand-over wakes the thread that takes over. A thread woken on another CPU costs that CPU's wake-up (an
inter-processor interrupt; on a virtual machine an exit to the hypervisor): measured in the
agent under Kafka's ProducerPerformance, handing a group to the commit thread (one
``queue.Queue.put``) took 51 us p50, against a few us when nobody waits. Python's lock is known
to hand over worse between CPUs than on one (D. Beazley, "Understanding the Python GIL",
PyCon 2010: threads on several cores contend for it in a convoy). On one CPU the hand-overs
are plain context switches; what the agent runs outside the lock (Parquet encoding, fsyncs,
delta-rs' checkpoints) is a small part of its time, so it loses little of the second CPU, and
the interpreter lock never let its Python use more than one. Measured on 2 CPUs beside the
agent left to the scheduler: warm ProducerPerformance 98.4k -> 107.0k records/s (median of four
alternating pairs, faster in each); ``perf serve`` (three interleaved rounds) confluent-kafka's
produce 557k -> 659k records/s, fetch 135k -> 171k, produce p99 at 1,000 records/s 23 -> 18 ms.
Pinning only the event loop, group and commit threads gave a third of the ProducerPerformance
gain: the sync and checkpoint threads hand over too.

On one CPU a hand-over can still cost two needless switches: the thread woken takes the CPU at
once from the thread that woke it (Linux's wake-up preemption), finds the interpreter lock still
held by it, and sleeps again. The event loop hands each produce request to the group thread
while it still has the next requests to read; so the group thread, once woken, waits until the
event loop blocks or uses up its time slice (:func:`yield_on_wake`, Linux's ``SCHED_BATCH``).
Measured against the agent without it (warm ProducerPerformance, five alternating pairs):
104.0k -> 110.7k records/s median, faster in each, and the same produce p99 at 1,000 records/s
(19.7 vs 19.0 ms); the agent's threads had switched 67 times per commit of ~740 records, 13% of
its CPU samples in the kernel's switching. The commit thread so too (and the sync and
checkpoint threads it starts, which inherit it) gained as much but cost 3-4 ms of that p99: a
woken thread that does not preempt also waits behind other processes on its CPU. All of the
agent's threads so (the event loop too) was 4% slower.

``one`` (the default) pins every thread of the process, those running and (inherited) those
started later, to the CPU the agent runs on when it starts, and makes the group thread yield
on wake; ``all`` does neither and leaves the placement to the operating system.
Where the process may use one CPU only, or the platform has no ``sched_setaffinity`` (not
Linux), nothing changes.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping, Set
from typing import Any

log = logging.getLogger(__name__)

# serve.cpu.affinity's value that pins (engine.settings lists the choices: one, all).
ONE = "one"


def on_one_cpu(serve_settings: Mapping[str, Any]) -> bool:
    """Whether the agent's ``serve.*`` settings put its threads on one CPU (pinned, the group
    thread yielding on wake)."""
    return serve_settings["serve.cpu.affinity"] == ONE


def yield_on_wake() -> None:
    """Make the calling thread, once woken, wait for the thread that woke it to block or use
    up its time slice rather than take the CPU from it at once (Linux's ``SCHED_BATCH``, its
    nice value kept; threads it starts inherit it). Where that cannot be set (not Linux,
    refused), nothing changes; never raises."""
    if not hasattr(os, "SCHED_BATCH"):
        return
    with contextlib.suppress(OSError):
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))


def chosen_cpu(allowed: Set[int], running_on: int | None) -> int | None:
    """The CPU to pin the agent's threads to, given the CPUs the process may use and the one
    it runs on (None: unknown): that one if allowed, else the lowest allowed; None when at most
    one is allowed (nothing to choose)."""
    if len(allowed) <= 1:
        return None
    return running_on if running_on in allowed else min(allowed)


def running_on() -> int | None:
    """The CPU the calling thread last ran on (field 39 of ``/proc/thread-self/stat``); None
    where that cannot be read."""
    try:
        with open("/proc/thread-self/stat") as stat:
            # Fields after the command name, which is in parentheses and may hold spaces.
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    try:
        return int(fields[39 - 3])
    except (IndexError, ValueError):
        return None


def pin_to_one_cpu() -> int | None:
    """Pin every thread of this process to one CPU (:func:`chosen_cpu`); threads started later
    inherit it from the thread that starts them. Returns the CPU, or None when nothing was
    pinned (one CPU allowed, no ``sched_setaffinity``). A thread that ended meanwhile is
    skipped; any other refusal raises OSError."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    cpu = chosen_cpu(os.sched_getaffinity(0), running_on())
    if cpu is None:
        return None
    # Every task, this thread among them; listed again until no new one appeared, since a
    # thread not yet pinned may start one (which inherits its old CPUs) meanwhile.
    pinned: set[int] = set()
    while tasks := {int(task) for task in os.listdir("/proc/self/task")} - pinned:
        for task in tasks:
            with contextlib.suppress(ProcessLookupError):  # ended meanwhile
                os.sched_setaffinity(task, {cpu})
        pinned |= tasks
    log.info("lakelog serve: its threads run on CPU %d (serve.cpu.affinity=%s)", cpu, ONE)
    return cpu
