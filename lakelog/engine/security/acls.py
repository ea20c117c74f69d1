"""ACL bindings in the store and the authorization decision, as Kafka's StandardAuthorizer makes it.

The decision (:func:`authorize`) is a pure function of the bindings, the principal, its host,
the operation and the resource; it follows Kafka's
``metadata/src/main/java/org/apache/kafka/metadata/authorizer/StandardAuthorizerData.java``:

* a super user (``super.users``) may do anything;
* of the bindings whose pattern matches the resource (LITERAL: the same name or ``*``;
  PREFIXED: a prefix of the name) and whose principal (the same, or ``User:*``) and host (the
  same, or ``*``) match, a DENY of the operation or of ALL wins over any ALLOW;
* an ALLOW of the operation or of ALL allows; an ALLOW of READ, WRITE, DELETE or ALTER also
  allows DESCRIBE, and of ALTER_CONFIGS also DESCRIBE_CONFIGS (``IMPLIES_DESCRIBE``,
  ``IMPLIES_DESCRIBE_CONFIGS``; a DENY implies nothing);
* when no binding at all matches the resource, ``allow.everyone.if.no.acl.found`` decides
  (Kafka's default, and lakelog's: deny).

Bindings live under ``_lakelog/security/acls/``, one object per binding named by the SHA-256 of
its fields, so adding is idempotent and two agents adding or removing different bindings never
overwrite each other.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from lakelog.engine.errors import InvalidConfigError, error_for_os_error
from lakelog.engine.storage.object_store import filesystem, replace_file

ACLS_DIR = "_lakelog/security/acls"

# Kafka's codes (org.apache.kafka.common.resource.ResourceType, acl.AclOperation,
# acl.AclPermissionType, resource.PatternType): the wire protocol carries them.
RESOURCE_TYPES = {
    "ANY": 1,
    "TOPIC": 2,
    "GROUP": 3,
    "CLUSTER": 4,
    "TRANSACTIONAL_ID": 5,
    "DELEGATION_TOKEN": 6,
    "USER": 7,
}
OPERATIONS = {
    "ANY": 1,
    "ALL": 2,
    "READ": 3,
    "WRITE": 4,
    "CREATE": 5,
    "DELETE": 6,
    "ALTER": 7,
    "DESCRIBE": 8,
    "CLUSTER_ACTION": 9,
    "DESCRIBE_CONFIGS": 10,
    "ALTER_CONFIGS": 11,
    "IDEMPOTENT_WRITE": 12,
    "CREATE_TOKENS": 13,
    "DESCRIBE_TOKENS": 14,
}
PERMISSIONS = {"ANY": 1, "DENY": 2, "ALLOW": 3}
PATTERN_TYPES = {"ANY": 1, "MATCH": 2, "LITERAL": 3, "PREFIXED": 4}
CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
IMPLIES_DESCRIBE = frozenset({"DESCRIBE", "READ", "WRITE", "DELETE", "ALTER"})
IMPLIES_DESCRIBE_CONFIGS = frozenset({"DESCRIBE_CONFIGS", "ALTER_CONFIGS"})


def _named(table: dict[str, int], value: str | int, what: str) -> str:
    """The name of ``value`` (a name in any case, or Kafka's code) in ``table``; raises InvalidConfigError."""
    if isinstance(value, int):
        for name, code in table.items():
            if code == value:
                return name
    else:
        name = value.strip().upper().replace("-", "_")
        if name in table:
            return name
    raise InvalidConfigError(f"unknown {what} {value!r}; known: {', '.join(table)}")


@dataclass(frozen=True)
class AclBinding:
    """One ACL: ``principal`` may (ALLOW) or may not (DENY) do ``operation`` from ``host`` on the
    resources of ``resource_type`` named by ``name`` and ``pattern_type``. Names are Kafka's
    (``TOPIC``, ``READ``, ``LITERAL``, ...)."""

    resource_type: str
    name: str
    pattern_type: str
    principal: str
    host: str
    operation: str
    permission: str

    @classmethod
    def of(
        cls,
        resource_type: str | int,
        name: str,
        pattern_type: str | int,
        principal: str,
        host: str,
        operation: str | int,
        permission: str | int,
    ) -> AclBinding:
        """A binding with every field checked as Kafka's CreateAcls checks it; raises
        InvalidConfigError naming the field that is wrong."""
        binding = cls(
            _named(RESOURCE_TYPES, resource_type, "resource type"),
            name,
            _named(PATTERN_TYPES, pattern_type, "resource pattern type"),
            principal,
            host or WILDCARD,
            _named(OPERATIONS, operation, "operation"),
            _named(PERMISSIONS, permission, "permission type"),
        )
        for field, value in (
            ("resource_type", binding.resource_type),
            ("operation", binding.operation),
            ("permission", binding.permission),
        ):
            if value == "ANY":
                raise InvalidConfigError(f"an ACL's {field} cannot be ANY")
        if binding.pattern_type not in ("LITERAL", "PREFIXED"):
            raise InvalidConfigError(f"an ACL's resource pattern type must be LITERAL or PREFIXED, not {pattern_type}")
        if not name:
            raise InvalidConfigError("an ACL's resource name is empty")
        if binding.resource_type == "CLUSTER" and name != CLUSTER_NAME:
            raise InvalidConfigError(f"the cluster resource is named {CLUSTER_NAME!r}, not {name!r}")
        if ":" not in principal:
            raise InvalidConfigError(f"principal {principal!r} is not TYPE:NAME (e.g. User:alice)")
        return binding

    def key(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class AclFilter:
    """Which bindings DescribeAcls/DeleteAcls (and ``lakelog acls --list/--remove``) mean: a None
    field, or ANY, matches every value; pattern type MATCH matches the bindings that would apply
    to a resource of that name (literal, wildcard and prefixes), as Kafka's filters do."""

    resource_type: str = "ANY"
    name: str | None = None
    pattern_type: str = "ANY"
    principal: str | None = None
    host: str | None = None
    operation: str = "ANY"
    permission: str = "ANY"

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != "ANY" and b.resource_type != self.resource_type:
            return False
        if self.pattern_type == "MATCH":
            if self.name is not None and not _pattern_matches(b, self.name):
                return False
        else:
            if self.pattern_type != "ANY" and b.pattern_type != self.pattern_type:
                return False
            if self.name is not None and b.name != self.name:
                return False
        return (
            (self.principal is None or b.principal == self.principal)
            and (self.host is None or b.host == self.host)
            and (self.operation == "ANY" or b.operation == self.operation)
            and (self.permission == "ANY" or b.permission == self.permission)
        )


def _pattern_matches(binding: AclBinding, name: str) -> bool:
    if binding.pattern_type == "LITERAL":
        return binding.name in (name, WILDCARD)
    return name.startswith(binding.name)


def _operation_matches(binding: AclBinding, operation: str) -> bool:
    if binding.operation in ("ALL", operation):
        return True
    if binding.permission != "ALLOW":
        return False
    return (operation == "DESCRIBE" and binding.operation in IMPLIES_DESCRIBE) or (
        operation == "DESCRIBE_CONFIGS" and binding.operation in IMPLIES_DESCRIBE_CONFIGS
    )


def authorize(
    bindings: Iterable[AclBinding],
    principal: str,
    host: str,
    operation: str,
    resource_type: str,
    name: str,
    *,
    super_users: Iterable[str] = (),
    allow_if_no_acl: bool = False,
) -> bool:
    """Whether ``principal`` (``User:alice``) connecting from ``host`` may do ``operation`` on the
    resource (see the module docstring for the rules)."""
    if principal in super_users:
        return True
    on_resource = [b for b in bindings if b.resource_type == resource_type and _pattern_matches(b, name)]
    if not on_resource:
        return allow_if_no_acl
    allowed = False
    for b in on_resource:
        if b.principal not in (principal, WILDCARD_PRINCIPAL) or b.host not in (host, WILDCARD):
            continue
        if not _operation_matches(b, operation):
            continue
        if b.permission == "DENY":
            return False
        allowed = True
    return allowed


class AclStore:
    """The ACL bindings of one store. Thread-safe; every read lists the store, so bindings added
    or removed through any agent apply to the next read of every one."""

    def __init__(self, uri: str) -> None:
        self._fs, root = filesystem(uri)
        self.directory = f"{root}/{ACLS_DIR}"

    def bindings(self) -> list[AclBinding]:
        """Every binding (in no particular order)."""
        try:
            paths = [p for p in self._fs.ls(self.directory, detail=False) if p.endswith(".json")]
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise error_for_os_error(exc, "listing the ACLs") from exc
        found = []
        for path in paths:
            try:
                found.append(AclBinding(**json.loads(self._fs.cat_file(path))))
            except FileNotFoundError:
                continue  # removed since the listing
        return found

    def add(self, bindings: Iterable[AclBinding]) -> None:
        """Store ``bindings`` (one already there stays as it is). Raises StoreError when one
        could not be written; those written before it stay."""
        for b in bindings:
            try:
                replace_file(self._fs, self.directory, f"{b.key()}.json", json.dumps(asdict(b)).encode())
            except OSError as exc:
                raise error_for_os_error(exc, "writing an ACL") from exc

    def remove(self, acl_filter: AclFilter) -> list[AclBinding]:
        """Remove the bindings ``acl_filter`` matches; those removed."""
        removed = []
        for b in self.bindings():
            if acl_filter.matches(b):
                try:
                    self._fs.rm(f"{self.directory}/{b.key()}.json")
                except FileNotFoundError:
                    continue
                removed.append(b)
        return removed
