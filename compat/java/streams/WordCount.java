// A Kafka Streams 4.4 word count with a state store, at-least-once (or the
// GUARANTEE given, exactly_once_v2 for compat's kafka-streams-eos scenario),
// for compat's kafka-streams scenario: it reads lines from IN, counts their
// words in the store "counts" (backed by the compacted changelog topic
// APP-counts-changelog, through the repartition topic
// APP-counts-repartition) and writes each new count to OUT as
// word -> count. Every update goes to the changelog and to OUT (no cache).
//
//   java -cp 'KAFKA_JARS/*:CLASSES' WordCount BROKER APP STATE_DIR IN OUT [GUARANTEE [COMMIT_MS [SESSION_MS]]]
//
// COMMIT_MS is commit.interval.ms (200 by default): under exactly_once_v2,
// how long each transaction stays open. SESSION_MS is the consumer's
// session.timeout.ms (the default 45 s when not given), with
// heartbeat.interval.ms a third of it: how long the group waits for a
// killed instance before its replacement gets the partitions.
//
// It prints "HH:MM:SS.mmm STATE <state>" at every state change and runs until killed
// (SIGTERM closes it cleanly).
import java.util.Arrays;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;

public class WordCount {
    public static void main(String[] args) throws Exception {
        if (args.length < 5 || args.length > 8) {
            System.err.println("usage: WordCount BROKER APP STATE_DIR IN OUT [GUARANTEE [COMMIT_MS [SESSION_MS]]]");
            System.exit(2);
        }
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        p.put(StreamsConfig.STATE_DIR_CONFIG, args[2]);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args.length >= 6 ? args[5] : StreamsConfig.AT_LEAST_ONCE);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, args.length >= 7 ? Integer.parseInt(args[6]) : 200);
        if (args.length == 8) {
            int session = Integer.parseInt(args[7]);
            p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), session);
            p.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), session / 3);
        }
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");

        StreamsBuilder b = new StreamsBuilder();
        b.stream(args[3], Consumed.with(Serdes.String(), Serdes.String()))
            .flatMapValues(line -> Arrays.asList(line.split(" ")))
            .groupBy((key, word) -> word, Grouped.with(Serdes.String(), Serdes.String()))
            .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts"))
            .toStream()
            .mapValues(n -> Long.toString(n))
            .to(args[4], Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(b.build(), p);
        streams.setStateListener((now, before) -> System.out.println(
            java.time.LocalTime.now().truncatedTo(java.time.temporal.ChronoUnit.MILLIS) + " STATE " + now));
        Runtime.getRuntime().addShutdownHook(new Thread(streams::close));
        streams.start();
        Thread.currentThread().join();
    }
}
