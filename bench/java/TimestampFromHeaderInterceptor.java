/*
 * A Kafka producer interceptor for the benchmark of Spark's built-in Kafka sink (bench/spark_jvm_sink.py).
 *
 * Spark's sink builds ProducerRecord(topic, partition, key, value, headers): it has no timestamp column
 * (SPARK-50160 proposed one; it was closed unmerged), so every copied record gets the producer's wall clock.
 * The copy therefore carries the source timestamp in one extra header, appended last, and this interceptor
 * moves it back into the record:
 *
 *   - the LAST header named HEADER (8 bytes, big-endian signed epoch milliseconds) is removed, and only
 *     that occurrence: earlier headers of the same name (a source record may carry one), the order of the
 *     other headers, their duplicates and their null values stay as they are;
 *   - the record is rebuilt with the same topic, partition, key and value, the remaining headers and that
 *     timestamp (CreateTime; a negative value, Kafka's "no timestamp", leaves the timestamp to the producer);
 *   - a record without the header is returned unchanged.
 *
 * A malformed header (not 8 bytes) is an IllegalArgumentException; the Kafka client logs it (WARN) and sends
 * the record as it came, header included, which the benchmark's fidelity check then reports.
 *
 * Compiled at run time against the kafka-clients jar Spark resolved (never a committed jar).
 */
package transcoder.bench;

import java.nio.ByteBuffer;
import java.util.Map;

import org.apache.kafka.clients.producer.ProducerInterceptor;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;

public final class TimestampFromHeaderInterceptor implements ProducerInterceptor<byte[], byte[]> {

    /** The header the copy appends; bench/spark_jvm_sink.py TIMESTAMP_HEADER names the same. */
    public static final String HEADER = "__transcoder.timestamp";

    @Override
    public ProducerRecord<byte[], byte[]> onSend(ProducerRecord<byte[], byte[]> record) {
        Header[] all = record.headers().toArray();
        int at = -1;
        for (int i = all.length - 1; i >= 0; i--) {
            if (HEADER.equals(all[i].key())) {
                at = i;
                break;
            }
        }
        if (at < 0) {
            return record;
        }
        Long timestamp = decode(all[at].value());
        Header[] rest = new Header[all.length - 1];
        System.arraycopy(all, 0, rest, 0, at);
        System.arraycopy(all, at + 1, rest, at, all.length - at - 1);
        return new ProducerRecord<>(record.topic(), record.partition(), timestamp, record.key(), record.value(),
                                    new RecordHeaders(rest));
    }

    /** Epoch milliseconds from 8 big-endian bytes; null (the producer's clock) for a negative value. */
    static Long decode(byte[] value) {
        if (value == null || value.length != Long.BYTES) {
            throw new IllegalArgumentException("header " + HEADER + " must hold 8 bytes (big-endian epoch ms), not "
                                               + (value == null ? "null" : value.length + " bytes"));
        }
        long ms = ByteBuffer.wrap(value).getLong();
        return ms < 0 ? null : ms;
    }

    @Override
    public void onAcknowledgement(RecordMetadata metadata, Exception exception) {
    }

    @Override
    public void close() {
    }

    @Override
    public void configure(Map<String, ?> configs) {
    }
}
