import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.serialization.SimpleStringSchema;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.sink.TransactionNamingStrategy;
import org.apache.flink.connector.kafka.lineage.DefaultKafkaDatasetFacet;
import org.apache.flink.connector.kafka.lineage.DefaultKafkaDatasetIdentifier;
import org.apache.flink.connector.kafka.lineage.KafkaDatasetFacet;
import org.apache.flink.connector.kafka.lineage.KafkaDatasetFacetProvider;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.consumer.OffsetResetStrategy;
import org.apache.kafka.clients.producer.ProducerRecord;

/**
 * The flink compat scenario's job (compat/cmd/compat/client_flink.go): a
 * Flink 2.2 MiniCluster in this JVM reads IN with KafkaSource (each record's
 * value a word), keeps a running count per word in keyed state and writes
 * "word -> count" (key the word, value the count in decimal) to OUT with
 * KafkaSink, checkpointing every CHECKPOINT_MS milliseconds to CKDIR
 * (retained when the job is cancelled or the JVM killed).
 *
 * <pre>
 * java FlinkCount BROKER IN OUT GROUP CKDIR GUARANTEE CHECKPOINT_MS [RESTORE [TXN_PREFIX [NAMING]]]
 * </pre>
 *
 * GUARANTEE is at_least_once or exactly_once (KafkaSink's DeliveryGuarantee);
 * RESTORE ("" for none) is a retained checkpoint (.../chk-N) the job starts
 * from (execution.state-recovery.path); TXN_PREFIX is KafkaSink's
 * transactionalIdPrefix with exactly_once; NAMING its
 * TransactionNamingStrategy (INCREMENTING, Flink's default, or POOLING).
 */
public class FlinkCount {
    public static void main(String[] args) throws Exception {
        String broker = args[0], in = args[1], out = args[2], group = args[3], ckDir = args[4];
        DeliveryGuarantee guarantee = DeliveryGuarantee.valueOf(args[5].toUpperCase());
        long checkpointMs = Long.parseLong(args[6]);
        String restore = args.length > 7 ? args[7] : "";
        String prefix = args.length > 8 ? args[8] : group;
        String naming = args.length > 9 ? args[9] : "INCREMENTING";

        Map<String, String> conf = new HashMap<>();
        conf.put("execution.checkpointing.interval", checkpointMs + " ms");
        conf.put("execution.checkpointing.mode", "EXACTLY_ONCE");
        conf.put("execution.checkpointing.storage", "filesystem");
        conf.put("execution.checkpointing.dir", "file://" + ckDir);
        conf.put("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION");
        conf.put("execution.checkpointing.num-retained", "2");
        conf.put("state.backend.type", "hashmap");
        // A failure (disgw killed under the job) restarts the job in this
        // JVM from its last checkpoint, 2 s later, as often as it takes.
        conf.put("restart-strategy.type", "fixed-delay");
        conf.put("restart-strategy.fixed-delay.attempts", "1000");
        conf.put("restart-strategy.fixed-delay.delay", "2 s");
        // A small MiniCluster: the row runs beside others on 2 cores.
        conf.put("taskmanager.memory.managed.size", "32m");
        conf.put("taskmanager.memory.network.min", "32m");
        conf.put("taskmanager.memory.network.max", "32m");
        conf.put("rest.bind-port", "0");
        conf.put("io.tmp.dirs", System.getProperty("java.io.tmpdir"));
        if (!restore.isEmpty()) {
            conf.put("execution.state-recovery.path", restore);
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(2, Configuration.fromMap(conf));

        KafkaSource<String> source = KafkaSource.<String>builder()
                .setBootstrapServers(broker)
                .setTopics(in)
                .setGroupId(group)
                // A restored job reads from the offsets in its checkpoint;
                // a new one from the group's committed offsets (Admin
                // listConsumerGroupOffsets: OffsetFetch), else the start.
                .setStartingOffsets(OffsetsInitializer.committedOffsets(OffsetResetStrategy.EARLIEST))
                .setDeserializer(KafkaRecordDeserializationSchema.valueOnly(new SimpleStringSchema()))
                .setProperty("partition.discovery.interval.ms", "5000")
                .setProperty("commit.offsets.on.checkpoint", "true")
                .setProperty("isolation.level", "read_committed")
                .build();

        KafkaSink<String> sink = KafkaSink.<String>builder()
                .setBootstrapServers(broker)
                .setRecordSerializer(new CountRecord(out))
                .setDeliveryGuarantee(guarantee)
                .setTransactionalIdPrefix(prefix)
                .setTransactionNamingStrategy(TransactionNamingStrategy.valueOf(naming))
                // At or below disgw's transaction_max_timeout (15 min).
                .setProperty("transaction.timeout.ms", "300000")
                .setProperty("linger.ms", "5")
                .build();

        env.fromSource(source, WatermarkStrategy.noWatermarks(), "kafka-source")
                .keyBy(w -> w)
                .process(new Count())
                .sinkTo(sink);
        System.out.println("STARTING " + guarantee + (restore.isEmpty() ? "" : " restoring " + restore));
        env.execute("disgw-compat-flink-count");
    }

    /** Counts each word; emits "word\tcount". */
    static class Count extends KeyedProcessFunction<String, String, String> {
        private transient ValueState<Long> count;

        @Override
        public void open(OpenContext ctx) {
            count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Long.class));
        }

        @Override
        public void processElement(String word, Context ctx, Collector<String> out) throws Exception {
            Long n = count.value();
            n = n == null ? 1 : n + 1;
            count.update(n);
            out.collect(word + "\t" + n);
        }
    }

    /**
     * "word\tcount" as a record: key the word, value the count. It names its
     * topic (KafkaDatasetFacetProvider), which the POOLING naming strategy
     * requires.
     */
    static class CountRecord implements KafkaRecordSerializationSchema<String>, KafkaDatasetFacetProvider {
        private final String topic;

        CountRecord(String topic) {
            this.topic = topic;
        }

        @Override
        public Optional<KafkaDatasetFacet> getKafkaDatasetFacet() {
            return Optional.of(new DefaultKafkaDatasetFacet(DefaultKafkaDatasetIdentifier.ofTopics(List.of(topic))));
        }

        @Override
        public ProducerRecord<byte[], byte[]> serialize(String element, KafkaSinkContext context, Long timestamp) {
            int tab = element.indexOf('\t');
            return new ProducerRecord<>(topic, element.substring(0, tab).getBytes(StandardCharsets.UTF_8),
                    element.substring(tab + 1).getBytes(StandardCharsets.UTF_8));
        }
    }
}
