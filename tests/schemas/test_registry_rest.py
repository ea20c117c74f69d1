"""Confluent's REST API of ``lakelog serve --schema-registry-listen``, through confluent-kafka's
SchemaRegistryClient and by hand (status codes, error codes, response bodies)."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient

from lakelog.schemas.compatibility_levels import LEVELS
from tests.schemas.test_compatibility import CHANGES, allowed


def avro(*fields: tuple[str, object]) -> str:
    return json.dumps({"type": "record", "name": "User", "fields": [{"name": n, "type": t} for n, t in fields]})


V1 = avro(("id", "long"))
V2 = json.dumps(
    {
        "type": "record",
        "name": "User",
        "fields": [{"name": "id", "type": "long"}, {"name": "email", "type": "string", "default": ""}],
    }
)
BAD = avro(("id", "string"))


def test_register_is_idempotent_and_ids_are_shared_across_subjects(registry) -> None:
    url, http = registry
    client = SchemaRegistryClient({"url": url})
    first = client.register_schema("users-value", Schema(V1, "AVRO"))
    # Another client (no cache), the same text with other spacing: the same id and version.
    again = http("POST", "subjects/users-value/versions", {"schema": json.dumps(json.loads(V1), indent=2)})
    assert again == (200, {"id": first})
    assert http("GET", "subjects/users-value/versions") == (200, [1])
    # The same schema under another subject keeps its id; a new one gets the next.
    assert SchemaRegistryClient({"url": url}).register_schema("audit-value", Schema(V1, "AVRO")) == first
    second = client.register_schema("users-value", Schema(V2, "AVRO"))
    assert second == first + 1
    latest = client.get_latest_version("users-value")
    assert (latest.version, latest.schema_id, json.loads(latest.schema.schema_str)) == (2, second, json.loads(V2))
    assert http("GET", f"schemas/ids/{first}") == (200, {"schema": V1})
    assert http("GET", f"schemas/ids/{first}/subjects") == (200, ["audit-value", "users-value"])
    assert http("GET", f"schemas/ids/{first}/versions") == (
        200,
        [{"subject": "audit-value", "version": 1}, {"subject": "users-value", "version": 1}],
    )
    assert http("GET", "subjects/users-value/versions/1")[1] == {
        "subject": "users-value",
        "version": 1,
        "id": first,
        "schema": V1,
    }
    assert http("GET", "subjects/users-value/versions/latest/schema") == (200, json.loads(V2))
    assert http("GET", "subjects") == (200, ["audit-value", "users-value"])
    assert http("GET", "schemas/types") == (200, ["JSON", "PROTOBUF", "AVRO"])
    looked_up = client.lookup_schema("users-value", Schema(V1, "AVRO"))
    assert (looked_up.schema_id, looked_up.version) == (first, 1)


def test_an_incompatible_schema_is_refused_with_409_and_nothing_is_registered(registry) -> None:
    url, http = registry
    http("POST", "subjects/s/versions", {"schema": V1})
    status, body = http("POST", "subjects/s/versions", {"schema": BAD})
    assert status == 409 and body["error_code"] == 409, body
    assert "incompatible" in body["message"]
    assert http("GET", "subjects/s/versions") == (200, [1])
    assert http("POST", "compatibility/subjects/s/versions/latest", {"schema": BAD}) == (200, {"is_compatible": False})
    assert http("POST", "compatibility/subjects/s/versions/1?verbose=true", {"schema": V2})[1] == {
        "is_compatible": True,
        "messages": [],
    }
    # Under NONE for the subject alone, the same change registers.
    assert http("PUT", "config/s", {"compatibility": "NONE"}) == (200, {"compatibility": "NONE"})
    assert http("GET", "config/s") == (200, {"compatibilityLevel": "NONE"})
    assert http("GET", "config") == (200, {"compatibilityLevel": "BACKWARD"})
    assert http("POST", "subjects/s/versions", {"schema": BAD}) == (200, {"id": 2})
    assert http("DELETE", "config/s") == (200, {"compatibilityLevel": "NONE"})
    status, body = http("GET", "config/s")
    assert (status, body["error_code"]) == (404, 40408)
    assert SchemaRegistryClient({"url": url}).get_compatibility() == "BACKWARD"


def test_global_config_and_mode(registry) -> None:
    url, http = registry
    client = SchemaRegistryClient({"url": url})
    # The client hands back the response body (its docstring says the level).
    assert client.set_compatibility(level="FULL_TRANSITIVE") == {"compatibility": "FULL_TRANSITIVE"}
    assert client.get_compatibility() == "FULL_TRANSITIVE"
    status, body = http("PUT", "config", {"compatibility": "SIDEWAYS"})
    assert (status, body["error_code"]) == (422, 42203)
    assert http("GET", "mode") == (200, {"mode": "READWRITE"})
    assert http("PUT", "mode", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
    status, body = http("POST", "subjects/s/versions", {"schema": V1})
    assert (status, body["error_code"]) == (422, 42205)
    status, body = http("PUT", "mode", {"mode": "SOMETIMES"})
    assert (status, body["error_code"]) == (422, 42204)
    assert http("PUT", "mode", {"mode": "READWRITE"}) == (200, {"mode": "READWRITE"})
    assert http("POST", "subjects/s/versions", {"schema": V1}) == (200, {"id": 1})


def test_soft_and_hard_deletes_follow_confluents_rules(registry) -> None:
    _url, http = registry
    http("POST", "subjects/s/versions", {"schema": V1})
    http("POST", "subjects/s/versions", {"schema": V2})
    # A hard delete needs a soft one first.
    status, body = http("DELETE", "subjects/s/versions/1?permanent=true")
    assert (status, body["error_code"]) == (404, 40407)
    assert http("DELETE", "subjects/s/versions/1") == (200, 1)
    status, body = http("DELETE", "subjects/s/versions/1")
    assert (status, body["error_code"]) == (404, 40406)
    assert http("GET", "subjects/s/versions") == (200, [2])
    assert http("GET", "subjects/s/versions?deleted=true") == (200, [1, 2])
    status, body = http("GET", "subjects/s/versions/1")
    assert (status, body["error_code"]) == (404, 40402)
    assert http("GET", "subjects/s/versions/1?deleted=true")[1]["id"] == 1
    # The id still answers; a soft-deleted version is found by lookup only with deleted=true.
    assert http("GET", "schemas/ids/1")[0] == 200
    assert http("POST", "subjects/s", {"schema": V1})[1]["error_code"] == 40403
    assert http("POST", "subjects/s?deleted=true", {"schema": V1})[1]["version"] == 1
    assert http("DELETE", "subjects/s/versions/1?permanent=true") == (200, 1)
    status, body = http("GET", "subjects/s/versions/1?deleted=true")
    assert (status, body["error_code"]) == (404, 40402)
    status, body = http("GET", "schemas/ids/1")
    assert (status, body["error_code"]) == (404, 40403)
    # The subject: permanent only after soft; then gone, and its ids are never given again.
    status, body = http("DELETE", "subjects/s?permanent=true")
    assert (status, body["error_code"]) == (404, 40405)
    assert http("DELETE", "subjects/s") == (200, [2])
    status, body = http("DELETE", "subjects/s")
    assert (status, body["error_code"]) == (404, 40404)
    assert http("GET", "subjects") == (200, [])
    assert http("GET", "subjects?deleted=true") == (200, ["s"])
    assert http("DELETE", "subjects/s?permanent=true") == (200, [2])
    status, body = http("GET", "subjects/s/versions")
    assert (status, body["error_code"]) == (404, 40401)
    assert http("POST", "subjects/s/versions", {"schema": avro(("x", "int"))}) == (200, {"id": 3})
    assert http("GET", "subjects/s/versions") == (200, [1])


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("POST", "subjects/s/versions", {"schema": '{"type": "recrd"}'}, 422, 42201),
        ("POST", "subjects/s/versions", {"schema": "{", "schemaType": "AVRO"}, 422, 42201),
        ("POST", "subjects/s/versions", {"schema": '{"type": 5}', "schemaType": "JSON"}, 422, 42201),
        ("POST", "subjects/s/versions", {"schema": "message {", "schemaType": "PROTOBUF"}, 422, 42201),
        ("POST", "subjects/s/versions", {"schema": '"string"', "schemaType": "XML"}, 422, 42201),
        ("POST", "subjects/s/versions", {"schema": V1, "references": [{"name": "x"}]}, 422, 42201),
        ("GET", "subjects/nobody/versions", None, 404, 40401),
        ("GET", "subjects/nobody/versions/latest", None, 404, 40401),
        ("GET", "subjects/known/versions/7", None, 404, 40402),
        ("GET", "subjects/known/versions/0", None, 422, 42202),
        ("GET", "subjects/known/versions/one", None, 422, 42202),
        ("GET", "schemas/ids/999", None, 404, 40403),
        ("POST", "subjects/nobody", {"schema": V1}, 404, 40401),
        ("PUT", "config/known", {"compatibility": "MOSTLY"}, 422, 42203),
        ("GET", "nowhere", None, 404, 404),
    ],
)
def test_bad_input_gets_confluents_error_codes(module_registry, method, path, body, status, code) -> None:
    _, http = module_registry
    assert http("POST", "subjects/known/versions", {"schema": V1})[0] == 200
    answered, error = http(method, path, body)
    assert (answered, error["error_code"]) == (status, code), error
    assert isinstance(error["message"], str) and error["message"]
    # Nothing was registered, and the known subject is as it was.
    assert http("GET", "subjects/s/versions")[1]["error_code"] == 40401
    assert http("GET", "subjects/known/versions") == (200, [1])


def test_schema_references(registry) -> None:
    url, http = registry
    client = SchemaRegistryClient({"url": url})
    address = json.dumps(
        {"type": "record", "name": "Address", "namespace": "shop", "fields": [{"name": "city", "type": "string"}]}
    )
    order = json.dumps(
        {"type": "record", "name": "Order", "namespace": "shop", "fields": [{"name": "ship_to", "type": "Address"}]}
    )
    address_id = client.register_schema("address", Schema(address, "AVRO"))
    status, body = http("POST", "subjects/order/versions", {"schema": order})
    assert (status, body["error_code"]) == (422, 42201)  # Address unknown without the reference
    ref = SchemaReference("shop.Address", "address", 1)
    order_id = client.register_schema("order", Schema(order, "AVRO", [ref]))
    assert order_id != address_id
    assert http("GET", f"schemas/ids/{order_id}")[1]["references"] == [
        {"name": "shop.Address", "subject": "address", "version": 1}
    ]
    assert http("GET", "subjects/address/versions/1/referencedby") == (200, [order_id])
    status, body = http("DELETE", "subjects/address")
    assert (status, body["error_code"]) == (422, 42206)


@pytest.mark.parametrize("schema_type", ["AVRO", "JSON", "PROTOBUF"])
@pytest.mark.parametrize("level", LEVELS)
def test_each_level_refuses_an_incompatible_change_with_409_and_keeps_a_compatible_one(
    module_registry, schema_type: str, level: str
) -> None:
    _, http = module_registry
    changes = {
        refused: [
            (old, new)
            for name, (kind, old, new, keeps) in sorted(CHANGES.items())
            if kind == schema_type and allowed(level, keeps) != refused
        ]
        for refused in (True, False)
    }
    assert changes[False], "every level keeps some change"
    for refused, (old, new) in [(True, c) for c in changes[True][:1]] + [(False, c) for c in changes[False][:1]]:
        subject = f"{schema_type}-{level}-{'refused' if refused else 'kept'}"
        assert http("PUT", f"config/{subject}", {"compatibility": level})[0] == 200
        assert http("POST", f"subjects/{subject}/versions", {"schema": old, "schemaType": schema_type})[0] == 200
        status, body = http("POST", f"subjects/{subject}/versions", {"schema": new, "schemaType": schema_type})
        if refused:
            assert (status, body["error_code"]) == (409, 409), body
            assert http("GET", f"subjects/{subject}/versions") == (200, [1])
        else:
            assert status == 200, body
            assert http("GET", f"subjects/{subject}/versions") == (200, [1, 2])
    if level == "NONE":
        assert not changes[True]


def test_a_proto_text_schema_is_served_as_confluent_kafkas_serialized_descriptor(module_registry) -> None:
    import base64

    from google.protobuf import descriptor_pb2

    _, http = module_registry
    text = 'syntax = "proto3";\npackage shop;\nmessage Order { int64 id = 1; repeated string items = 2; }\n'
    status, body = http("POST", "subjects/proto-text/versions", {"schema": text, "schemaType": "PROTOBUF"})
    assert status == 200, body
    assert http("GET", f"schemas/ids/{body['id']}")[1] == {"schemaType": "PROTOBUF", "schema": text}
    serialized = http("GET", f"schemas/ids/{body['id']}?format=serialized")[1]["schema"]
    descriptor = descriptor_pb2.FileDescriptorProto.FromString(base64.standard_b64decode(serialized))
    assert descriptor.package == "shop"
    assert [(f.name, f.number) for f in descriptor.message_type[0].field] == [("id", 1), ("items", 2)]
    # The descriptor registered again is the same schema: the same id, no new version.
    again = http("POST", "subjects/proto-text/versions", {"schema": serialized, "schemaType": "PROTOBUF"})
    assert again == (200, {"id": body["id"]})
    assert http("GET", "subjects/proto-text/versions") == (200, [1])


def test_deleting_levels_and_modes(module_registry) -> None:
    _, http = module_registry
    assert http("POST", "subjects/levels/versions", {"schema": V1})[0] == 200
    status, body = http("DELETE", "config/levels")
    assert (status, body["error_code"]) == (404, 40408)
    status, body = http("DELETE", "config/nobody-at-all")
    assert (status, body["error_code"]) == (404, 40401)
    assert http("PUT", "config/levels", {"compatibility": "FORWARD"})[0] == 200
    assert http("DELETE", "config/levels") == (200, {"compatibilityLevel": "FORWARD"})
    assert http("GET", "config/levels?defaultToGlobal=true") == (200, {"compatibilityLevel": "BACKWARD"})
    assert http("PUT", "mode/levels", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
    assert http("GET", "mode/levels") == (200, {"mode": "READONLY"})
    status, body = http("DELETE", "subjects/levels")
    assert (status, body["error_code"]) == (422, 42205)
    assert http("DELETE", "mode/levels") == (200, {"mode": "READONLY"})
    status, body = http("GET", "mode/levels")
    assert (status, body["error_code"]) == (404, 40409)
    assert http("DELETE", "subjects/levels") == (200, [1])
