"""Two agents on one store register at once: one id per schema, no id or version given twice; a
restarted agent answers with the same ids at once (they live in the store's ``_schemas`` topic)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

import pytest

from lakelog.schemas.schemas_topic import SCHEMAS_TOPIC
from lakelog.store import Store
from tests.schemas.conftest import RegistryAgent

pytestmark = pytest.mark.slow


def schema(name: str) -> str:
    return json.dumps({"type": "record", "name": name, "fields": [{"name": "f", "type": "string"}]})


def run_at_once(tasks: list[Callable[[], None]]) -> None:
    start = threading.Barrier(len(tasks))
    failures: list[BaseException] = []

    def run(task: Callable[[], None]) -> None:
        start.wait()
        try:
            task()
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(t,)) for t in tasks]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not failures, failures


def test_two_agents_racing_give_one_id_per_schema_and_never_one_id_twice(tmp_path) -> None:
    Store.open(tmp_path / "store").close()
    agents = [RegistryAgent(tmp_path / "store", tmp_path / f"agent{i}.log") for i in range(2)]
    try:
        assert agents[0].http("PUT", "config", {"compatibility": "NONE"})[0] == 200
        ids: dict[tuple[int, str, str], int] = {}

        def register(i: int, subject: str, names: list[str]) -> Callable[[], None]:
            def task() -> None:
                for name in names:
                    status, body = agents[i].http("POST", f"subjects/{subject}/versions", {"schema": schema(name)})
                    assert status == 200, body
                    ids[(i, subject, name)] = body["id"]

            return task

        shared = [f"Shared{n}" for n in range(6)]
        run_at_once(
            [
                register(0, "same", shared),
                register(1, "same", shared),
                register(0, "mixed", [f"A{n}" for n in range(6)]),
                register(1, "mixed", [f"B{n}" for n in range(6)]),
            ]
        )
        # The same schema got one id and one version, whichever agent registered it first.
        for name in shared:
            assert ids[(0, "same", name)] == ids[(1, "same", name)]
        assert agents[1].http("GET", "subjects/same/versions") == (200, [1, 2, 3, 4, 5, 6])
        # Different schemas never share an id; the racing subject got every version once.
        distinct = {(subject, name): i for (_, subject, name), i in ids.items()}
        assert len(set(distinct.values())) == len(distinct) == 18
        assert agents[0].http("GET", "subjects/mixed/versions") == (200, list(range(1, 13)))
        seen = {agents[0].http("GET", f"subjects/mixed/versions/{v}")[1]["id"] for v in range(1, 13)}
        assert seen == {i for (subject, _), i in distinct.items() if subject == "mixed"}
        answers = {path: agents[1].http("GET", path) for path in _paths(distinct.values())}
    finally:
        for agent in agents:
            agent.stop()

    # A new agent on the store answers the same from its first request.
    again = RegistryAgent(tmp_path / "store", tmp_path / "again.log")
    try:
        assert {path: again.http("GET", path) for path in answers} == answers
        status, body = again.http("POST", "subjects/other/versions", {"schema": schema("New")})
        assert status == 200 and body["id"] == max(distinct.values()) + 1
    finally:
        again.stop()
    with Store.open(tmp_path / "store") as store:
        assert SCHEMAS_TOPIC in store.list_topics()
        assert store.describe_topic(SCHEMAS_TOPIC).partitions == 1


def _paths(ids) -> list[str]:
    return ["subjects", "subjects/same/versions", "subjects/mixed/versions", "config"] + [
        f"schemas/ids/{i}/versions" for i in sorted(ids)
    ]
