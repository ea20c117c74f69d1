package lakelog.frameworks;

import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Properties;

/**
 * What every program here shares: its settings come as {@code key=value} arguments (passed on to
 * the Kafka client as they are, apart from the program's own keys), and it reports on stdout, one
 * event per line ({@code EVENT word...}), so that the Python side can follow it without parsing logs.
 */
final class Settings {
    private Settings() {
    }

    /** {@code key=value} arguments as properties; anything else is a usage error (exit 2). */
    static Properties parse(String program, String[] args) {
        Properties props = new Properties();
        for (String arg : args) {
            int eq = arg.indexOf('=');
            if (eq <= 0) {
                System.err.println(program + ": expected key=value, got " + arg);
                System.exit(2);
            }
            props.setProperty(arg.substring(0, eq), arg.substring(eq + 1));
        }
        return props;
    }

    /** Removes and returns one of the program's own keys (not a client setting). */
    static String take(Properties props, String key, String fallback) {
        Object value = props.remove(key);
        if (value == null) {
            if (fallback == null) {
                System.err.println("missing setting " + key);
                System.exit(2);
            }
            return fallback;
        }
        return value.toString();
    }

    private static final PrintStream OUT = new PrintStream(System.out, true, StandardCharsets.UTF_8);

    /** One event line on stdout, flushed at once. */
    static synchronized void event(String line) {
        OUT.println(line);
    }

    /**
     * A failure on one line with every cause under it ({@code X: why; caused by Y: why}): the
     * outermost exception alone often says only that something failed (Connect's "Unable to
     * initialize REST server" wraps the BindException that says which port).
     */
    static String describe(Throwable failure) {
        StringBuilder line = new StringBuilder(String.valueOf(failure));
        java.util.Set<Throwable> seen = new java.util.HashSet<>();
        seen.add(failure);
        for (Throwable cause = failure == null ? null : failure.getCause(); cause != null && seen.add(cause);
                cause = cause.getCause()) {
            line.append("; caused by ").append(cause);
        }
        return line.toString().replace('\n', ' ');
    }

    /**
     * Runs {@code stop} once stdin ends (the test closes it, or dies): the programs stop cleanly
     * when their driver goes away rather than outliving it.
     */
    static void stopWhenStdinEnds(Runnable stop) {
        Thread watcher = new Thread(() -> {
            try {
                InputStream in = System.in;
                while (in.read() >= 0) {
                    // commands are read by programs that take them; here only the end matters
                }
            } catch (IOException ignored) {
                // a closed stdin is the same as its end
            }
            stop.run();
        }, "stdin-watcher");
        watcher.setDaemon(true);
        watcher.start();
    }
}
