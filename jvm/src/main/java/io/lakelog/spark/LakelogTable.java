package io.lakelog.spark;

import java.util.EnumSet;
import java.util.Set;

import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.LogicalWriteInfoImpl;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.execution.datasources.v2.python.PythonMicroBatchStream;
import org.apache.spark.sql.execution.datasources.v2.python.PythonScan;
import org.apache.spark.sql.execution.datasources.v2.python.PythonScanBuilder;
import org.apache.spark.sql.execution.datasources.v2.python.PythonTable;
import org.apache.spark.sql.execution.python.streaming.PythonStreamingSourceRunner;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * Spark's PythonTable (batch reads, both writes unchanged) whose scans make
 * a {@link LakelogMicroBatchStream}. PythonTable.newScanBuilder,
 * PythonScanBuilder.build and PythonScan.toMicroBatchStream each construct
 * the next Python class directly, so each is subclassed to construct ours.
 * Reads and writes get the session's S3A settings as options ({@link StoreOptions}).
 * Batch writes go through {@link LakelogProvider#createRelation} (see there why).
 */
public class LakelogTable extends PythonTable {

    private final PythonDataSourceV2 ds;
    private final String shortName;
    private final StructType schema;

    public LakelogTable(PythonDataSourceV2 ds, String shortName, StructType schema) {
        super(ds, shortName, schema);
        this.ds = ds;
        this.shortName = shortName;
        this.schema = schema;
    }

    /** PythonTable's capabilities without BATCH_WRITE, so that DataFrameWriter.save() takes the V1 path. */
    @Override
    public Set<TableCapability> capabilities() {
        Set<TableCapability> result = EnumSet.noneOf(TableCapability.class);
        result.addAll(super.capabilities());
        result.remove(TableCapability.BATCH_WRITE);
        return result;
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
        return new Builder(ds, shortName, schema, StoreOptions.withS3aSettings(options));
    }

    @Override
    public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
        LogicalWriteInfo withSettings = new LogicalWriteInfoImpl(
                info.queryId(),
                info.schema(),
                StoreOptions.withS3aSettings(info.options()),
                info.rowIdSchema(),
                info.metadataSchema());
        return super.newWriteBuilder(withSettings);
    }

    static final class Builder extends PythonScanBuilder {
        private final PythonDataSourceV2 ds;
        private final String shortName;
        private final StructType schema;
        private final CaseInsensitiveStringMap options;

        Builder(PythonDataSourceV2 ds, String shortName, StructType schema, CaseInsensitiveStringMap options) {
            super(ds, shortName, schema, options);
            this.ds = ds;
            this.shortName = shortName;
            this.schema = schema;
            this.options = options;
        }

        @Override
        public Scan build() {
            // pushedFilters() is PythonScanBuilder's supportedFilters, what its build() passes.
            return new LakelogScan(ds, shortName, schema, options, pushedFilters());
        }
    }

    static final class LakelogScan extends PythonScan {
        private final PythonDataSourceV2 ds;
        private final String shortName;
        private final StructType schema;
        private final CaseInsensitiveStringMap options;

        LakelogScan(
                PythonDataSourceV2 ds,
                String shortName,
                StructType schema,
                CaseInsensitiveStringMap options,
                Filter[] filters) {
            super(ds, shortName, schema, options, filters);
            this.ds = ds;
            this.shortName = shortName;
            this.schema = schema;
            this.options = options;
        }

        @Override
        public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
            // As PythonScan.toMicroBatchStream: one runner (a Python worker holding the
            // stream reader) per stream, its class chosen by the reader's features.
            // LakelogStreamReader supports Trigger.AvailableNow (hence admission control).
            PythonStreamingSourceRunner runner =
                    PythonMicroBatchStream.createPythonStreamingSourceRunner(ds, shortName, schema, options);
            runner.init();
            if (runner.checkSupportedFeatures().triggerAvailableNow()) {
                return new LakelogMicroBatchStream(ds, shortName, schema, options, runner);
            }
            runner.stop();
            return super.toMicroBatchStream(checkpointLocation);
        }
    }
}
