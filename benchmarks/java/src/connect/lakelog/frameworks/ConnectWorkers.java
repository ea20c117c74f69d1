package lakelog.frameworks;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CancellationException;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.connect.cli.ConnectDistributed;
import org.apache.kafka.connect.runtime.Connect;

/**
 * Kafka Connect workers in distributed mode, several in one JVM (as Kafka's own
 * EmbeddedConnectCluster runs them), each started exactly as {@code connect-distributed.sh} starts
 * one: {@link ConnectDistributed#startConnect}.
 *
 * <p>Arguments: one worker properties file per worker (worker {@code n} is the n-th, from 0).
 * Commands on stdin, one a line: {@code stop <n>} (a clean stop: it leaves the group),
 * {@code start <n>} (again, from its properties). When stdin ends every worker is stopped.
 *
 * <p>Events on stdout: {@code STARTED <n> <rest url>}, {@code STOPPED <n>},
 * {@code FAILED <n> <exception>} (a worker that could not start, or whose herder thread ended;
 * the others go on), {@code FAILED - <why>} when the JVM exits other than by the end of stdin.
 */
public final class ConnectWorkers {
    private ConnectWorkers() {
    }

    private static Map<String, String> load(String path) throws IOException {
        Properties props = new Properties();
        try (Reader reader = Files.newBufferedReader(Paths.get(path), StandardCharsets.UTF_8)) {
            props.load(reader);
        }
        Map<String, String> out = new HashMap<>();
        for (String name : props.stringPropertyNames()) {
            out.put(name, props.getProperty(name));
        }
        return out;
    }

    private static Connect<?> start(String[] files, int n) {
        try {
            Connect<?> connect = new ConnectDistributed().startConnect(load(files[n]));
            Settings.event("STARTED " + n + " " + connect.rest().advertisedUrl());
            return connect;
        } catch (Exception | LinkageError failure) {
            Settings.event("FAILED " + n + " " + Settings.describe(failure));
            return null;
        }
    }

    private static void stop(Connect<?>[] workers, int n) {
        Connect<?> worker;
        synchronized (workers) {
            worker = workers[n];
            workers[n] = null;
        }
        if (worker != null) {
            worker.stop();
            Settings.event("STOPPED " + n);
        }
    }

    /** Reports (once) every running worker whose herder thread ended, with the reason. */
    private static void watchHerders(Connect<?>[] workers) {
        Thread watcher = new Thread(() -> {
            Connect<?>[] reported = new Connect<?>[workers.length];
            while (true) {
                for (int n = 0; n < workers.length; n++) {
                    Connect<?> worker;
                    synchronized (workers) {
                        worker = workers[n];
                    }
                    if (worker == null || worker == reported[n] || !worker.herderTask().isDone()) {
                        continue;
                    }
                    reported[n] = worker;
                    String why = "herder stopped";
                    try {
                        worker.herderTask().get();
                    } catch (ExecutionException failure) {
                        why = Settings.describe(failure.getCause());
                    } catch (InterruptedException | CancellationException ignored) {
                        why = "herder cancelled";
                    }
                    synchronized (workers) {
                        if (workers[n] != worker) {
                            continue; // stopped on purpose meanwhile
                        }
                    }
                    Settings.event("FAILED " + n + " " + why.replace('\n', ' '));
                }
                try {
                    Thread.sleep(500);
                } catch (InterruptedException stopped) {
                    return;
                }
            }
        }, "herder-watcher");
        watcher.setDaemon(true);
        watcher.start();
    }

    private static volatile boolean exiting;

    public static void main(String[] files) throws IOException, InterruptedException {
        // A herder that dies calls Exit.exit (DistributedHerder.run: "Uncaught exception in herder
        // work thread, exiting"), and Connect's own shutdown hook then waits a minute for that very
        // thread: say so at once rather than let the driver wait.
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            if (!exiting) {
                Settings.event("FAILED - the JVM is exiting: a worker called Exit");
            }
        }, "exit-reporter"));
        Connect<?>[] workers = new Connect<?>[files.length];
        Thread[] starting = new Thread[files.length];
        for (int n = 0; n < files.length; n++) {
            int which = n;
            starting[n] = new Thread(() -> {
                Connect<?> started = start(files, which);
                synchronized (workers) {
                    workers[which] = started;
                }
            }, "start-worker-" + n);
            starting[n].start();
        }
        for (Thread thread : starting) {
            thread.join();
        }
        watchHerders(workers);
        BufferedReader commands = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = commands.readLine()) != null) {
            String[] words = line.trim().split("\\s+");
            if (words.length != 2) {
                continue;
            }
            int n = Integer.parseInt(words[1]);
            if (words[0].equals("stop")) {
                stop(workers, n);
            } else if (words[0].equals("start") && workers[n] == null) {
                Connect<?> started = start(files, n);
                synchronized (workers) {
                    workers[n] = started;
                }
            }
        }
        for (int n = 0; n < workers.length; n++) {
            stop(workers, n);
        }
        Settings.event("EXIT 0");
        exiting = true;
        System.exit(0);
    }
}
