package io.lakelog.spark;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReportsSourceMetrics;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.execution.datasources.v2.python.PythonMicroBatchStreamWithTriggerAvailableNow;
import org.apache.spark.sql.execution.python.streaming.PythonStreamingSourceRunner;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * Spark's stream over the lakelog Python stream reader, plus the Kafka
 * source's progress metrics. Everything else (offsets, planning, reading,
 * commits, Trigger.AvailableNow) is PythonMicroBatchStreamWithTriggerAvailableNow's.
 *
 * <p>ProgressContext.extractSourceProgress (Spark 4.2,
 * sql/core/.../streaming/runtime/ProgressReporter.scala) calls
 * {@code metrics(end offset of the batch)} on a source that is a
 * ReportsSourceMetrics. As KafkaMicroBatchStream.metrics
 * (connector/kafka-0-10-sql/.../KafkaMicroBatchStream.scala) the figures are
 * latest available offset minus consumed offset per partition, against the
 * latest offsets the source fetched for the trigger: here the ones
 * LakelogStreamReader.reportLatestOffset returns (the log end before any rate
 * limit), which MicroBatchExecution asks for right after latestOffset.
 */
public class LakelogMicroBatchStream extends PythonMicroBatchStreamWithTriggerAvailableNow
        implements ReportsSourceMetrics {

    private static final ObjectMapper JSON = new ObjectMapper();

    private final String description;
    private volatile String latestAvailable;

    public LakelogMicroBatchStream(
            PythonDataSourceV2 ds,
            String shortName,
            StructType schema,
            CaseInsensitiveStringMap options,
            PythonStreamingSourceRunner runner) {
        super(ds, shortName, schema, options, runner);
        this.description = describe(options);
    }

    @Override
    public Offset reportLatestOffset() {
        Offset latest = super.reportLatestOffset();
        latestAvailable = latest == null ? null : latest.json();
        return latest;
    }

    @Override
    public Map<String, String> metrics(Optional<Offset> latestConsumedOffset) {
        String latest = latestAvailable;
        if (latestConsumedOffset.isEmpty() || latest == null) {
            return Collections.emptyMap();
        }
        return offsetsBehindLatest(latestConsumedOffset.get().json(), latest);
    }

    /**
     * min/max/avgOffsetsBehindLatest of two {@code {"topic": {"partition": offset}}}
     * offsets, as strings like KafkaMicroBatchStream.metrics (Long and Double
     * toString). A partition the consumed offset lacks (new since) counts from
     * offset 0; empty when there is no partition.
     */
    public static Map<String, String> offsetsBehindLatest(String consumedJson, String latestJson) {
        Map<String, Long> consumed = partitionOffsets(consumedJson);
        Map<String, Long> latest = partitionOffsets(latestJson);
        if (latest.isEmpty()) {
            return Collections.emptyMap();
        }
        List<Long> behind = new ArrayList<>(latest.size());
        for (Map.Entry<String, Long> e : latest.entrySet()) {
            behind.add(Math.max(0L, e.getValue() - consumed.getOrDefault(e.getKey(), 0L)));
        }
        long min = Long.MAX_VALUE;
        long max = Long.MIN_VALUE;
        long sum = 0;
        for (long b : behind) {
            min = Math.min(min, b);
            max = Math.max(max, b);
            sum += b;
        }
        Map<String, String> result = new LinkedHashMap<>();
        result.put("minOffsetsBehindLatest", Long.toString(min));
        result.put("maxOffsetsBehindLatest", Long.toString(max));
        result.put("avgOffsetsBehindLatest", Double.toString((double) sum / behind.size()));
        return result;
    }

    private static Map<String, Long> partitionOffsets(String json) {
        JsonNode root;
        try {
            root = JSON.readTree(json);
        } catch (JsonProcessingException e) {
            throw new IllegalArgumentException("not a lakelog offset: " + json, e);
        }
        Map<String, Long> result = new HashMap<>();
        for (Map.Entry<String, JsonNode> topic : root.properties()) {
            for (Map.Entry<String, JsonNode> p : topic.getValue().properties()) {
                // The key cannot be ambiguous: a topic name has no NUL.
                result.put(topic.getKey() + '\0' + p.getKey(), p.getValue().asLong());
            }
        }
        return result;
    }

    private static String describe(CaseInsensitiveStringMap options) {
        for (String key : new String[] {"subscribe", "subscribePattern", "assign"}) {
            if (options.containsKey(key)) {
                return "lakelog[" + key + "=" + options.get(key) + "]";
            }
        }
        return "lakelog";
    }

    /** The source's description in the query progress, like KafkaV2[Subscribe[t]]. */
    @Override
    public String toString() {
        return description;
    }
}
