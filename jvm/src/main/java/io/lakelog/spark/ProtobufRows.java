package io.lakelog.spark;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

import com.google.protobuf.ByteString;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.EnumValueDescriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.Message;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.util.ArrayBasedMapData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A decoded Protobuf message as Spark's internal row of {@link ProtobufTypes#struct}'s type, as
 * spark-protobuf's ProtobufDeserializer reads it: a singular field the message does not hold (not
 * set, or a proto3 scalar at its default, which the wire format cannot tell apart) is null unless
 * it has a declared default; repeated fields and maps are empty, never null. One instance per
 * task (not thread-safe): it keeps each message type's columns.
 */
final class ProtobufRows {
    private final Map<Descriptor, List<FieldDescriptor>> columns = new HashMap<>();

    InternalRow row(Message message) {
        List<FieldDescriptor> columns = this.columns.computeIfAbsent(
                message.getDescriptorForType(), ProtobufTypes::columns);
        Object[] values = new Object[columns.size()];
        for (int i = 0; i < values.length; i++) {
            FieldDescriptor field = columns.get(i);
            if (field.isMapField()) {
                values[i] = map(field, message);
            } else if (field.isRepeated()) {
                List<?> elements = (List<?>) message.getField(field);
                Object[] converted = new Object[elements.size()];
                for (int j = 0; j < converted.length; j++) {
                    converted[j] = value(field, elements.get(j));
                }
                values[i] = new GenericArrayData(converted);
            } else if (field.hasDefaultValue() || message.hasField(field)) {
                values[i] = value(field, message.getField(field));
            }
        }
        return new GenericInternalRow(values);
    }

    private ArrayBasedMapData map(FieldDescriptor field, Message message) {
        FieldDescriptor key = field.getMessageType().findFieldByNumber(1);
        FieldDescriptor value = field.getMessageType().findFieldByNumber(2);
        List<?> entries = (List<?>) message.getField(field);
        Object[] keys = new Object[entries.size()];
        Object[] values = new Object[entries.size()];
        for (int i = 0; i < keys.length; i++) {
            Message entry = (Message) entries.get(i);
            keys[i] = value(key, entry.getField(key));
            values[i] = value(value, entry.getField(value));
        }
        return new ArrayBasedMapData(new GenericArrayData(keys), new GenericArrayData(values));
    }

    /** One value of {@code field} (an element, for a repeated one) as Spark holds it. */
    private Object value(FieldDescriptor field, Object value) {
        switch (field.getJavaType()) {
            case STRING:
                return UTF8String.fromString((String) value);
            case ENUM:
                // An enum value this schema does not name (proto3 keeps it) reads as protobuf-java's
                // name for it, UNKNOWN_ENUM_VALUE_<type>_<number>.
                return UTF8String.fromString(((EnumValueDescriptor) value).getName());
            case BYTE_STRING:
                return ((ByteString) value).toByteArray();
            case MESSAGE:
                Message message = (Message) value;
                String name = message.getDescriptorForType().getFullName();
                if (name.equals(ProtobufTypes.TIMESTAMP) || name.equals(ProtobufTypes.DURATION)) {
                    // Both are (int64 seconds = 1, int32 nanos = 2); Spark keeps timestamps and
                    // day-time intervals as microseconds.
                    Descriptor type = message.getDescriptorForType();
                    long seconds = (Long) message.getField(type.findFieldByNumber(1));
                    int nanos = (Integer) message.getField(type.findFieldByNumber(2));
                    return Math.addExact(Math.multiplyExact(seconds, 1_000_000L), nanos / 1_000);
                }
                return row(message);
            default:
                return value; // Integer, Long, Float, Double, Boolean: as Spark holds them
        }
    }
}
