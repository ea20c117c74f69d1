"""What each registry request answers and which ``_schemas`` records it writes (pure).

Each function takes the folded :class:`RegistryState` and the request's values and
returns the answer and the records to append (or raises the registry error Confluent
answers with). The registry runs a write's function again on the newer state whenever
another writer appended to ``_schemas`` first, so what it decided (the next id, the
next version, the compatibility check) always holds for the state it commits on.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from lakelog.schemas.compatibility_levels import DEFAULT_LEVEL, check_level, incompatibilities
from lakelog.schemas.formats import ParsedSchema, parse_schema, schema_format
from lakelog.schemas.registry_errors import (
    IncompatibleSchemaError,
    InvalidModeError,
    InvalidSchemaError,
    InvalidVersionError,
    OperationNotPermittedError,
    ReferenceExistsError,
    SubjectLevelCompatibilityNotConfiguredError,
    SubjectNotFoundError,
    SubjectNotSoftDeletedError,
    SubjectSoftDeletedError,
    VersionNotFoundError,
    VersionNotSoftDeletedError,
    VersionSoftDeletedError,
)
from lakelog.schemas.schemas_topic import (
    Reference,
    RegistryState,
    SchemaVersion,
    config_record,
    mode_record,
    schema_record,
)

Records = list[tuple[bytes, bytes | None]]
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
MAX_VERSION = 2**31 - 1


def parse_version(version: Any) -> int | None:
    """A version of the REST path: None for ``latest`` (or -1), else 1..2^31-1; InvalidVersionError (42202)."""
    if str(version).lower() == "latest" or str(version) == "-1":
        return None
    try:
        number = int(str(version))
    except ValueError:
        number = 0
    if not 1 <= number <= MAX_VERSION:
        raise InvalidVersionError(
            f"The specified version '{version}' is not a valid version id. Allowed values are between "
            f'[1, {MAX_VERSION}] and the string "latest"'
        )
    return number


def parse_references(raw: Any) -> tuple[Reference, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InvalidSchemaError(f"Invalid references {raw!r}: a list of {{name, subject, version}}")
    try:
        return tuple(Reference(str(r["name"]), str(r["subject"]), int(r["version"])) for r in raw)
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidSchemaError(f"Invalid references {raw!r}: each needs name, subject and version") from exc


def resolve_references(
    state: RegistryState, references: Sequence[Reference], seen: frozenset = frozenset()
) -> list[str]:
    """The texts of ``references`` and of theirs, depth first (each after what it uses)."""
    texts: list[str] = []
    for ref in references:
        versions = state.versions(ref.subject, deleted=False)
        found = versions[-1:] if ref.version == -1 else [v for v in versions if v.version == ref.version]
        if not found:
            raise InvalidSchemaError(
                f"Invalid schema: reference {ref.name!r} to {ref.subject} v{ref.version} not found"
            )
        key = (ref.subject, found[0].version)
        if key not in seen:
            texts += resolve_references(state, found[0].references, seen | {key})
        texts.append(found[0].schema)
    return texts


@functools.lru_cache(maxsize=4096)
def _parse_cached(schema_type: str, text: str, references: tuple[str, ...]) -> ParsedSchema:
    return parse_schema(schema_type, text, references)


def parse_version_schema(state: RegistryState, sv: SchemaVersion) -> ParsedSchema:
    return _parse_cached(sv.schema_type, sv.schema, tuple(resolve_references(state, sv.references)))


def _same(a: ParsedSchema, a_refs: Sequence[Reference], b: ParsedSchema, b_refs: Sequence[Reference]) -> bool:
    return a.schema_type == b.schema_type and a.canonical == b.canonical and tuple(a_refs) == tuple(b_refs)


def subject_level(state: RegistryState, subject: str | None) -> str:
    if subject is not None and subject in state.configs:
        return state.configs[subject]
    return state.configs.get(None, DEFAULT_LEVEL)


def subject_mode(state: RegistryState, subject: str | None) -> str:
    if subject is not None and subject in state.modes:
        return state.modes[subject]
    return state.modes.get(None, "READWRITE")


def check_writable(state: RegistryState, subject: str | None) -> None:
    mode = subject_mode(state, subject)
    if mode in ("READONLY", "READONLY_OVERRIDE"):
        raise OperationNotPermittedError(f"Subject {subject} is in read-only mode")


def find_schema(
    state: RegistryState, subject: str, parsed: ParsedSchema, refs: Sequence[Reference], *, deleted: bool = False
) -> SchemaVersion | None:
    """The subject's version holding ``parsed`` (the newest), or None."""
    for sv in reversed(state.versions(subject, deleted=deleted)):
        if sv.schema_type == parsed.schema_type and _same(parse_version_schema(state, sv), sv.references, parsed, refs):
            return sv
    return None


def parse_request_schema(state: RegistryState, body: Any) -> tuple[ParsedSchema, tuple[Reference, ...]]:
    """The schema of a register, lookup or compatibility request body. Raises InvalidSchemaError."""
    if not isinstance(body, dict):
        raise InvalidSchemaError(f"Invalid request body {body!r}: a JSON object with 'schema'")
    schema_type = body.get("schemaType") or "AVRO"
    schema_format(schema_type)
    refs = parse_references(body.get("references"))
    parsed = parse_schema(schema_type, body.get("schema"), resolve_references(state, refs))
    return parsed, refs


def compatibility_problems(
    state: RegistryState, subject: str, parsed: ParsedSchema, against: Sequence[SchemaVersion], level: str
) -> list[str]:
    previous = []
    for sv in against:
        if sv.schema_type != parsed.schema_type:
            return [f"schema type {parsed.schema_type} differs from version {sv.version}'s {sv.schema_type}"]
        previous.append(parse_version_schema(state, sv))
    reader_problems = schema_format(parsed.schema_type).reader_problems
    return incompatibilities(level, parsed, previous, lambda r, w: reader_problems(r.parsed, w.parsed))


def plan_register(state: RegistryState, subject: str, body: Any) -> tuple[SchemaVersion, Records]:
    """Register: the version holding the schema (an existing one: no records), Confluent's rules:
    the same schema under the subject keeps its id and version; else it must pass the subject's
    level against its live versions (IncompatibleSchemaError, 409); it gets the id the same schema
    has under any subject, or one past every id ever given; the version after every version the
    subject still holds (soft-deleted ones too)."""
    parsed, refs = parse_request_schema(state, body)
    found = find_schema(state, subject, parsed, refs)
    if found is not None:
        return found, []
    check_writable(state, subject)
    live = state.versions(subject)
    level = subject_level(state, subject)
    problems = compatibility_problems(state, subject, parsed, live, level)
    if problems:
        raise IncompatibleSchemaError(
            f'Schema being registered is incompatible with an earlier schema for subject "{subject}" '
            f"({level}): {'; '.join(problems[:5])}"
        )
    schema_id = next(
        (
            sv.schema_id
            for s in sorted(state.subjects)
            for sv in state.versions(s, deleted=True)
            if sv.schema_type == parsed.schema_type
            and _same(parse_version_schema(state, sv), sv.references, parsed, refs)
        ),
        state.max_id + 1,
    )
    every = state.versions(subject, deleted=True)
    version = every[-1].version + 1 if every else 1
    sv = SchemaVersion(subject, version, schema_id, parsed.text, parsed.schema_type, refs)
    return sv, [schema_record(sv)]


def get_version(state: RegistryState, subject: str, version: Any, *, deleted: bool = False) -> SchemaVersion:
    """The subject's ``version`` (``latest``: the newest live one); soft-deleted versions only with
    ``deleted``. Raises SubjectNotFoundError (40401: no such version at all), VersionNotFoundError
    (40402), InvalidVersionError (42202)."""
    number = parse_version(version)
    versions = require_subject(state, subject, deleted=deleted)
    if number is None:
        return (state.versions(subject) or versions)[-1]
    for sv in versions:
        if sv.version == number:
            return sv
    raise VersionNotFoundError(f"Version {number} not found.")


def require_subject(state: RegistryState, subject: str, *, deleted: bool = False) -> list[SchemaVersion]:
    versions = state.versions(subject, deleted=deleted)
    if not versions:
        raise SubjectNotFoundError(f"Subject '{subject}' not found.")
    return versions


def referenced_by(state: RegistryState, subject: str, version: int) -> list[int]:
    """Ids of live versions whose references name ``subject`` ``version``."""
    return sorted(
        {
            sv.schema_id
            for s in state.subjects
            for sv in state.versions(s)
            if any(r.subject == subject and r.version == version for r in sv.references)
        }
    )


def plan_delete_subject(state: RegistryState, subject: str, permanent: bool) -> tuple[list[int], Records]:
    """Delete a subject: soft (its live versions marked deleted) or, after that, permanent
    (tombstones). Returns the versions deleted. Confluent's rules: 40401 no such subject,
    40404 soft delete of a soft-deleted subject, 40405 permanent delete before a soft one,
    42206 a version is still referenced."""
    every = require_subject(state, subject, deleted=True)
    live = state.versions(subject)
    check_writable(state, subject)
    for sv in every:
        if referenced_by(state, subject, sv.version):
            raise ReferenceExistsError(
                f"One or more references exist to the schema {{subject={subject}, version={sv.version}}}"
            )
    if permanent:
        if live:
            raise SubjectNotSoftDeletedError(
                f"Subject '{subject}' was not deleted first before being permanently deleted"
            )
        return [sv.version for sv in every], [(rec[0], None) for rec in map(schema_record, every)]
    if not live:
        raise SubjectSoftDeletedError(f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently")
    return [sv.version for sv in live], [schema_record(replace(sv, deleted=True)) for sv in live]


def plan_delete_version(state: RegistryState, subject: str, version: Any, permanent: bool) -> tuple[int, Records]:
    """Delete one version: soft, or permanent after a soft one (40406, 40407 as for a subject)."""
    number = parse_version(version)
    every = require_subject(state, subject, deleted=True)
    check_writable(state, subject)
    if number is None:
        live = state.versions(subject)
        if not live and not permanent:
            raise SubjectNotFoundError(f"Subject '{subject}' not found.")
        number = (live or every)[-1].version
    found = next((sv for sv in every if sv.version == number), None)
    if found is None:
        raise VersionNotFoundError(f"Version {number} not found.")
    if referenced_by(state, subject, number):
        raise ReferenceExistsError(
            f"One or more references exist to the schema {{subject={subject}, version={number}}}"
        )
    if permanent:
        if not found.deleted:
            raise VersionNotSoftDeletedError(
                f"Subject '{subject}' Version {number} was not deleted first before being permanently deleted"
            )
        return number, [(schema_record(found)[0], None)]
    if found.deleted:
        raise VersionSoftDeletedError(
            f"Subject '{subject}' Version {number} was soft deleted.Set permanent=true to delete permanently"
        )
    return number, [schema_record(replace(found, deleted=True))]


def plan_config(state: RegistryState, subject: str | None, body: Any) -> tuple[str, Records]:
    """Set the global (``subject`` None) or a subject's level. 42203 for a level Confluent lacks."""
    level = check_level(body.get("compatibility") if isinstance(body, dict) else None)
    return level, [config_record(subject, level)]


def plan_delete_config(state: RegistryState, subject: str | None) -> tuple[str, Records]:
    """Drop the global (``subject`` None: back to BACKWARD) or a subject's level; the level it had.
    40401 for an unknown subject, 40408 for a subject without a level of its own."""
    if subject is not None and subject not in state.configs:
        if not state.versions(subject, deleted=True):
            raise SubjectNotFoundError(f"Subject '{subject}' not found.")
        raise SubjectLevelCompatibilityNotConfiguredError(
            f"Subject '{subject}' does not have subject-level compatibility configured"
        )
    previous = subject_level(state, subject)
    return previous, [config_record(subject, None)] if subject in state.configs else []


def plan_delete_mode(state: RegistryState, subject: str | None) -> tuple[str, Records]:
    """Drop the global or a subject's mode; the mode it had (READWRITE when none was set)."""
    return subject_mode(state, subject), [mode_record(subject, None)] if subject in state.modes else []


def check_mode(mode: Any) -> str:
    if isinstance(mode, str) and mode.upper() in MODES:
        return mode.upper()
    raise InvalidModeError(f"Invalid mode {mode!r}. Valid values are: {', '.join(MODES)}")


def plan_mode(state: RegistryState, subject: str | None, body: Any) -> tuple[str, Records]:
    """Set the global (``subject`` None) or a subject's mode. 42204 for another mode."""
    mode = check_mode(body.get("mode") if isinstance(body, dict) else None)
    return mode, [mode_record(subject, mode)]
