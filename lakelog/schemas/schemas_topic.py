"""Records of the compacted ``_schemas`` topic, and the registry state folded from them (pure).

The layout is Confluent's (``SchemaRegistryKey``/``SchemaValue`` in
``io.confluent.kafka.schemaregistry.storage``), which Karapace also writes, so
the topic reads the same as theirs from any Delta reader:

* ``{"keytype":"SCHEMA","subject":S,"version":V,"magic":1}`` ->
  ``{"subject":S,"version":V,"id":ID,"schema":TEXT,"schemaType":T,"references":[...],"deleted":B}``
  (``schemaType`` left out for AVRO, as Confluent does); a soft delete rewrites the value
  with ``"deleted":true``, a hard delete writes a tombstone (null value);
* ``{"keytype":"CONFIG","subject":S|null,"magic":0}`` -> ``{"compatibilityLevel":L}`` (null
  subject: the global level; tombstone: back to the global level / the default);
* ``{"keytype":"MODE","subject":S|null,"magic":0}`` -> ``{"mode":M}``;
* ``{"keytype":"DELETE_SUBJECT","subject":S,"magic":0}`` -> ``{"subject":S,"version":V}``
  (Karapace, older Confluent: every version up to V is soft-deleted); ``NOOP`` keys are skipped.

Keys are compact JSON with their fields in that order, the order Confluent writes and Karapace
calls canonical (``karapace/core/key_format.py``: keytype, subject, version, magic), so a key this
registry writes is byte-equal to theirs and compaction keeps one record per key across them.

The next id is one past the largest id any folded record carried, hard-deleted versions'
included (:attr:`RegistryState.max_id`), so an id is not handed out twice while the topic holds
a record naming it. As in Confluent and Karapace (whose id generators also start from the
largest id in the topic), an id whose versions were all hard-deleted can come back once log
compaction has dropped their tombstones (``delete.retention.ms`` after the delete).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

log = logging.getLogger(__name__)

SCHEMAS_TOPIC = "_schemas"
# One partition, compacted: Confluent's kafkastore.topic defaults.
SCHEMAS_TOPIC_CONFIG = {"cleanup.policy": "compact"}


@dataclass(frozen=True)
class Reference:
    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class SchemaVersion:
    """One version of a subject, as its ``SCHEMA`` record holds it."""

    subject: str
    version: int
    schema_id: int
    schema: str
    schema_type: str = "AVRO"
    references: tuple[Reference, ...] = ()
    deleted: bool = False


@dataclass
class RegistryState:
    """Every subject's versions, the levels and modes, folded from ``_schemas`` up to ``next_offset``."""

    subjects: dict[str, dict[int, SchemaVersion]] = field(default_factory=dict)
    configs: dict[str | None, str] = field(default_factory=dict)
    modes: dict[str | None, str] = field(default_factory=dict)
    max_id: int = 0
    next_offset: int = 0

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        """Fold one record; keys this registry does not know (NOOP, future types) are skipped, and so
        is a record that is not the layout's JSON (another writer's; logged), as Karapace skips it:
        one stray record must not take the registry down."""
        try:
            self._apply(key, value)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            log.warning("%s: skipping a record that is not a registry record (%s): key %r", SCHEMAS_TOPIC, exc, key)

    def _apply(self, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            return
        k = json.loads(key)
        keytype, subject = k.get("keytype"), k.get("subject")
        v = None if value is None else json.loads(value)
        if keytype == "SCHEMA":
            versions = self.subjects.setdefault(subject, {})
            if v is None:
                versions.pop(k["version"], None)
            else:
                self.max_id = max(self.max_id, int(v["id"]))
                versions[k["version"]] = schema_version_from_json(v)
        elif keytype == "CONFIG":
            _set(self.configs, subject, None if v is None else v.get("compatibilityLevel"))
        elif keytype == "MODE":
            _set(self.modes, subject, None if v is None else v.get("mode"))
        elif keytype == "DELETE_SUBJECT" and v is not None:
            versions = self.subjects.get(subject, {})
            for number, sv in list(versions.items()):
                if number <= v["version"]:
                    versions[number] = replace(sv, deleted=True)

    def fold(self, records: Iterable[tuple[int, bytes | None, bytes | None]]) -> None:
        for offset, key, value in records:
            self.apply(key, value)
            self.next_offset = offset + 1

    def versions(self, subject: str, *, deleted: bool = False) -> list[SchemaVersion]:
        """The subject's versions in version order; soft-deleted ones only with ``deleted``."""
        found = self.subjects.get(subject, {})
        return [found[n] for n in sorted(found) if deleted or not found[n].deleted]

    def live_subjects(self, *, deleted: bool = False) -> list[str]:
        return sorted(s for s in self.subjects if self.versions(s, deleted=deleted))

    def with_id(self, schema_id: int) -> list[SchemaVersion]:
        """Every version (soft-deleted ones too) registered with ``schema_id``."""
        return [sv for s in sorted(self.subjects) for sv in self.versions(s, deleted=True) if sv.schema_id == schema_id]


def _set(mapping: dict[str | None, str], subject: str | None, value: str | None) -> None:
    if value is None:
        mapping.pop(subject, None)
    else:
        mapping[subject] = value


def schema_version_from_json(v: Mapping[str, Any]) -> SchemaVersion:
    return SchemaVersion(
        subject=v["subject"],
        version=int(v["version"]),
        schema_id=int(v["id"]),
        schema=v["schema"],
        schema_type=v.get("schemaType") or "AVRO",
        references=tuple(Reference(r["name"], r["subject"], int(r["version"])) for r in v.get("references") or ()),
        deleted=bool(v.get("deleted", False)),
    )


def _dumps(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def schema_key(subject: str, version: int) -> bytes:
    return _dumps({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1})


def schema_value(sv: SchemaVersion) -> bytes:
    value: dict[str, Any] = {"subject": sv.subject, "version": sv.version, "id": sv.schema_id, "schema": sv.schema}
    if sv.schema_type != "AVRO":
        value["schemaType"] = sv.schema_type
    if sv.references:
        value["references"] = [r.to_json() for r in sv.references]
    value["deleted"] = sv.deleted
    return _dumps(value)


def schema_record(sv: SchemaVersion) -> tuple[bytes, bytes]:
    return schema_key(sv.subject, sv.version), schema_value(sv)


def config_record(subject: str | None, level: str | None) -> tuple[bytes, bytes | None]:
    key = _dumps({"keytype": "CONFIG", "subject": subject, "magic": 0})
    return key, None if level is None else _dumps({"compatibilityLevel": level})


def mode_record(subject: str | None, mode: str | None) -> tuple[bytes, bytes | None]:
    key = _dumps({"keytype": "MODE", "subject": subject, "magic": 0})
    return key, None if mode is None else _dumps({"mode": mode})
