"""A Fetch waiting for records (long polling, max_wait_ms): answered as soon as records at its
offset are committed -- at once for a commit of the agent itself, within a bounded cheap look for
another process's -- never past max_wait_ms, with committed records only, and without reading
the log's state or the data files again while nothing it asked for moved. No JVM."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest
from kio.index import load_request_schema

from lakelog.engine.commit import TableLog
from lakelog.engine.commit.partition_reader import PartitionReader
from lakelog.kafka_endpoint.endpoint import Endpoint
from lakelog.kafka_endpoint.fetch import FETCH, FetchApis
from lakelog.kafka_endpoint.messages import Request, build
from lakelog.kafka_endpoint.record_batches import decode_batches
from lakelog.store import Store
from tests.kafka_endpoint.test_serve import _exactly
from tests.stores import store_with_records


def _fetch_body(version: int, offset: int, max_wait_ms: int) -> dict:
    return dict(
        replica_id=-1, max_wait=max_wait_ms, min_bytes=1, max_bytes=1 << 20, isolation_level=1,
        session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
        topics=[{"topic": "t", "partitions": [{"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20,
                                               "current_leader_epoch": -1, "log_start_offset": -1,
                                               "last_fetched_epoch": -1}]}],
    )  # fmt: skip


def _fetch(endpoint: Endpoint, offset: int, max_wait_ms: int) -> list[bytes]:
    body = build(load_request_schema(FETCH, 12), **_fetch_body(12, offset, max_wait_ms))
    answer = endpoint.handle(Request(FETCH, 12, 1, "test", body))
    return [v for b in decode_batches(answer.responses[0].partitions[0].records) for v in b.values]


@pytest.fixture
def endpoint(tmp_path):
    served = Endpoint(store_with_records(tmp_path / "store", [3]), "127.0.0.1", 9092)
    yield served
    served.close()


def _counting(monkeypatch, cls: type, name: str) -> list[int]:
    """Count the calls of ``cls.name`` (still doing what it does)."""
    calls = [0]
    original = getattr(cls, name)

    def counted(*args, **kwargs):
        calls[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(cls, name, counted)
    return calls


def test_a_waiting_fetch_reads_neither_the_logs_state_nor_data_files_again_while_nothing_lands(endpoint, monkeypatch):
    # The old long poll re-read the state (and, with records short of min_bytes, the Parquet
    # files) every 20 ms: some 30 times in 600 ms.
    states = _counting(monkeypatch, TableLog, "latest")
    reads = _counting(monkeypatch, PartitionReader, "read")
    started = time.monotonic()
    assert _fetch(endpoint, 3, 600) == []
    waited = time.monotonic() - started
    assert 0.6 <= waited < 0.6 + 2.0
    assert states[0] == 1
    assert reads[0] == 0


def test_a_waiting_fetch_is_answered_by_a_commit_of_the_agent_itself_at_once(endpoint):
    # Other processes' commits are looked for every 60 s here: only the commit's own wake-up
    # can answer the fetch long before its max_wait of 5 s.
    endpoint.fetch = FetchApis(endpoint.store, newest_poll_s=60.0)
    got: list[list[bytes]] = []
    waiter = threading.Thread(target=lambda: got.append(_fetch(endpoint, 3, 5000)))
    waiter.start()
    time.sleep(0.3)  # the fetch is waiting
    producer = endpoint.store.producer()  # the agent's store: its commits advance the agent's log
    producer.send("t", b"new", partition=0).get()
    committed = time.monotonic()
    waiter.join(10)
    producer.close()
    assert got == [[b"new"]]
    assert time.monotonic() - committed < 2.0


def test_a_waiting_fetch_is_answered_by_another_processes_commit_before_max_wait(endpoint):
    # A Store opened apart from the agent's: its commits are another table log's, as another
    # process's are; the waiting fetch finds them by its look at the next commit file.
    other = Store.open(endpoint.store.uri)
    assert other.log is not endpoint.store.log
    got: list[list[bytes]] = []
    waiter = threading.Thread(target=lambda: got.append(_fetch(endpoint, 3, 5000)))
    started = time.monotonic()
    waiter.start()
    time.sleep(0.3)
    producer = other.producer()
    producer.send("t", b"elsewhere", partition=0).get()
    waiter.join(10)
    producer.close()
    assert got == [[b"elsewhere"]]
    assert time.monotonic() - started < 4.0


def test_an_agents_waiting_fetch_is_answered_by_a_commit_made_by_another_process(agent):
    """The agent in its own process, a raw Fetch v4 waiting up to 5 s at the end of partition
    0, and a record committed by this (another) process: answered with it before max_wait."""
    store = Store.open(agent.store)
    frame = (
        struct.pack(">hhih", FETCH, 4, 7, -1)  # header v1: Fetch v4, no client id
        + struct.pack(">iiiib", -1, 5000, 1, 1 << 20, 1)  # replica, max_wait_ms, min/max bytes, read_committed
        + struct.pack(">ih", 1, 1)
        + b"t"
        + struct.pack(">iiqi", 1, 0, 0, 1 << 20)  # partition 0 from offset 0
    )
    with socket.create_connection(("127.0.0.1", agent.port), timeout=30) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        started = time.monotonic()
        time.sleep(0.3)
        producer = store.producer()
        producer.send("t", b"from-outside", partition=0).get()
        producer.close()
        size = struct.unpack(">i", _exactly(sock, 4))[0]
        answer = _exactly(sock, size)
        elapsed = time.monotonic() - started
    assert b"from-outside" in answer
    assert elapsed < 4.0


# A fetch of more than one record in a process that has not imported pandas: pyarrow imports it
# (a third of a second or more, holding the GIL: every connection of the agent waits) for
# fill_null with a Python value and for to_numpy (lakelog/engine/arrow_columns.py).
FETCH_WITHOUT_PANDAS = r"""
import sys
from pathlib import Path

from lakelog.kafka_endpoint.endpoint import Endpoint
from tests.kafka_endpoint.test_fetch_wait import _fetch
from tests.stores import store_with_records

endpoint = Endpoint(store_with_records(Path(sys.argv[1]), [3]), "127.0.0.1", 9092)
assert _fetch(endpoint, 0, 0) == [b"0-0", b"0-1", b"0-2"]
endpoint.close()
assert "pandas" not in sys.modules, "a fetch imported pandas"
print("fetched without pandas")
"""


def test_a_fetch_does_not_import_pandas(tmp_path):
    from tests.test_jvm_free import NO_JVM, run_without_jvm

    result = run_without_jvm(NO_JVM + FETCH_WITHOUT_PANDAS, tmp_path / "store")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    assert "fetched without pandas" in result.stdout
