package lakelog.frameworks;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.TreeSet;

import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.FencedInstanceIdException;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * A member of a consumer group that reports what it is given and what it reads.
 *
 * <p>Arguments: {@code key=value} pairs. Its own: {@code topics} (comma-separated). Everything
 * else is a consumer setting: {@code bootstrap.servers}, {@code group.id},
 * {@code partition.assignment.strategy} (e.g. CooperativeStickyAssignor's class name),
 * {@code group.instance.id} (static membership), {@code group.protocol} ({@code classic} or
 * {@code consumer}, KIP-848), ... Offsets are committed synchronously after every poll that
 * returned records (auto commit off), and on revocation.
 *
 * <p>Events on stdout: {@code ASSIGNED <tps>}, {@code REVOKED <tps>}, {@code LOST <tps>} (the
 * partitions of that callback, {@code topic-partition} comma-separated, {@code -} for none),
 * {@code R <topic> <partition> <offset>} per record, {@code COMMITTED} after each commit (or
 * {@code COMMIT_FAILED <exception>} when the group moved on: the member goes on polling),
 * {@code FATAL <exception>} (exit 1). It leaves the group and exits 0 when stdin ends or on
 * SIGTERM.
 */
public final class GroupConsumer {
    private GroupConsumer() {
    }

    private static String names(Collection<TopicPartition> partitions) {
        TreeSet<String> sorted = new TreeSet<>();
        for (TopicPartition tp : partitions) {
            sorted.add(tp.topic() + "-" + tp.partition());
        }
        return sorted.isEmpty() ? "-" : String.join(",", sorted);
    }

    /**
     * Commits what was consumed: {@code COMMITTED}, or {@code COMMIT_FAILED <exception>} when the
     * group moved on meanwhile (the member was removed or a rebalance began: what it consumed since
     * its last commit is consumed again by the partitions' next owner, Kafka's at-least-once).
     */
    private static void commit(KafkaConsumer<byte[], byte[]> consumer) {
        try {
            consumer.commitSync();
            Settings.event("COMMITTED");
        } catch (CommitFailedException | RebalanceInProgressException | FencedInstanceIdException lost) {
            Settings.event("COMMIT_FAILED " + Settings.describe(lost));
        }
    }

    public static void main(String[] args) {
        Properties props = Settings.parse("GroupConsumer", args);
        List<String> topics = Arrays.asList(Settings.take(props, "topics", null).split(","));
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.putIfAbsent(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.putIfAbsent(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");

        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props);
        Object done = new Object();
        boolean[] stopping = {false};
        Runnable stop = () -> {
            synchronized (done) {
                stopping[0] = true;
            }
            consumer.wakeup();
        };
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stop.run();
            try {
                main.join(30_000);
            } catch (InterruptedException ignored) {
                Thread.currentThread().interrupt();
            }
        }, "shutdown"));
        Settings.stopWhenStdinEnds(stop);

        int exitCode = 0;
        try {
            consumer.subscribe(topics, new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    if (!partitions.isEmpty()) {
                        commit(consumer);
                    }
                    Settings.event("REVOKED " + names(partitions));
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    Settings.event("ASSIGNED " + names(partitions));
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> partitions) {
                    Settings.event("LOST " + names(partitions));
                }
            });
            while (true) {
                synchronized (done) {
                    if (stopping[0]) {
                        break;
                    }
                }
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    continue;
                }
                List<String> lines = new ArrayList<>(records.count());
                for (ConsumerRecord<byte[], byte[]> record : records) {
                    lines.add("R " + record.topic() + " " + record.partition() + " " + record.offset());
                }
                Settings.event(String.join("\n", lines));
                commit(consumer);
            }
        } catch (WakeupException expected) {
            // stop() while polling or committing
        } catch (Exception fatal) {
            Settings.event("FATAL " + Settings.describe(fatal));
            exitCode = 1;
        } finally {
            try {
                consumer.close(CloseOptions.timeout(Duration.ofSeconds(20)));
            } catch (Exception ignored) {
                // closing after a failure: the failure was reported
            }
        }
        Settings.event("EXIT " + exitCode);
        if (exitCode != 0) {
            System.exit(exitCode);
        }
    }
}
