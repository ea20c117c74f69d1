"""Where an agent process's CPU time went during a benchmark run: its serving threads, or the
background threads that run at a lower priority (the checkpoint thread and the delta-rs threads
it starts, :func:`lakelog.engine.commit.checkpoints.background_priority`).

Measured from ``/proc/<pid>/stat`` (the process's user and system time, threads that already
ended included) and ``/proc/<pid>/task/*/stat`` (each live thread's time and nice value),
sampled every :data:`SAMPLE_S` seconds so that a background thread that ends before the run
does (delta-rs' blocking threads end after ten idle seconds) still counts with the time it had
when last seen. Linux only; elsewhere nothing is measured.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

SAMPLE_S = 0.5
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class ThreadTimes:
    """One ``/proc/.../stat`` line read: CPU seconds (user + system) and the nice value."""

    cpu_s: float
    nice: int


def parse_stat(line: str) -> ThreadTimes:
    """The CPU seconds and nice value of a ``/proc/<pid>[/task/<tid>]/stat`` line (fields 14,
    15 and 19; the command name, field 2, is in parentheses and may hold spaces). Raises
    ValueError for a line that is not one."""
    try:
        fields = line[line.rindex(")") + 2 :].split()
        return ThreadTimes((int(fields[11]) + int(fields[12])) / _CLOCK_TICKS, int(fields[16]))
    except (ValueError, IndexError) as exc:
        raise ValueError(f"not a /proc stat line: {line[:80]!r}") from exc


def background_s(before: dict[int, ThreadTimes], after: dict[int, ThreadTimes], process_nice: int) -> float:
    """The CPU seconds the threads running at a lower priority than the process's own (a
    higher nice value) used between two samples of each thread by id (``before``: none for a
    thread started since)."""
    return sum(
        t.cpu_s - (before[tid].cpu_s if tid in before else 0.0) for tid, t in after.items() if t.nice > process_nice
    )


@dataclass(frozen=True)
class AgentCpu:
    """CPU seconds an agent used over a run, and how many of them its background threads did."""

    total_s: float
    background_s: float

    @property
    def background_share(self) -> float:
        return self.background_s / self.total_s if self.total_s > 0 else 0.0


class AgentCpuSampler:
    """Samples process ``pid`` from ``start()`` to ``stop()`` (see the module docstring)."""

    def __init__(self, pid: int) -> None:
        self._proc = Path(f"/proc/{pid}")
        self._threads: dict[int, ThreadTimes] = {}
        self._threads_first: dict[int, ThreadTimes] = {}
        self._first: ThreadTimes | None = None
        self._last: ThreadTimes | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="agent-cpu-sampler", daemon=True)

    def start(self) -> AgentCpuSampler:
        self._first = self._sample()
        self._threads_first = dict(self._threads)
        self._thread.start()
        return self

    def stop(self) -> AgentCpu | None:
        """The CPU used since ``start()``; None where it could not be read (not Linux, the
        process gone before the first sample)."""
        self._done.set()
        self._thread.join()
        self._sample()
        if self._first is None or self._last is None:
            return None
        total = self._last.cpu_s - self._first.cpu_s
        # The process's nice value (its first thread's) is the serving threads'.
        return AgentCpu(total, min(total, background_s(self._threads_first, self._threads, self._first.nice)))

    def _run(self) -> None:
        while not self._done.wait(SAMPLE_S):
            self._sample()

    def _sample(self) -> ThreadTimes | None:
        try:
            process = parse_stat((self._proc / "stat").read_text())
            tasks = list((self._proc / "task").iterdir())
        except (OSError, ValueError):
            return None  # gone, or not Linux
        for task in tasks:
            try:
                self._threads[int(task.name)] = parse_stat((task / "stat").read_text())
            except (OSError, ValueError):
                continue  # ended meanwhile
        self._last = process
        return process
