package io.lakelog.spark;

import java.util.HashMap;
import java.util.Map;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SQLContext;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.sources.BaseRelation;
import org.apache.spark.sql.sources.CreatableRelationProvider;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import scala.jdk.javaapi.CollectionConverters;

/**
 * {@code format("lakelog")} when lakelog-jvm.jar is on the classpath: the
 * Python data source (spark_connector, registered by
 * {@code spark_connector.register} under {@link #PYTHON_SOURCE}) does all the
 * work; this provider exists only so that the streaming source can implement
 * {@code ReportsSourceMetrics}, which Spark 4.2's Python Data Source streams
 * (PythonMicroBatchStream.scala) do not, and report the Kafka source's
 * min/max/avgOffsetsBehindLatest in the query progress. It also passes the
 * session's S3A settings to the Python side ({@link StoreOptions}).
 *
 * <p>Why a second name: DataSourceRegistration.checkDataSourceExists refuses
 * to register a Python data source under a name a JVM DataSourceRegister
 * already serves (DATA_SOURCE_ALREADY_EXISTS), and DataSource.lookupDataSource
 * fails with both (foundMultipleDataSources). So the JVM owns "lakelog" and
 * delegates to the Python source registered as "lakelog_python".
 *
 * <p>Why composition and not a subclass of PythonDataSourceV2:
 * DataSource.lookupDataSourceV2 and DataStreamWriter call
 * {@code setShortName(format)} on every PythonDataSourceV2 they get, and
 * that name is sent to the Python worker, which must find it equal to
 * {@code DataSource.name()} (pyspark/sql/worker/create_data_source.py). The
 * wrapped PythonDataSourceV2 is named "lakelog_python" here instead, and
 * Spark sees an ordinary TableProvider.
 *
 * <p>Batch writes take the path of Spark's Kafka sink (KafkaSourceProvider
 * .createRelation): DataFrameWriter.save() refuses every save mode but Append
 * and Overwrite for a table that supports BATCH_WRITE, so {@link LakelogTable}
 * does not, and DataFrameWriter falls back to this provider as a
 * CreatableRelationProvider, which appends for Append and ErrorIfExists (the
 * default mode) and refuses Overwrite and Ignore. The append itself is the
 * Python data source's, run as {@code format("lakelog_python")}.
 *
 * <p>Whether a read is batch or streaming reaches the Python source at
 * {@code load()} as the option {@link #QUERY_KIND} (spark_connector/options.py),
 * so batch- or streaming-only options fail there rather than at query start.
 *
 * <p>Built on Spark-internal classes (org.apache.spark.sql.execution.datasources
 * .v2.python) of PySpark 4.2.0, pinned in pyproject.toml; jvm/build_jar.py compiles
 * against the installed PySpark's jars, so a changed constructor fails the build.
 */
public class LakelogProvider implements TableProvider, DataSourceRegister, CreatableRelationProvider {

    public static final String SHORT_NAME = "lakelog";
    /** The name spark_connector.register gives the Python data source (spark_connector/__init__.py). */
    public static final String PYTHON_SOURCE = "lakelog_python";
    /** The internal option telling the Python source a read's kind (options.QUERY_KIND_OPTION). */
    public static final String QUERY_KIND = "lakelog.internal.querykind";

    private static final String STREAM_READER = "org.apache.spark.sql.classic.DataStreamReader";
    private static final String BATCH_READER = "org.apache.spark.sql.classic.DataFrameReader";

    // ServiceLoader instantiates every DataSourceRegister on each format lookup:
    // nothing is done before the provider is used.
    private PythonDataSourceV2 python;

    @Override
    public String shortName() {
        return SHORT_NAME;
    }

    private PythonDataSourceV2 python() {
        if (python == null) {
            if (!SparkSession.active().sessionState().dataSourceManager().dataSourceExists(PYTHON_SOURCE)) {
                throw new IllegalStateException(
                        "format(\"lakelog\") needs the Python data source: call spark_connector.register(spark) "
                                + "once in this SparkSession (sessions lakelog builds do)");
            }
            PythonDataSourceV2 source = new PythonDataSourceV2();
            source.setShortName(PYTHON_SOURCE);
            python = source;
        }
        return python;
    }

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        // The Python data source is created once, with the first options it gets
        // (PythonDataSourceV2.getOrCreateDataSourceInPython): these must be complete.
        StructType schema = python().inferSchema(withQueryKind(StoreOptions.withS3aSettings(options)));
        for (StructField field : schema.fields()) {
            if (field.metadata().contains(LakelogExtensions.DECODE) && !LakelogExtensions.active(SparkSession.active())) {
                throw new IllegalStateException("option " + field.name() + "Format of format(\"lakelog\") needs "
                        + "spark.sql.extensions to include " + LakelogExtensions.class.getName()
                        + " (and spark-avro on spark.jars); sessions lakelog builds have both");
            }
        }
        return schema;
    }

    /**
     * {@code options} plus {@link #QUERY_KIND}: "streaming" when called from
     * DataStreamReader.load(), "batch" from DataFrameReader.load(), neither
     * otherwise (the Python side then checks what applies to both).
     * DataSourceV2 gives inferSchema no other sign of the read's kind.
     */
    static CaseInsensitiveStringMap withQueryKind(CaseInsensitiveStringMap options) {
        String kind = StackWalker.getInstance().walk(frames -> frames
                .map(StackWalker.StackFrame::getClassName)
                .map(name -> STREAM_READER.equals(name) ? "streaming" : BATCH_READER.equals(name) ? "batch" : null)
                .filter(k -> k != null)
                .findFirst()
                .orElse(null));
        Map<String, String> merged = new HashMap<>(options.asCaseSensitiveMap());
        merged.keySet().removeIf(key -> key.equalsIgnoreCase(QUERY_KIND));
        if (kind != null) {
            merged.put(QUERY_KIND, kind);
        }
        return new CaseInsensitiveStringMap(merged);
    }

    /**
     * {@code df.write.format("lakelog").save()}: append in the default mode
     * (ErrorIfExists) and Append, as Spark's Kafka sink; Overwrite and Ignore
     * are refused. The rows are written by the Python data source's batch
     * writer ({@code format("lakelog_python")}) with the session's S3A settings.
     */
    @Override
    public BaseRelation createRelation(
            SQLContext sqlContext,
            SaveMode mode,
            scala.collection.immutable.Map<String, String> parameters,
            Dataset<Row> data) {
        if (mode == SaveMode.Overwrite || mode == SaveMode.Ignore) {
            throw new IllegalArgumentException("format(\"lakelog\") cannot write in save mode " + mode
                    + ": topics are append-only; the save modes are Append and ErrorIfExists (the default), "
                    + "as for Spark's Kafka sink");
        }
        python(); // fails with the hint when the Python data source is not registered
        CaseInsensitiveStringMap options =
                StoreOptions.withS3aSettings(new CaseInsensitiveStringMap(CollectionConverters.asJava(parameters)));
        data.write().format(PYTHON_SOURCE).mode(SaveMode.Append).options(options.asCaseSensitiveMap()).save();
        StructType schema = data.schema();
        return new BaseRelation() {
            @Override
            public SQLContext sqlContext() {
                return sqlContext;
            }

            @Override
            public StructType schema() {
                return schema;
            }
        };
    }

    @Override
    public Transform[] inferPartitioning(CaseInsensitiveStringMap options) {
        return python().inferPartitioning(options);
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        return new LakelogTable(python(), PYTHON_SOURCE, schema);
    }

    @Override
    public boolean supportsExternalMetadata() {
        return true;
    }
}
