package io.lakelog.spark;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

import com.google.protobuf.DescriptorProtos.FileDescriptorProto;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.DynamicMessage;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.UninitializedMessageException;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenFallback;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.catalyst.util.MapData;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;

import scala.collection.immutable.IndexedSeq;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * {@code lakelog_from_protobuf(data, partition, offset, options)}: the Protobuf data of one schema id
 * of a subject (Confluent's wire format after its 5-byte header: the message indexes, then the
 * message) as a struct of the subject's latest message ({@link ProtobufTypes}); the decoding of
 * typed reads of Protobuf topics (lakelog/schemas/spark_columns.py writes the call, one per
 * schema id). Spark's own from_protobuf is the spark-protobuf module, which this project's Maven
 * repository does not serve; this is the same decoding with protobuf-java's DynamicMessage.
 *
 * <p>Schema evolution is Protobuf's own: the data is parsed with the latest schema's descriptor
 * of the message its indexes name in the writer's file (fields match by number: a field the
 * writer lacked is unset, one the reader dropped is skipped, wire-compatible scalar changes read
 * as the reader's type). So every schema id reads as the latest schema's struct.
 *
 * <p>{@code options} (a literal map): {@code topic}, {@code column}, {@code schemaId} (for the
 * error naming the record), {@code writerFile} (the writer schema's main file, a base64
 * FileDescriptorProto: it names the message of the indexes), {@code readerFiles} (the latest
 * schema and what it imports, a base64 FileDescriptorSet), {@code message} (the full name of the
 * message read), {@code mode}: FAILFAST fails the query on data that does not decode, naming
 * topic, partition, offset and schema id; PERMISSIVE reads it as null.
 */
public final class ProtobufDecode extends Expression implements CodegenFallback, java.io.Serializable {
    public static final String NAME = "lakelog_from_protobuf";
    private static final long serialVersionUID = 1L;

    private final Expression data;
    private final Expression partition;
    private final Expression offset;
    private final HashMap<String, String> options;
    private final StructType type;
    private transient Descriptor reader;
    private transient FileDescriptorProto writer;
    private transient ProtobufRows rows;

    ProtobufDecode(Expression data, Expression partition, Expression offset, Map<String, String> options) {
        this.data = data;
        this.partition = partition;
        this.offset = offset;
        this.options = new HashMap<>(options);
        for (String key : List.of("topic", "column", "schemaId", "writerFile", "readerFiles", "message", "mode")) {
            if (!options.containsKey(key)) {
                throw new IllegalArgumentException(NAME + " needs option " + key);
            }
        }
        this.type = ProtobufTypes.struct(reader());
    }

    /** A copy over other children (the analyzer's and optimizer's rewrites): the type as it was. */
    private ProtobufDecode(ProtobufDecode of, Expression data, Expression partition, Expression offset) {
        this.data = data;
        this.partition = partition;
        this.offset = offset;
        this.options = of.options;
        this.type = of.type;
        this.reader = of.reader;
        this.writer = of.writer;
    }

    /** The function builder {@link LakelogExtensions} registers under {@link #NAME}. */
    static Expression build(Seq<Expression> arguments) {
        List<Expression> args = CollectionConverters.asJava(arguments);
        if (args.size() != 4 || !args.get(3).foldable()) {
            throw new IllegalArgumentException(NAME + "(data, partition, offset, map(option, value, ...)) takes "
                    + "four arguments, the last a literal map");
        }
        MapData map = (MapData) args.get(3).eval(null);
        Map<String, String> options = new HashMap<>();
        for (int i = 0; i < map.numElements(); i++) {
            options.put(map.keyArray().getUTF8String(i).toString(), map.valueArray().getUTF8String(i).toString());
        }
        return new ProtobufDecode(args.get(0), args.get(1), args.get(2), options);
    }

    private Descriptor reader() {
        if (reader == null) {
            reader = ProtobufTypes.message(options.get("readerFiles"), options.get("message"));
        }
        return reader;
    }

    private FileDescriptorProto writer() {
        if (writer == null) {
            writer = ProtobufTypes.file(options.get("writerFile"));
        }
        return writer;
    }

    @Override
    public Object eval(InternalRow input) {
        byte[] bytes = (byte[]) data.eval(input);
        if (bytes == null) {
            return null;
        }
        try {
            if (rows == null) {
                rows = new ProtobufRows();
            }
            return rows.row(decode(bytes));
        } catch (InvalidProtocolBufferException | UninitializedMessageException | MalformedException e) {
            if (options.get("mode").equals("PERMISSIVE")) {
                return null;
            }
            throw new IllegalStateException("lakelog typed read: the " + options.get("column") + " of topic '"
                    + options.get("topic") + "' partition " + partition.eval(input) + " offset " + offset.eval(input)
                    + " (schema id " + options.get("schemaId") + ") does not decode as Protobuf message "
                    + options.get("message") + ": " + e.getMessage()
                    + " (option mode=PERMISSIVE reads it as null)", e);
        }
    }

    private DynamicMessage decode(byte[] bytes) throws InvalidProtocolBufferException, MalformedException {
        // Confluent's message indexes: a zigzag varint count, then that many zigzag varint indexes
        // into the file's messages and their nested ones; a count of 0 (the single byte 0) names the
        // first message (io.confluent.kafka.serializers.protobuf.MessageIndexes).
        int[] at = {0};
        int count = zigzag(bytes, at);
        if (count < 0 || count > bytes.length) {
            throw new MalformedException("its message indexes do not parse");
        }
        int[] indexes = count == 0 ? new int[] {0} : new int[count];
        for (int i = 0; i < count; i++) {
            indexes[i] = zigzag(bytes, at);
        }
        String name = ProtobufTypes.messageName(writer(), indexes);
        if (name == null) {
            throw new MalformedException("its message indexes " + java.util.Arrays.toString(indexes)
                    + " name no message of the schema");
        }
        if (!name.equals(reader().getFullName())) {
            throw new MalformedException("it holds message " + name + ", not the subject's " + reader().getFullName());
        }
        return DynamicMessage.newBuilder(reader()).mergeFrom(bytes, at[0], bytes.length - at[0]).build();
    }

    private static int zigzag(byte[] bytes, int[] at) throws MalformedException {
        long result = 0;
        for (int shift = 0; shift < 35; shift += 7) {
            if (at[0] >= bytes.length) {
                throw new MalformedException("its message indexes end early");
            }
            byte b = bytes[at[0]++];
            result |= (long) (b & 0x7F) << shift;
            if ((b & 0x80) == 0) {
                return (int) ((result >>> 1) ^ -(result & 1));
            }
        }
        throw new MalformedException("its message indexes do not parse");
    }

    /** Data in the wire format's framing that names no message of the subject. */
    private static final class MalformedException extends Exception {
        MalformedException(String message) {
            super(message);
        }
    }

    @Override
    public DataType dataType() {
        return type;
    }

    @Override
    public boolean nullable() {
        return true;
    }

    @Override
    public ExprCode doGenCode(CodegenContext ctx, ExprCode ev) {
        return CodegenFallback.super.doGenCode(ctx, ev);
    }

    @Override
    public Seq<Expression> children() {
        return CollectionConverters.asScala(List.of(data, partition, offset)).toList();
    }

    @Override
    public Expression withNewChildrenInternal(IndexedSeq<Expression> children) {
        return new ProtobufDecode(this, children.apply(0), children.apply(1), children.apply(2));
    }

    @Override
    public String prettyName() {
        return NAME;
    }

    @Override
    public String toString() {
        // The descriptors are long base64 text: the plan shows what is read, not them.
        return NAME + "(" + data + ", " + options.get("message") + ", schema id " + options.get("schemaId") + ")";
    }

    @Override
    public String sql() {
        return NAME + "(" + data.sql() + ", '" + options.get("message") + "')";
    }

    @Override
    public int productArity() {
        return 4;
    }

    @Override
    public Object productElement(int n) {
        switch (n) {
            case 0:
                return data;
            case 1:
                return partition;
            case 2:
                return offset;
            case 3:
                return options;
            default:
                throw new IndexOutOfBoundsException(n);
        }
    }

    @Override
    public boolean canEqual(Object other) {
        return other instanceof ProtobufDecode;
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof ProtobufDecode that && data.equals(that.data) && partition.equals(that.partition)
                && offset.equals(that.offset) && options.equals(that.options);
    }

    @Override
    public int hashCode() {
        return Objects.hash(data, partition, offset, options);
    }
}
