"""How the agent's event loop learns of commits and writes answers (no sockets, no Spark)."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from types import SimpleNamespace

from lakelog.kafka_endpoint.produce import StartedProduce
from lakelog.kafka_endpoint.server import Server, ThreadCallbacks


def test_callbacks_handed_by_another_thread_run_on_the_loop_in_order_with_one_wake_up():
    """A commit answers each of its requests from the commit thread: the loop is woken once
    for all of them (asyncio's call_soon_threadsafe writes to its self-pipe every time)."""

    async def main() -> tuple[list[int], list[str], int]:
        loop = asyncio.get_running_loop()
        wakes = [0]
        original = loop.call_soon_threadsafe

        def counted(*args, **kwargs):
            wakes[0] += 1
            return original(*args, **kwargs)

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
        callbacks = ThreadCallbacks(loop)
        ran: list[int] = []
        threads: list[str] = []
        done = asyncio.Event()

        def one(i: int) -> None:
            ran.append(i)
            threads.append(threading.current_thread().name)
            if len(ran) == 5:
                done.set()

        def commit_thread() -> None:
            for i in range(5):
                callbacks.call(lambda i=i: one(i))

        # The loop is busy (not running callbacks) while the other thread hands all five.
        thread = threading.Thread(target=commit_thread, name="commit")
        thread.start()
        thread.join()
        await asyncio.wait_for(done.wait(), 10)
        return ran, threads, wakes[0]

    ran, threads, wakes = asyncio.run(main())
    assert ran == [0, 1, 2, 3, 4]
    assert set(threads) == {threading.main_thread().name}
    assert wakes == 1


def test_callbacks_handed_after_a_closed_loop_are_dropped():
    loop = asyncio.new_event_loop()
    callbacks = ThreadCallbacks(loop)
    loop.close()
    callbacks.call(lambda: None)  # nobody waits any more: no error


class _Writer:
    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    async def drain(self) -> None:
        await asyncio.sleep(0)


async def _queued(n: int, *, closed: bool) -> tuple[asyncio.Queue, list[asyncio.Future]]:
    """A connection's answer queue holding ``n`` answers not done yet (then its end if ``closed``)."""
    loop = asyncio.get_running_loop()
    answers: asyncio.Queue = asyncio.Queue()
    futures = [loop.create_future() for _ in range(n)]
    for f in futures:
        await answers.put(f)
    if closed:
        await answers.put(None)
    return answers, futures


def test_answers_done_together_go_out_in_one_write_in_request_order():
    """The answers of one commit's requests (done together) are one send; an answer not done
    yet is waited for, and what follows it is never written before it."""

    async def main() -> tuple[list[bytes], list[bytes], bool]:
        answers, futures = await _queued(7, closed=True)  # the connection ends after them
        writer = _Writer()
        for i in (0, 1, 2, 5, 6):
            futures[i].set_result(f"<{i}>".encode())
        futures[4].set_result(b"")  # acks=0: nothing to send
        # Only the metrics are looked at on the server.
        sending = asyncio.ensure_future(Server._send_in_order(SimpleNamespace(metrics=None), answers, writer))
        await asyncio.sleep(0.05)
        before = list(writer.writes)
        futures[3].set_result(b"<3>")
        await asyncio.wait_for(sending, 10)
        return before, writer.writes, sending.done()

    before, after, ended = asyncio.run(main())
    assert before == [b"<0><1><2>"]  # the fourth is waited for, nothing after it goes first
    assert after == [b"<0><1><2>", b"<3><5><6>"] and ended


def test_an_answer_that_failed_ends_the_connection_after_the_answers_before_it_are_written():
    async def main() -> tuple[list[bytes], BaseException | None]:
        answers, futures = await _queued(3, closed=False)
        writer = _Writer()
        futures[0].set_result(b"<0>")
        futures[1].set_exception(ConnectionResetError("gone"))
        futures[2].set_result(b"<2>")
        try:
            await Server._send_in_order(SimpleNamespace(metrics=None), answers, writer)
        except ConnectionResetError as exc:
            return writer.writes, exc
        return writer.writes, None

    writes, error = asyncio.run(main())
    assert writes == [b"<0>"] and isinstance(error, ConnectionResetError)


def _produced(started: StartedProduce, pool: ThreadPoolExecutor) -> asyncio.Future:
    """Server._produced on the running loop, with only what it uses of a server."""
    server = SimpleNamespace(_callbacks=ThreadCallbacks(asyncio.get_running_loop()), _pool=pool)
    return Server._produced(server, started)  # type: ignore[arg-type]


def test_a_produce_answer_is_built_on_the_loop_once_its_last_commit_ended_with_no_task_per_request():
    async def main() -> tuple[bool, bytes, list[str], int]:
        commits = [Future() for _ in range(3)]
        built: list[str] = []

        def answer() -> bytes:
            built.append(threading.current_thread().name)
            return b"<answer>"

        with ThreadPoolExecutor(1) as pool:
            tasks = len(asyncio.all_tasks())
            waiting = _produced(StartedProduce(tuple(commits), answer), pool)
            extra_tasks = len(asyncio.all_tasks()) - tasks
            for commit in commits[:2]:
                threading.Thread(target=commit.set_result, args=(None,)).start()
            await asyncio.sleep(0.05)
            early = waiting.done()
            threading.Thread(target=commits[2].set_result, args=(None,)).start()
            result = await asyncio.wait_for(waiting, 10)
        return early, result, built, extra_tasks

    early, result, built, extra_tasks = asyncio.run(main())
    assert not early and result == b"<answer>"
    assert built == [threading.main_thread().name]  # once, on the loop
    assert extra_tasks == 0


def test_a_produce_answer_that_must_read_the_store_is_built_on_a_worker_and_one_that_fails_fails_its_future():
    async def main() -> tuple[bytes, list[str], BaseException | None, bytes]:
        failed: Future = Future()
        failed.set_exception(RuntimeError("commit failed"))  # not ready: answer() may block
        built: list[str] = []

        def answer() -> bytes:
            built.append(threading.current_thread().name)
            return b"<read back>"

        def broken() -> bytes:
            raise ValueError("cannot build")

        with ThreadPoolExecutor(1, thread_name_prefix="worker") as pool:
            on_worker = await asyncio.wait_for(_produced(StartedProduce((failed,), answer), pool), 10)
            error = None
            try:
                await asyncio.wait_for(_produced(StartedProduce((), broken), pool), 10)
            except ValueError as exc:
                error = exc
            no_commits = await asyncio.wait_for(_produced(StartedProduce((), lambda: b"<none>"), pool), 10)
        return on_worker, built, error, no_commits

    on_worker, built, error, no_commits = asyncio.run(main())
    assert on_worker == b"<read back>" and built[0].startswith("worker")
    assert isinstance(error, ValueError) and no_commits == b"<none>"
