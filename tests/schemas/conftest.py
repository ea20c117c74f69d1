"""A registry over a fresh store: in this process (``registry``), or agents of their own (``RegistryAgent``)."""

from __future__ import annotations

import contextlib
import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kafka_endpoint.conftest import Agent


class Http:
    """Confluent's REST API by hand: (status, parsed body), for what the client library hides."""

    def __init__(self, url: str) -> None:
        self.url = url

    def __call__(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.url}/{path.lstrip('/')}",
            data=data,
            method=method,
            headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                assert response.headers["Content-Type"] == "application/vnd.schemaregistry.v1+json"
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())


@contextlib.contextmanager
def served_registry(path: Path) -> Iterator[tuple[str, Http]]:
    """``(url, Http)`` of a registry served in this process over a fresh store at ``path``."""
    from lakelog.schemas.rest import start_registry
    from lakelog.store import Store

    store = Store.open(path)
    server = start_registry(store.context, "127.0.0.1:0")
    url = f"http://127.0.0.1:{server.port}"
    try:
        yield url, Http(url)
    finally:
        server.shutdown()
        server.server_close()
        store.close()


@pytest.fixture
def registry(tmp_path):
    with served_registry(tmp_path / "store") as served:
        yield served


@pytest.fixture(scope="module")
def module_registry(tmp_path_factory):
    """One registry for a whole module (tests keep to subjects of their own)."""
    with served_registry(tmp_path_factory.mktemp("registry") / "store") as served:
        yield served


class RegistryAgent(Agent):
    """``lakelog serve --schema-registry-listen 127.0.0.1:0`` over ``store`` in a process of its own."""

    def __init__(self, store: Path, log: Path) -> None:
        super().__init__(store, log=log, serve_args=("--schema-registry-listen", "127.0.0.1:0"))
        line = self.proc.stdout.readline()
        found = re.search(r"Schema Registry on (http://127\.0\.0\.1:\d+)", line)
        if found is None:
            self.proc.kill()
            raise AssertionError(f"the agent serves no registry: {line!r} {log.read_text()}")
        self.url = found.group(1)
        self.http = Http(self.url)
