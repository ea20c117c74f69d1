package io.lakelog.spark;

import java.util.Map;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

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
 * <p>Built on Spark-internal classes (org.apache.spark.sql.execution.datasources
 * .v2.python) of PySpark 4.2.0, pinned in pyproject.toml; jvm/build.sh compiles
 * against the installed PySpark's jars, so a changed constructor fails the build.
 */
public class LakelogProvider implements TableProvider, DataSourceRegister {

    public static final String SHORT_NAME = "lakelog";
    /** The name spark_connector.register gives the Python data source (spark_connector/__init__.py). */
    public static final String PYTHON_SOURCE = "lakelog_python";

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
        return python().inferSchema(StoreOptions.withS3aSettings(options));
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
