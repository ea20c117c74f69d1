package lakelog.frameworks;

import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * Kafka Streams' word count: lines (String values) from {@code input} are split into lower-case
 * words, re-keyed by word (a repartition topic, {@code <application.id>-words-repartition}),
 * counted in a state store {@code counts} (changelog {@code <application.id>-counts-changelog},
 * compacted) and every new count goes to {@code output} (String key, Long value).
 *
 * <p>Arguments: {@code key=value} pairs. Its own: {@code input}, {@code output}. Everything else
 * is a Streams setting ({@code bootstrap.servers}, {@code application.id},
 * {@code processing.guarantee}, {@code state.dir}, ...).
 *
 * <p>Events on stdout: {@code STATE <new> <old>} on every state change, {@code TASKS <ids>}
 * (active tasks of this instance) whenever it becomes RUNNING, {@code FATAL <exception>} when a
 * stream thread dies (the client then shuts down and the program exits 1). It stops cleanly
 * (exit 0) on SIGTERM or when stdin ends.
 */
public final class WordCount {
    private WordCount() {
    }

    public static void main(String[] args) throws InterruptedException {
        Properties props = Settings.parse("WordCount", args);
        String input = Settings.take(props, "input", null);
        String output = Settings.take(props, "output", null);
        props.putIfAbsent(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        props.putIfAbsent(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
                .filter((key, word) -> !word.isEmpty())
                .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
                .count(Materialized.as("counts"))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch stopped = new CountDownLatch(1);
        int[] exitCode = {0};
        streams.setStateListener((now, before) -> {
            Settings.event("STATE " + now + " " + before);
            if (now == KafkaStreams.State.RUNNING) {
                TreeSet<String> tasks = new TreeSet<>();
                for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
                    for (TaskMetadata task : thread.activeTasks()) {
                        tasks.add(task.taskId().toString());
                    }
                }
                Settings.event("TASKS " + String.join(",", tasks));
            }
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                stopped.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(exception -> {
            Settings.event("FATAL " + Settings.describe(exception));
            exitCode[0] = 1;
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runnable close = () -> {
            streams.close(Duration.ofSeconds(30));
            stopped.countDown();
        };
        Runtime.getRuntime().addShutdownHook(new Thread(close, "shutdown"));
        Settings.stopWhenStdinEnds(close);
        streams.start();
        stopped.await();
        streams.close(Duration.ofSeconds(30));
        Settings.event("EXIT " + exitCode[0]);
        System.exit(exitCode[0]);
    }
}
