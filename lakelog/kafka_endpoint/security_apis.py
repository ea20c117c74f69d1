"""The ACL and SCRAM-credential APIs over the store: CreateAcls, DescribeAcls, DeleteAcls,
DescribeUserScramCredentials and AlterUserScramCredentials, as Kafka's controller answers them
(``kafka-acls`` and ``kafka-configs --entity-type users`` through an agent). What they change is
in the store (:mod:`engine.security`), so every agent of the store authenticates and authorizes
with it. They are authorized on the cluster resource (:mod:`kafka_endpoint.authorization`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kio.schema.alter_user_scram_credentials.v0.request import AlterUserScramCredentialsRequest
from kio.schema.create_acls.v3.request import CreateAclsRequest
from kio.schema.delete_acls.v3.request import DeleteAclsRequest
from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.schema.describe_user_scram_credentials.v0.request import DescribeUserScramCredentialsRequest
from kio.schema.errors import ErrorCode

from lakelog.engine.errors import LakelogError
from lakelog.engine.security.acls import (
    OPERATIONS,
    PATTERN_TYPES,
    PERMISSIONS,
    RESOURCE_TYPES,
    AclBinding,
    AclFilter,
    AclStore,
)
from lakelog.engine.security.scram import MECHANISM_CODES, CredentialStore, credential_from_salted_password
from lakelog.kafka_endpoint.messages import Request, api_key, build, response_class

CREATE_ACLS = api_key(CreateAclsRequest)
DESCRIBE_ACLS = api_key(DescribeAclsRequest)
DELETE_ACLS = api_key(DeleteAclsRequest)
DESCRIBE_USER_SCRAM_CREDENTIALS = api_key(DescribeUserScramCredentialsRequest)
ALTER_USER_SCRAM_CREDENTIALS = api_key(AlterUserScramCredentialsRequest)
VERSIONS: dict[int, tuple[int, int]] = {
    DESCRIBE_ACLS: (1, 3),
    CREATE_ACLS: (1, 3),
    DELETE_ACLS: (1, 3),
    DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
}
_MECHANISM_NAMES = {code: name for name, code in MECHANISM_CODES.items()}


def _filter(f: Any) -> AclFilter:
    """Kafka's ACL binding filter of a DescribeAcls request or DeleteAcls filter entry."""

    def named(table: dict[str, int], code: int) -> str:
        return next((name for name, c in table.items() if c == code), "UNKNOWN")

    return AclFilter(
        resource_type=named(RESOURCE_TYPES, int(f.resource_type_filter)),
        name=f.resource_name_filter,
        pattern_type=named(PATTERN_TYPES, int(f.pattern_type_filter)),
        principal=f.principal_filter,
        host=f.host_filter,
        operation=named(OPERATIONS, int(f.operation)),
        permission=named(PERMISSIONS, int(f.permission_type)),
    )


def _described(b: AclBinding) -> dict[str, Any]:
    return {
        "principal": b.principal,
        "host": b.host,
        "operation": OPERATIONS[b.operation],
        "permission_type": PERMISSIONS[b.permission],
    }


class SecurityApis:
    """ACLs and SCRAM credentials in the store, through Kafka's admin APIs."""

    def __init__(self, store_uri: str) -> None:
        self.acls = AclStore(store_uri)
        self.credentials = CredentialStore(store_uri)

    def handlers(self) -> dict[int, Callable[[Request], Any]]:
        return {
            CREATE_ACLS: self.create_acls,
            DESCRIBE_ACLS: self.describe_acls,
            DELETE_ACLS: self.delete_acls,
            DESCRIBE_USER_SCRAM_CREDENTIALS: self.describe_user_scram_credentials,
            ALTER_USER_SCRAM_CREDENTIALS: self.alter_user_scram_credentials,
        }

    def create_acls(self, request: Request) -> Any:
        results = []
        for c in request.body.creations:
            try:
                binding = AclBinding.of(
                    int(c.resource_type),
                    c.resource_name,
                    int(c.resource_pattern_type),
                    c.principal,
                    c.host,
                    int(c.operation),
                    int(c.permission_type),
                )
                self.acls.add([binding])
                results.append({"error_code": ErrorCode.none, "error_message": None})
            except LakelogError as exc:
                results.append({"error_code": ErrorCode.invalid_request, "error_message": str(exc)})
        return build(response_class(CREATE_ACLS, request.api_version), results=results)

    def describe_acls(self, request: Request) -> Any:
        acl_filter = _filter(request.body)
        grouped: dict[tuple[str, str, str], list[AclBinding]] = {}
        for b in self.acls.bindings():
            if acl_filter.matches(b):
                grouped.setdefault((b.resource_type, b.name, b.pattern_type), []).append(b)
        resources = [
            {
                "resource_type": RESOURCE_TYPES[rtype],
                "resource_name": name,
                "pattern_type": PATTERN_TYPES[pattern],
                "acls": [_described(b) for b in bindings],
            }
            for (rtype, name, pattern), bindings in sorted(grouped.items())
        ]
        return build(response_class(DESCRIBE_ACLS, request.api_version), error_code=ErrorCode.none, resources=resources)

    def delete_acls(self, request: Request) -> Any:
        results = []
        for f in request.body.filters:
            removed = self.acls.remove(_filter(f))
            matching = [
                {
                    "error_code": ErrorCode.none,
                    "resource_type": RESOURCE_TYPES[b.resource_type],
                    "resource_name": b.name,
                    "pattern_type": PATTERN_TYPES[b.pattern_type],
                    **_described(b),
                }
                for b in removed
            ]
            results.append({"error_code": ErrorCode.none, "matching_acls": matching})
        return build(response_class(DELETE_ACLS, request.api_version), filter_results=results)

    def describe_user_scram_credentials(self, request: Request) -> Any:
        everyone = self.credentials.users() if request.body.users is None else None
        names = sorted(everyone) if everyone is not None else [u.name for u in request.body.users]
        results = []
        for name in names:
            held = everyone[name] if everyone is not None else self.credentials.credentials(name)
            if not held:
                results.append(
                    {
                        "user": name,
                        "error_code": ErrorCode.resource_not_found,
                        "error_message": f"Attempt to describe a user credential that does not exist: {name}",
                    }
                )
                continue
            infos = [{"mechanism": MECHANISM_CODES[m], "iterations": c.iterations} for m, c in sorted(held.items())]
            results.append({"user": name, "error_code": ErrorCode.none, "credential_infos": infos})
        return build(
            response_class(DESCRIBE_USER_SCRAM_CREDENTIALS, request.api_version),
            error_code=ErrorCode.none,
            results=results,
        )

    def alter_user_scram_credentials(self, request: Request) -> Any:
        """Upsertions and deletions, each answered per user; the salted password is turned into
        StoredKey/ServerKey at once and itself never stored."""
        body = request.body
        outcome: dict[str, tuple[ErrorCode, str | None]] = {}
        for d in body.deletions:
            mechanism = _MECHANISM_NAMES.get(int(d.mechanism))
            if mechanism is None:
                outcome[d.name] = (ErrorCode.unsupported_sasl_mechanism, f"mechanism {int(d.mechanism)}")
            elif not self.credentials.delete(d.name, mechanism):
                outcome[d.name] = (ErrorCode.resource_not_found, f"no {mechanism} credential of {d.name}")
            else:
                outcome.setdefault(d.name, (ErrorCode.none, None))
        for u in body.upsertions:
            mechanism = _MECHANISM_NAMES.get(int(u.mechanism))
            if mechanism is None:
                outcome[u.name] = (ErrorCode.unsupported_sasl_mechanism, f"mechanism {int(u.mechanism)}")
                continue
            try:
                credential = credential_from_salted_password(mechanism, u.salt, u.salted_password, int(u.iterations))
                self.credentials.upsert(u.name, credential)
            except LakelogError as exc:
                outcome[u.name] = (ErrorCode.unacceptable_credential, str(exc))
                continue
            outcome.setdefault(u.name, (ErrorCode.none, None))
        results = [
            {"user": user, "error_code": code, "error_message": message} for user, (code, message) in outcome.items()
        ]
        return build(response_class(ALTER_USER_SCRAM_CREDENTIALS, request.api_version), results=results)
