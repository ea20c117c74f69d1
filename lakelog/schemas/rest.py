"""Confluent's Schema Registry REST API over HTTP (``lakelog serve --schema-registry-listen``).

Paths, bodies and error bodies (``{"error_code": ..., "message": ...}``) as Confluent's
``io.confluent.kafka.schemaregistry.rest.resources`` answer them, as far as
confluent-kafka's ``SchemaRegistryClient`` and its Avro, JSON Schema and Protobuf
serializers use them. A stdlib threading HTTP server: each request reads the
store's latest ``_schemas`` records (:class:`schemas.registry.Registry`).
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from lakelog.engine.context import StoreContext
from lakelog.schemas.formats import SCHEMA_TYPES, ParsedSchema, formatted
from lakelog.schemas.registry import Registry
from lakelog.schemas.registry_errors import (
    SchemaNotFoundError,
    SchemaRegistryError,
    SubjectLevelCompatibilityNotConfiguredError,
    SubjectLevelModeNotConfiguredError,
)
from lakelog.schemas.schemas_topic import RegistryState, SchemaVersion
from lakelog.schemas.subject_rules import (
    compatibility_problems,
    find_schema,
    get_version,
    parse_request_schema,
    parse_version_schema,
    plan_config,
    plan_delete_config,
    plan_delete_mode,
    plan_delete_subject,
    plan_delete_version,
    plan_mode,
    plan_register,
    referenced_by,
    require_subject,
    subject_level,
    subject_mode,
)

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class Raw(str):
    """A body answered as it is (``.../schema`` endpoints answer the schema text itself)."""


def _flag(query: dict[str, list[str]], name: str) -> bool:
    return query.get(name, ["false"])[-1].lower() == "true"


def _version_json(sv: SchemaVersion, text: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"subject": sv.subject, "version": sv.version, "id": sv.schema_id}
    if sv.schema_type != "AVRO":
        body["schemaType"] = sv.schema_type
    if sv.references:
        body["references"] = [r.to_json() for r in sv.references]
    body["schema"] = sv.schema if text is None else text
    return body


def _text(state: RegistryState, sv: SchemaVersion, query: dict[str, list[str]]) -> str:
    fmt = query.get("format", [None])[-1]
    if fmt is None:
        return sv.schema
    parsed: ParsedSchema = parse_version_schema(state, sv)
    return formatted(parsed, fmt)


class RegistryApi:
    """One request -> (HTTP status, JSON-able body). Raises SchemaRegistryError for Confluent's errors."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.routes: list[tuple[str, re.Pattern[str], Callable[..., Any]]] = []
        for method, pattern, handler in [
            ("GET", r"", lambda q, b: {}),
            ("GET", r"subjects", self.list_subjects),
            ("GET", r"subjects/(?P<s>[^/]+)/versions", self.list_versions),
            ("POST", r"subjects/(?P<s>[^/]+)/versions", self.register),
            ("GET", r"subjects/(?P<s>[^/]+)/versions/(?P<v>[^/]+)", self.get_version),
            ("GET", r"subjects/(?P<s>[^/]+)/versions/(?P<v>[^/]+)/schema", self.get_version_schema),
            ("GET", r"subjects/(?P<s>[^/]+)/versions/(?P<v>[^/]+)/referencedby", self.referenced_by),
            ("DELETE", r"subjects/(?P<s>[^/]+)/versions/(?P<v>[^/]+)", self.delete_version),
            ("POST", r"subjects/(?P<s>[^/]+)", self.lookup),
            ("DELETE", r"subjects/(?P<s>[^/]+)", self.delete_subject),
            ("GET", r"schemas/types", lambda q, b: list(SCHEMA_TYPES)),
            ("GET", r"schemas/ids/(?P<i>[^/]+)", self.get_by_id),
            ("GET", r"schemas/ids/(?P<i>[^/]+)/schema", self.get_by_id_schema),
            ("GET", r"schemas/ids/(?P<i>[^/]+)/subjects", self.id_subjects),
            ("GET", r"schemas/ids/(?P<i>[^/]+)/versions", self.id_versions),
            ("GET", r"config", self.get_config),
            ("PUT", r"config", self.put_config),
            ("DELETE", r"config", self.delete_config),
            ("GET", r"config/(?P<s>[^/]+)", self.get_config),
            ("PUT", r"config/(?P<s>[^/]+)", self.put_config),
            ("DELETE", r"config/(?P<s>[^/]+)", self.delete_config),
            ("POST", r"compatibility/subjects/(?P<s>[^/]+)/versions/(?P<v>[^/]+)", self.compatibility),
            ("POST", r"compatibility/subjects/(?P<s>[^/]+)/versions", self.compatibility),
            ("GET", r"mode", self.get_mode),
            ("PUT", r"mode", self.put_mode),
            ("DELETE", r"mode", self.delete_mode),
            ("GET", r"mode/(?P<s>[^/]+)", self.get_mode),
            ("PUT", r"mode/(?P<s>[^/]+)", self.put_mode),
            ("DELETE", r"mode/(?P<s>[^/]+)", self.delete_mode),
            ("GET", r"contexts", lambda q, b: ["."]),
        ]:
            self.routes.append((method, re.compile(pattern), handler))

    def handle(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        path = path.strip("/")
        matched_path = False
        for route_method, pattern, handler in self.routes:
            found = pattern.fullmatch(path)
            if found is None:
                continue
            matched_path = True
            if route_method != method:
                continue
            args = {k: unquote(v) for k, v in found.groupdict().items()}
            return 200, handler(query, body, **args)
        if matched_path:
            return 405, {"error_code": 405, "message": f"HTTP {method} not allowed on /{path}"}
        return 404, {"error_code": 404, "message": "HTTP 404 Not Found"}

    # subjects

    def list_subjects(self, q, b) -> list[str]:
        prefix = q.get("subjectPrefix", [""])[-1]
        subjects = self.registry.read(lambda st: st.live_subjects(deleted=_flag(q, "deleted")))
        return [s for s in subjects if s.startswith(prefix)]

    def list_versions(self, q, b, s: str) -> list[int]:
        return self.registry.read(lambda st: [v.version for v in require_subject(st, s, deleted=_flag(q, "deleted"))])

    def register(self, q, b, s: str) -> dict[str, Any]:
        sv = self.registry.write(lambda st: plan_register(st, s, b))
        return {"id": sv.schema_id}

    def get_version(self, q, b, s: str, v: str) -> dict[str, Any]:
        def answer(st: RegistryState) -> dict[str, Any]:
            sv = get_version(st, s, v, deleted=_flag(q, "deleted"))
            return _version_json(sv, _text(st, sv, q))

        return self.registry.read(answer)

    def get_version_schema(self, q, b, s: str, v: str) -> Raw:
        return Raw(self.registry.read(lambda st: get_version(st, s, v, deleted=_flag(q, "deleted")).schema))

    def referenced_by(self, q, b, s: str, v: str) -> list[int]:
        return self.registry.read(lambda st: referenced_by(st, s, get_version(st, s, v).version))

    def delete_version(self, q, b, s: str, v: str) -> int:
        return self.registry.write(lambda st: plan_delete_version(st, s, v, _flag(q, "permanent")))

    def lookup(self, q, b, s: str) -> dict[str, Any]:
        def answer(st: RegistryState) -> dict[str, Any]:
            deleted = _flag(q, "deleted")
            require_subject(st, s, deleted=deleted)
            parsed, refs = parse_request_schema(st, b)
            sv = find_schema(st, s, parsed, refs, deleted=deleted)
            if sv is None:
                raise SchemaNotFoundError("Schema not found")
            return _version_json(sv, _text(st, sv, q))

        return self.registry.read(answer)

    def delete_subject(self, q, b, s: str) -> list[int]:
        return self.registry.write(lambda st: plan_delete_subject(st, s, _flag(q, "permanent")))

    # schemas by id

    def _by_id(self, st: RegistryState, i: str, q: dict[str, list[str]]) -> SchemaVersion:
        try:
            schema_id = int(i)
        except ValueError:
            schema_id = -1
        found = st.with_id(schema_id)
        subject = q.get("subject", [None])[-1]
        if subject:
            found = [sv for sv in found if sv.subject == subject] or found
        if not found:
            raise SchemaNotFoundError(f"Schema {i} not found")
        return found[0]

    def get_by_id(self, q, b, i: str) -> dict[str, Any]:
        def answer(st: RegistryState) -> dict[str, Any]:
            sv = self._by_id(st, i, q)
            body = _version_json(sv, _text(st, sv, q))
            for key in ("subject", "version", "id"):
                body.pop(key)
            return body

        return self.registry.read(answer)

    def get_by_id_schema(self, q, b, i: str) -> Raw:
        return Raw(self.registry.read(lambda st: self._by_id(st, i, q).schema))

    def id_subjects(self, q, b, i: str) -> list[str]:
        def answer(st: RegistryState) -> list[str]:
            self._by_id(st, i, {})
            deleted = _flag(q, "deleted")
            return sorted({sv.subject for sv in st.with_id(int(i)) if deleted or not sv.deleted})

        return self.registry.read(answer)

    def id_versions(self, q, b, i: str) -> list[dict[str, Any]]:
        def answer(st: RegistryState) -> list[dict[str, Any]]:
            self._by_id(st, i, {})
            deleted = _flag(q, "deleted")
            found = [sv for sv in st.with_id(int(i)) if deleted or not sv.deleted]
            return [{"subject": sv.subject, "version": sv.version} for sv in found]

        return self.registry.read(answer)

    # config, compatibility, mode

    def get_config(self, q, b, s: str | None = None) -> dict[str, Any]:
        def answer(st: RegistryState) -> dict[str, Any]:
            if s is not None and s not in st.configs and not _flag(q, "defaultToGlobal"):
                raise SubjectLevelCompatibilityNotConfiguredError(
                    f"Subject '{s}' does not have subject-level compatibility configured"
                )
            return {"compatibilityLevel": subject_level(st, s)}

        return self.registry.read(answer)

    def put_config(self, q, b, s: str | None = None) -> dict[str, Any]:
        return {"compatibility": self.registry.write(lambda st: plan_config(st, s, b))}

    def delete_config(self, q, b, s: str | None = None) -> dict[str, Any]:
        return {"compatibilityLevel": self.registry.write(lambda st: plan_delete_config(st, s))}

    def compatibility(self, q, b, s: str, v: str | None = None) -> dict[str, Any]:
        def answer(st: RegistryState) -> dict[str, Any]:
            parsed, _ = parse_request_schema(st, b)
            level = subject_level(st, s)
            if v is None:
                against = st.versions(s)
            else:
                against = [get_version(st, s, v)]
                # One version named: checked in the level's direction, not transitively.
                level = level.removesuffix("_TRANSITIVE")
            problems = compatibility_problems(st, s, parsed, against, level)
            body: dict[str, Any] = {"is_compatible": not problems}
            if _flag(q, "verbose"):
                body["messages"] = problems
            return body

        return self.registry.read(answer)

    def get_mode(self, q, b, s: str | None = None) -> dict[str, Any]:
        def answer(st: RegistryState) -> dict[str, Any]:
            if s is not None and s not in st.modes and not _flag(q, "defaultToGlobal"):
                raise SubjectLevelModeNotConfiguredError(f"Subject '{s}' does not have subject-level mode configured")
            return {"mode": subject_mode(st, s)}

        return self.registry.read(answer)

    def put_mode(self, q, b, s: str | None = None) -> dict[str, Any]:
        return {"mode": self.registry.write(lambda st: plan_mode(st, s, b))}

    def delete_mode(self, q, b, s: str | None = None) -> dict[str, Any]:
        return {"mode": self.registry.write(lambda st: plan_delete_mode(st, s))}


class _Handler(BaseHTTPRequestHandler):
    server: RegistryHttpServer
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes: with Nagle's algorithm the body waits for the client's
    # delayed ACK of the headers (~40 ms per request on Linux) on a kept-open connection.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("schema registry %s: " + format, self.client_address, *args)

    def _serve(self, method: str) -> None:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw.strip() else None
        except ValueError as exc:
            self._send(400, {"error_code": 400, "message": f"Unexpected body, not JSON: {exc}"})
            return
        try:
            status, answer = self.server.api.handle(method, parts.path, parse_qs(parts.query), body)
        except SchemaRegistryError as exc:
            status, answer = exc.http_status, {"error_code": exc.error_code, "message": exc.message}
        except Exception as exc:  # a failed request must answer, and the agent go on
            log.exception("schema registry: %s %s failed", method, self.path)
            status, answer = 500, {"error_code": 50001, "message": f"Error in the backend: {exc}"}
        self._send(status, answer)

    def _send(self, status: int, answer: Any) -> None:
        data = answer.encode() if isinstance(answer, Raw) else json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_DELETE(self) -> None:
        self._serve("DELETE")


class RegistryHttpServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], api: RegistryApi) -> None:
        super().__init__(address, _Handler)
        self.api = api

    @property
    def host(self) -> str:
        return str(self.server_address[0])

    @property
    def port(self) -> int:
        return int(self.server_address[1])


def start_registry(context: StoreContext, listen: str) -> RegistryHttpServer:
    """Serve the registry of the store ``context`` on ``listen`` (``HOST:PORT``; port 0 picks a free
    one) in a daemon thread; stop it with ``shutdown()``. Raises OSError when the address is taken."""
    host, _, port = listen.rpartition(":")
    server = RegistryHttpServer((host or "127.0.0.1", int(port)), RegistryApi(Registry(context)))
    threading.Thread(target=server.serve_forever, name="schema-registry", daemon=True).start()
    log.info("lakelog serve: listening on %s:%d (Schema Registry)", server.host, server.port)
    return server
