package io.lakelog.udf;

import org.apache.spark.sql.api.java.UDF2;

/**
 * Kafka's default partitioner as a Spark SQL function:
 * {@code (murmur2(key) & 0x7fffffff) % partitions}, bit for bit what
 * org.apache.kafka.common.utils.Utils.murmur2 and toPositive compute in
 * Kafka's Java client (BuiltInPartitioner.partitionForKey). Null key or null
 * partition count gives null.
 */
public class KafkaPartition implements UDF2<byte[], Integer, Integer> {

    public static int murmur2(final byte[] data) {
        int length = data.length;
        int seed = 0x9747b28c;
        final int m = 0x5bd1e995;
        final int r = 24;
        int h = seed ^ length;
        int length4 = length / 4;
        for (int i = 0; i < length4; i++) {
            final int i4 = i * 4;
            int k = (data[i4] & 0xff) + ((data[i4 + 1] & 0xff) << 8)
                    + ((data[i4 + 2] & 0xff) << 16) + ((data[i4 + 3] & 0xff) << 24);
            k *= m;
            k ^= k >>> r;
            k *= m;
            h *= m;
            h ^= k;
        }
        switch (length % 4) {
            case 3:
                h ^= (data[(length & ~3) + 2] & 0xff) << 16;
            case 2:
                h ^= (data[(length & ~3) + 1] & 0xff) << 8;
            case 1:
                h ^= data[length & ~3] & 0xff;
                h *= m;
        }
        h ^= h >>> 13;
        h *= m;
        h ^= h >>> 15;
        return h;
    }

    @Override
    public Integer call(byte[] key, Integer partitions) {
        if (key == null || partitions == null || partitions <= 0) {
            return null;
        }
        return (murmur2(key) & 0x7fffffff) % partitions;
    }
}
