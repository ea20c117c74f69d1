"""The Schema Registry's errors: Confluent's REST error codes, as subclasses of lakelog's own.

Each carries Confluent's ``error_code`` and the HTTP status it is answered with
(Confluent's ``io.confluent.kafka.schemaregistry.rest.exceptions.Errors``): the
status is the code's first three digits (40401 -> 404), 409 and 50001 aside.
"""

from __future__ import annotations

from lakelog.engine.errors import FatalError


class SchemaRegistryError(FatalError):
    """A request the registry refuses; nothing was written to ``_schemas``."""

    error_code = 50001
    http_status = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _status(code: int) -> int:
    return code // 100 if code >= 10_000 else code


def _error(name: str, code: int, doc: str) -> type[SchemaRegistryError]:
    return type(name, (SchemaRegistryError,), {"error_code": code, "http_status": _status(code), "__doc__": doc})


SubjectNotFoundError = _error("SubjectNotFoundError", 40401, "No such subject (or it has no live version).")
VersionNotFoundError = _error("VersionNotFoundError", 40402, "The subject has no such version.")
SchemaNotFoundError = _error("SchemaNotFoundError", 40403, "No schema with that id, or not under that subject.")
SubjectSoftDeletedError = _error(
    "SubjectSoftDeletedError", 40404, "The subject was soft-deleted; only a permanent delete is left."
)
SubjectNotSoftDeletedError = _error(
    "SubjectNotSoftDeletedError", 40405, "A permanent delete of a subject that was not soft-deleted first."
)
VersionSoftDeletedError = _error(
    "VersionSoftDeletedError", 40406, "The version was soft-deleted; only a permanent delete is left."
)
VersionNotSoftDeletedError = _error(
    "VersionNotSoftDeletedError", 40407, "A permanent delete of a version that was not soft-deleted first."
)
SubjectLevelCompatibilityNotConfiguredError = _error(
    "SubjectLevelCompatibilityNotConfiguredError", 40408, "The subject has no compatibility level of its own."
)
SubjectLevelModeNotConfiguredError = _error(
    "SubjectLevelModeNotConfiguredError", 40409, "The subject has no mode of its own."
)
IncompatibleSchemaError = _error("IncompatibleSchemaError", 409, "The schema breaks the subject's compatibility level.")
InvalidSchemaError = _error("InvalidSchemaError", 42201, "The schema text does not parse, or its type is unknown.")
InvalidVersionError = _error("InvalidVersionError", 42202, "A version that is neither 'latest' nor 1..2^31-1.")
InvalidCompatibilityLevelError = _error(
    "InvalidCompatibilityLevelError", 42203, "A compatibility level Confluent does not define."
)
InvalidModeError = _error("InvalidModeError", 42204, "A mode other than READWRITE, READONLY, IMPORT.")
OperationNotPermittedError = _error(
    "OperationNotPermittedError", 42205, "A write refused by the mode (READONLY) or an id given outside IMPORT."
)
ReferenceExistsError = _error(
    "ReferenceExistsError", 42206, "The schema is referenced by another one and cannot be deleted."
)
StoreUnavailableError = _error(
    "StoreUnavailableError", 50002, "The store could not be read or written (Confluent: backend store error)."
)
