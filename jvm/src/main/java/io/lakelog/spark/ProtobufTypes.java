package io.lakelog.spark;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import com.google.protobuf.DescriptorProtos.DescriptorProto;
import com.google.protobuf.DescriptorProtos.FileDescriptorProto;
import com.google.protobuf.DescriptorProtos.FileDescriptorSet;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.DescriptorValidationException;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.Descriptors.FileDescriptor;
import com.google.protobuf.InvalidProtocolBufferException;

import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DayTimeIntervalType;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * Protobuf descriptors for typed reads ({@link ProtobufDecode}) and the Spark type of a message,
 * by spark-protobuf's mapping (connector/protobuf/.../utils/SchemaConverters.scala, its default
 * options): 32-bit integers as int, 64-bit as long (unsigned ones too, as their signed bits),
 * enums as their value's name, bytes as binary, {@code google.protobuf.Timestamp} as timestamp,
 * {@code google.protobuf.Duration} as a day-time interval, messages as structs, repeated fields as
 * arrays and maps as maps; a message with no field is left out. A recursive message has no Spark
 * type: it is refused naming the field ({@link ProtobufSchemaException}), as spark-protobuf
 * refuses it without {@code recursive.fields.max.depth}.
 */
final class ProtobufTypes {
    static final String TIMESTAMP = "google.protobuf.Timestamp";
    static final String DURATION = "google.protobuf.Duration";

    private ProtobufTypes() {}

    /** A message type, a registry schema, or a message index that Spark cannot read. */
    static final class ProtobufSchemaException extends IllegalArgumentException {
        ProtobufSchemaException(String message, Throwable cause) {
            super(message, cause);
        }
    }

    /**
     * The message {@code fullName} of the files in {@code base64Set} (a serialized FileDescriptorSet,
     * each file after those it imports, as lakelog/schemas/protobuf_schemas.py's file_set writes it).
     */
    static Descriptor message(String base64Set, String fullName) {
        Map<String, FileDescriptor> built = new HashMap<>();
        try {
            FileDescriptorSet set = FileDescriptorSet.parseFrom(Base64.getDecoder().decode(base64Set));
            for (FileDescriptorProto file : set.getFileList()) {
                List<FileDescriptor> dependencies = new ArrayList<>();
                for (String name : file.getDependencyList()) {
                    FileDescriptor dependency = built.get(name);
                    if (dependency == null) {
                        throw new ProtobufSchemaException("file " + file.getName() + " imports " + name
                                + ", which its descriptor set does not hold", null);
                    }
                    dependencies.add(dependency);
                }
                built.put(file.getName(), FileDescriptor.buildFrom(file, dependencies.toArray(new FileDescriptor[0])));
            }
        } catch (InvalidProtocolBufferException | DescriptorValidationException | IllegalArgumentException e) {
            if (e instanceof ProtobufSchemaException) {
                throw (ProtobufSchemaException) e;
            }
            throw new ProtobufSchemaException("not a Protobuf descriptor set: " + e.getMessage(), e);
        }
        for (FileDescriptor file : built.values()) {
            Descriptor found = find(file.getMessageTypes(), fullName);
            if (found != null) {
                return found;
            }
        }
        throw new ProtobufSchemaException("no message " + fullName + " in the schema's files", null);
    }

    private static Descriptor find(List<Descriptor> messages, String fullName) {
        for (Descriptor message : messages) {
            Descriptor found = message.getFullName().equals(fullName) ? message : find(message.getNestedTypes(), fullName);
            if (found != null) {
                return found;
            }
        }
        return null;
    }

    /** The writer's main file (a serialized FileDescriptorProto), for {@link #messageName}. */
    static FileDescriptorProto file(String base64File) {
        try {
            return FileDescriptorProto.parseFrom(Base64.getDecoder().decode(base64File));
        } catch (InvalidProtocolBufferException | IllegalArgumentException e) {
            throw new ProtobufSchemaException("not a Protobuf file descriptor: " + e.getMessage(), e);
        }
    }

    /**
     * The full name of the message {@code indexes} names in {@code file} (Confluent's message indexes:
     * a top-level message, then nested ones), or null when the file has no such message.
     */
    static String messageName(FileDescriptorProto file, int[] indexes) {
        if (indexes.length == 0 || indexes[0] < 0 || indexes[0] >= file.getMessageTypeCount()) {
            return null;
        }
        DescriptorProto message = file.getMessageType(indexes[0]);
        StringBuilder name = new StringBuilder(file.getPackage().isEmpty() ? "" : file.getPackage() + ".");
        name.append(message.getName());
        for (int i = 1; i < indexes.length; i++) {
            if (indexes[i] < 0 || indexes[i] >= message.getNestedTypeCount()) {
                return null;
            }
            message = message.getNestedType(indexes[i]);
            name.append('.').append(message.getName());
        }
        return name.toString();
    }

    /** The Spark type of {@code message}. Raises ProtobufSchemaException for a recursive message. */
    static StructType struct(Descriptor message) {
        Deque<String> enclosing = new ArrayDeque<>();
        enclosing.push(message.getFullName());
        return struct(message, enclosing);
    }

    /** The fields of {@code message} that {@link #struct} gives a column, in its order. */
    static List<FieldDescriptor> columns(Descriptor message) {
        List<FieldDescriptor> out = new ArrayList<>();
        for (FieldDescriptor field : message.getFields()) {
            if (!isEmptyMessage(field)) {
                out.add(field);
            }
        }
        return out;
    }

    private static boolean isEmptyMessage(FieldDescriptor field) {
        return field.getJavaType() == FieldDescriptor.JavaType.MESSAGE && !field.isMapField()
                && !isWellKnown(field.getMessageType()) && field.getMessageType().getFields().isEmpty();
    }

    static boolean isWellKnown(Descriptor message) {
        return message.getFullName().equals(TIMESTAMP) || message.getFullName().equals(DURATION);
    }

    private static StructType struct(Descriptor message, Deque<String> enclosing) {
        List<StructField> fields = new ArrayList<>();
        for (FieldDescriptor field : columns(message)) {
            DataType type;
            boolean nullable = true;
            if (field.isMapField()) {
                Descriptor entry = field.getMessageType();
                type = new MapType(
                        valueType(entry.findFieldByNumber(1), enclosing),
                        valueType(entry.findFieldByNumber(2), enclosing),
                        false);
            } else if (field.isRepeated()) {
                type = new ArrayType(valueType(field, enclosing), false);
            } else {
                type = valueType(field, enclosing);
                nullable = !field.isRequired();
            }
            fields.add(new StructField(field.getName(), type, nullable, Metadata.empty()));
        }
        return new StructType(fields.toArray(new StructField[0]));
    }

    private static DataType valueType(FieldDescriptor field, Deque<String> enclosing) {
        switch (field.getJavaType()) {
            case INT:
                return DataTypes.IntegerType;
            case LONG:
                return DataTypes.LongType;
            case FLOAT:
                return DataTypes.FloatType;
            case DOUBLE:
                return DataTypes.DoubleType;
            case BOOLEAN:
                return DataTypes.BooleanType;
            case STRING:
            case ENUM:
                return DataTypes.StringType;
            case BYTE_STRING:
                return DataTypes.BinaryType;
            default:
                break;
        }
        Descriptor message = field.getMessageType();
        if (message.getFullName().equals(TIMESTAMP)) {
            return DataTypes.TimestampType;
        }
        if (message.getFullName().equals(DURATION)) {
            return DayTimeIntervalType.apply();
        }
        if (enclosing.contains(message.getFullName())) {
            throw new ProtobufSchemaException("field " + field.getFullName() + " refers back to message "
                    + message.getFullName() + ", which encloses it: a recursive Protobuf message has no Spark type", null);
        }
        enclosing.push(message.getFullName());
        try {
            return struct(message, enclosing);
        } finally {
            enclosing.pop();
        }
    }
}
