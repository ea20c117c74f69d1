"""A producer in a process of its own committing at a fixed pace: the busy neighbour of
``lakelog perf produce --api dataframe --beside-producer-rate N`` and of the tests that
check Spark writes land beside one.

    python -m benchmarks.paced --store S --topic T --partitions 0,1 --rate 40 --stop FILE --acks FILE

Sends one record per commit (``linger.ms=0``, each send waited for), ``--rate`` commits
per second round-robin over ``--partitions``, until the file ``--stop`` exists; appends
one JSON line per acknowledged record to ``--acks`` (value, partition, offset).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

# The checkout holding benchmarks/: `-m benchmarks.paced` runs from there.
ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", default="0")
    parser.add_argument("--rate", type=float, default=40.0)
    parser.add_argument("--stop", required=True)
    parser.add_argument("--acks", required=True)
    parser.add_argument("--name", default="paced")
    args = parser.parse_args(argv)
    from lakelog.store import Store

    store = Store.open(args.store)
    partitions = [int(p) for p in args.partitions.split(",")]
    started = time.monotonic()
    with open(args.acks, "a", encoding="utf-8") as acks, store.producer(**{"linger.ms": 0}) as producer:
        i = 0
        while not os.path.exists(args.stop):
            value = f"{args.name}:{i}"
            md = producer.send(args.topic, value, partition=partitions[i % len(partitions)]).get()
            acks.write(json.dumps({"value": value, "p": md.partition, "o": md.offset}) + "\n")
            acks.flush()
            i += 1
            time.sleep(max(0.0, started + i / args.rate - time.monotonic()))
    return 0


class PacedProducer:
    """Runs :func:`main` in a child process for the length of a ``with`` block; entering
    waits until it has committed ``warm`` records (it is producing at its pace)."""

    def __init__(self, store: str, topic: str, partitions: list[int], rate: float, work: Path, warm: int = 20) -> None:
        self.acks_file, self.stop_file = work / "paced-acks.jsonl", work / "paced-stop"
        self.warm = warm
        self._args = [
            *(sys.executable, "-m", "benchmarks.paced", "--store", store, "--topic", topic),
            *("--partitions", ",".join(map(str, partitions)), "--rate", str(rate)),
            *("--stop", str(self.stop_file), "--acks", str(self.acks_file)),
        ]
        self.proc: subprocess.Popen[str] | None = None

    def acks(self) -> list[dict]:
        if not self.acks_file.exists():
            return []
        return [json.loads(line) for line in self.acks_file.read_text().splitlines() if line.strip()]

    def __enter__(self) -> PacedProducer:
        self.stop_file.unlink(missing_ok=True)
        self.proc = subprocess.Popen(
            self._args,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        deadline = time.monotonic() + 120
        while len(self.acks()) < self.warm:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the paced producer stopped: {self.proc.stdout.read()}")  # type: ignore[union-attr]
            if time.monotonic() > deadline:
                raise RuntimeError("the paced producer did not start within 120 s")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.proc is not None
        self.stop_file.touch()
        out, _ = self.proc.communicate(timeout=120)
        if self.proc.returncode != 0:
            raise RuntimeError(f"the paced producer failed: {out}")


if __name__ == "__main__":
    sys.exit(main())
