"""Topics of Protobuf records in Confluent's Protobuf wire format, serialized by confluent-kafka's
ProtobufSerializer against a registry served over the store (tests of typed reads and typed tables).

The message classes are built from FileDescriptorProtos at run time (no protoc here); the
serializer registers each class's file, with its message indexes before the data."""

from __future__ import annotations

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory, timestamp_pb2

FieldProto = descriptor_pb2.FieldDescriptorProto


def order_file(*, note: bool) -> descriptor_pb2.FileDescriptorProto:
    """``shop.Order`` (int64 id = 1, string item = 2), with ``note`` (string note = 3) the second
    version: a field added, compatible."""
    fdp = descriptor_pb2.FileDescriptorProto(name="shop/order.proto", package="shop", syntax="proto3")
    order = fdp.message_type.add(name="Order")
    order.field.add(name="id", number=1, type=FieldProto.TYPE_INT64, label=FieldProto.LABEL_OPTIONAL)
    order.field.add(name="item", number=2, type=FieldProto.TYPE_STRING, label=FieldProto.LABEL_OPTIONAL)
    if note:
        order.field.add(name="note", number=3, type=FieldProto.TYPE_STRING, label=FieldProto.LABEL_OPTIONAL)
    return fdp


PROTO_V1 = order_file(note=False)
PROTO_V2 = order_file(note=True)


def message_class(fdp: descriptor_pb2.FileDescriptorProto, name: str | None = None) -> type:
    """The class of message ``name`` (default: the file's first) of ``fdp``, in a pool of its own
    holding the well-known Timestamp file it may import."""
    pool = descriptor_pool.DescriptorPool()
    timestamp = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(timestamp)
    pool.Add(timestamp)
    pool.Add(fdp)
    name = name or fdp.message_type[0].name
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{fdp.package}.{name}"))


def produce_protobuf(
    store, url: str, topic: str, schema: descriptor_pb2.FileDescriptorProto, values: list[dict], name: str | None = None
) -> None:
    """``values`` (protobuf's JSON mapping, field names as declared) as messages of ``schema``."""
    cls = message_class(schema, name)
    serializer = ProtobufSerializer(cls, SchemaRegistryClient({"url": url}), {"use.deprecated.format": False})
    context = SerializationContext(topic, MessageField.VALUE)
    with store.producer() as producer:
        for value in values:
            message = json_format.ParseDict(value, cls())
            producer.send(topic, value=serializer(message, context), key=str(value.get("id", "")).encode())
