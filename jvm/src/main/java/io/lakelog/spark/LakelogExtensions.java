package io.lakelog.spark;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.ExpressionInfo;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.NamedExpression$;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.catalyst.trees.TreeNodeTag;

import scala.Option;
import scala.Tuple3;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.BoxedUnit;

/**
 * {@code spark.sql.extensions=io.lakelog.spark.LakelogExtensions} (sessions lakelog builds have it):
 * typed reads of {@code format("lakelog")}.
 *
 * <p>With {@code valueFormat} / {@code keyFormat}, the Python data source plans the decoding
 * (lakelog/schemas/spark_columns.py: Spark's {@code from_avro} or {@code from_json}, or
 * {@link ProtobufDecode}'s {@code lakelog_from_protobuf}, which these extensions register, per
 * schema id of the subject, read as its latest schema) and hands the Spark SQL expression over in the metadata of its
 * {@code value} / {@code key} field ({@link #DECODE}). A Python data source can only return rows,
 * so this analyzer rule puts the expression on top of the relation: a Project that replaces each
 * such column by its decoded struct under the same name. Batch reads (DataSourceV2Relation) and
 * streaming reads (StreamingRelationV2, which the micro-batch execution later swaps for its scan,
 * keeping the Project) are both leaves carrying the field's metadata in their output.
 */
public class LakelogExtensions implements scala.Function1<SparkSessionExtensions, BoxedUnit> {

    /** The field metadata key holding a column's decoding expression (spark_connector/source.py). */
    public static final String DECODE = "lakelog.decode";

    @Override
    public BoxedUnit apply(SparkSessionExtensions extensions) {
        extensions.injectResolutionRule(TypedColumns::new);
        extensions.injectFunction(new Tuple3<>(
                new FunctionIdentifier(ProtobufDecode.NAME),
                new ExpressionInfo(ProtobufDecode.class.getName(), ProtobufDecode.NAME),
                ProtobufDecode::build));
        return BoxedUnit.UNIT;
    }

    /** Whether {@code session} was built with these extensions (spark.sql.extensions names them). */
    public static boolean active(SparkSession session) {
        String configured = session.sparkContext().getConf().get("spark.sql.extensions", "");
        for (String name : configured.split(",")) {
            if (name.trim().equals(LakelogExtensions.class.getName())) {
                return true;
            }
        }
        return false;
    }

    static final class TypedColumns extends Rule<LogicalPlan> {
        // Set on a relation once its Project is on top: the analyzer runs its rules to a fixed
        // point, and the relation (a leaf) still carries the metadata under the Project.
        private static final TreeNodeTag<Boolean> DECODED = new TreeNodeTag<>("lakelog.decoded");
        private static final scala.collection.immutable.Seq<String> NONE =
                CollectionConverters.asScala(List.<String>of()).toList();
        private final SparkSession session;

        TypedColumns(SparkSession session) {
            this.session = session;
        }

        @Override
        public LogicalPlan apply(LogicalPlan plan) {
            LogicalPlan mapped = plan.children().isEmpty() ? plan : plan.mapChildren(this::apply);
            return mapped.children().isEmpty() ? decoded(mapped) : mapped;
        }

        private LogicalPlan decoded(LogicalPlan leaf) {
            if (leaf.getTagValue(DECODED).isDefined()) {
                return leaf;
            }
            List<Attribute> output = CollectionConverters.asJava(leaf.output());
            if (output.stream().noneMatch(a -> a.metadata().contains(DECODE))) {
                return leaf;
            }
            List<NamedExpression> columns = new ArrayList<>();
            for (Attribute attribute : output) {
                if (!attribute.metadata().contains(DECODE)) {
                    columns.add(attribute);
                    continue;
                }
                Expression decode;
                try {
                    decode = session.sessionState().sqlParser().parseExpression(attribute.metadata().getString(DECODE));
                } catch (org.apache.spark.sql.catalyst.parser.ParseException e) {
                    throw new IllegalStateException("lakelog's decoding of column " + attribute.name()
                            + " does not parse: " + e.getMessage(), e);
                }
                columns.add(new Alias(
                        decode,
                        attribute.name(),
                        NamedExpression$.MODULE$.newExprId(),
                        NONE,
                        Option.empty(),
                        NONE));
            }
            leaf.setTagValue(DECODED, Boolean.TRUE);
            return new Project(CollectionConverters.asScala(columns).toList(), leaf);
        }
    }
}
