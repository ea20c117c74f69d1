package io.lakelog.spark;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The session's S3A settings for a store, added to the options the Python
 * data source receives.
 *
 * <p>lakelog's Python side reads and commits S3 objects itself (pyarrow over
 * s3fs, botocore), in Spark's Python workers, which see neither the session's
 * Hadoop configuration nor, on a cluster, the driver's environment. A
 * session configured only with {@code spark.hadoop.fs.s3a.*} would leave
 * them without endpoint or credentials. The provider runs in the driver's
 * JVM, where that configuration is, and passes the settings on as
 * {@code fs.s3a.*} options -- the form Delta's DataFrameReader/Writer accept
 * for a table's storage (spark_connector/options.py reads them).
 *
 * <p>Options the query gives itself win. Secrets travel like any option: the
 * keys match Spark's default {@code spark.redaction.regex}
 * ({@code secret|password|token|access[.]?key}), so plans and the UI show
 * them redacted.
 */
final class StoreOptions {

    private static final Set<String> S3_SCHEMES = Set.of("s3", "s3a", "s3n");
    // What spark_connector/options.py → engine.storage.object_store.settings_from_hadoop reads.
    private static final String[] SETTINGS = {
        "endpoint", "endpoint.region", "path.style.access", "connection.ssl.enabled",
    };
    private static final String[] SECRETS = {"access.key", "secret.key", "session.token"};

    private StoreOptions() {}

    static CaseInsensitiveStringMap withS3aSettings(CaseInsensitiveStringMap options) {
        String bucket = s3Bucket(options.get("path"));
        if (bucket == null) {
            return options;
        }
        Configuration conf = SparkSession.active().sessionState().newHadoopConf();
        Map<String, String> added = new HashMap<>();
        for (String prefix : new String[] {"fs.s3a.bucket." + bucket + ".", "fs.s3a."}) {
            for (String suffix : SETTINGS) {
                put(added, options, prefix + suffix, conf.get(prefix + suffix));
            }
            for (String suffix : SECRETS) {
                put(added, options, prefix + suffix, password(conf, prefix + suffix));
            }
        }
        if (added.isEmpty()) {
            return options;
        }
        Map<String, String> merged = new HashMap<>(options.asCaseSensitiveMap());
        merged.putAll(added);
        return new CaseInsensitiveStringMap(merged);
    }

    private static void put(Map<String, String> added, CaseInsensitiveStringMap given, String key, String value) {
        if (value != null && !value.isBlank() && !given.containsKey(key)) {
            added.put(key, value.trim());
        }
    }

    /** As S3A reads secrets: Hadoop credential providers first, then the plain setting. */
    private static String password(Configuration conf, String key) {
        try {
            char[] value = conf.getPassword(key);
            return value == null ? null : new String(value);
        } catch (IOException e) {
            throw new IllegalStateException("reading " + key + " from the Hadoop credential providers: " + e, e);
        }
    }

    private static String s3Bucket(String path) {
        if (path == null) {
            return null;
        }
        try {
            URI uri = new URI(path.trim());
            String scheme = uri.getScheme();
            if (scheme == null || !S3_SCHEMES.contains(scheme.toLowerCase(Locale.ROOT)) || uri.getAuthority() == null) {
                return null;
            }
            return uri.getAuthority().toLowerCase(Locale.ROOT);
        } catch (URISyntaxException e) {
            return null; // not a URI: a local path, or an error the Python side names
        }
    }
}
