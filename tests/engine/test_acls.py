"""The authorization decision as Kafka's StandardAuthorizer makes it (a pure function), and the
ACL and SCRAM credential stores every agent shares."""

from __future__ import annotations

import pytest

from lakelog.engine.errors import InvalidConfigError
from lakelog.engine.security.acls import AclBinding, AclFilter, AclStore, authorize
from lakelog.engine.security.scram import (
    CredentialStore,
    credential_from_salted_password,
    make_credential,
    verify_password,
)


def acl(name="t", op="READ", permission="ALLOW", principal="User:alice", pattern="LITERAL", rtype="TOPIC", host="*"):
    return AclBinding.of(rtype, name, pattern, principal, host, op, permission)


def may(bindings, op="READ", name="t", principal="User:alice", rtype="TOPIC", host="10.0.0.1", **kw):
    return authorize(bindings, principal, host, op, rtype, name, **kw)


def test_no_acl_on_the_resource_denies_unless_allow_everyone_if_no_acl_found():
    assert not may([])
    assert may([], allow_if_no_acl=True)
    # An ACL on another resource leaves this one without ACLs.
    assert may([acl(name="other", principal="User:bob")], allow_if_no_acl=True)
    # Any ACL on the resource, even for someone else, makes allow.everyone.if.no.acl.found moot.
    assert not may([acl(principal="User:bob")], allow_if_no_acl=True)


def test_allow_matches_principal_host_operation_and_resource():
    assert may([acl()])
    assert not may([acl()], principal="User:bob")
    assert may([acl(principal="User:*")], principal="User:bob")
    assert not may([acl()], op="WRITE")
    assert may([acl(op="ALL")], op="WRITE")
    assert not may([acl(host="10.0.0.2")])
    assert may([acl(host="10.0.0.1")])
    assert not may([acl()], rtype="GROUP")


def test_deny_wins_over_allow():
    assert not may([acl(), acl(permission="DENY")])
    assert not may([acl(op="ALL"), acl(op="ALL", permission="DENY", principal="User:*")])
    # A deny of another operation leaves this one allowed.
    assert may([acl(), acl(op="WRITE", permission="DENY")])


def test_read_write_delete_alter_imply_describe_only_when_allowed():
    for op in ("READ", "WRITE", "DELETE", "ALTER"):
        assert may([acl(op=op)], op="DESCRIBE"), op
    assert not may([acl(op="CREATE")], op="DESCRIBE")
    assert may([acl(op="ALTER_CONFIGS")], op="DESCRIBE_CONFIGS")
    # A DENY of READ does not deny DESCRIBE (StandardAuthorizerData: deny implies nothing).
    assert may([acl(op="DESCRIBE"), acl(op="READ", permission="DENY")], op="DESCRIBE")


def test_literal_wildcard_and_prefixed_patterns():
    assert may([acl(name="*")], name="anything")
    assert may([acl(name="orders-", pattern="PREFIXED")], name="orders-eu")
    assert not may([acl(name="orders-", pattern="PREFIXED")], name="order")
    assert not may([acl(name="orders-")], name="orders-eu")  # literal: the whole name
    assert not may(
        [acl(name="orders-", pattern="PREFIXED"), acl(name="orders-eu", permission="DENY")], name="orders-eu"
    )


def test_super_users_may_do_anything():
    assert may(
        [acl(principal="User:bob", permission="DENY", op="ALL")], principal="User:root", super_users={"User:root"}
    )


def test_bindings_are_checked_as_kafka_checks_them():
    with pytest.raises(InvalidConfigError, match="operation"):
        acl(op="FLY")
    with pytest.raises(InvalidConfigError, match="ANY"):
        acl(op="ANY")
    with pytest.raises(InvalidConfigError, match="TYPE:NAME"):
        acl(principal="alice")
    with pytest.raises(InvalidConfigError, match="kafka-cluster"):
        acl(rtype="CLUSTER", name="c")
    assert acl(op="describe-configs").operation == "DESCRIBE_CONFIGS"


def test_the_acl_store_adds_idempotently_lists_and_removes_by_filter(tmp_path):
    store = AclStore(str(tmp_path))
    assert store.bindings() == []
    store.add([acl(), acl(), acl(op="WRITE"), acl(name="g", rtype="GROUP")])
    assert len(AclStore(str(tmp_path)).bindings()) == 3
    removed = store.remove(AclFilter(resource_type="TOPIC", name="t", operation="WRITE"))
    assert removed == [acl(op="WRITE")]
    assert AclFilter(resource_type="TOPIC", name="t-1", pattern_type="MATCH").matches(
        acl(name="t-", pattern="PREFIXED")
    )
    assert sorted(b.resource_type for b in store.bindings()) == ["GROUP", "TOPIC"]
    assert not list(tmp_path.rglob("*.tmp"))


def test_scram_credentials_hold_no_password_and_verify_it(tmp_path):
    credentials = CredentialStore(str(tmp_path))
    credentials.upsert("alice", make_credential("SCRAM-SHA-512", "s3cret-pass", 8192))
    assert "s3cret-pass" not in "".join(p.read_text() for p in tmp_path.rglob("*.json"))
    held = CredentialStore(str(tmp_path)).credentials("alice")["SCRAM-SHA-512"]
    assert held.iterations == 8192
    assert verify_password(held, "s3cret-pass") and not verify_password(held, "s3cret-pasS")
    assert credentials.authenticate_plain("alice", "s3cret-pass")
    assert not credentials.authenticate_plain("bob", "s3cret-pass")
    assert credentials.delete("alice", "SCRAM-SHA-512") and credentials.users() == {}
    with pytest.raises(InvalidConfigError, match="iterations"):
        make_credential("SCRAM-SHA-256", "x", 100)


def test_a_credential_from_a_salted_password_is_the_one_the_password_makes():
    import hashlib

    salt = b"0123456789abcdef"
    salted = hashlib.pbkdf2_hmac("sha256", b"pw", salt, 4096)
    from_wire = credential_from_salted_password("SCRAM-SHA-256", salt, salted, 4096)
    assert from_wire == make_credential("SCRAM-SHA-256", "pw", 4096, salt=salt)
