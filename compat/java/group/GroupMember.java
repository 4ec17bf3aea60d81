// GroupMember: one member of a consumer group with group.protocol=consumer
// (KIP-848) or classic, for compat's kafka-java-consumer-protocol and
// kafka-java-migration rows (compat/cmd/compat/client_java_group.go and
// client_java_migration.go compile and run it).
//
//   java -cp KAFKA_JARS/*:CLASSES GroupMember BROKER TOPIC GROUP CLIENT_ID [consumer|classic]
//
// The protocol is consumer unless the fifth argument says classic.
// It subscribes to TOPIC from the earliest offset (when the group has no
// commit), with auto commit off; for each poll it prints every record as
// "REC partition offset key", then commits the records (commitSync) and
// prints "COMMITTED". Its rebalance listener prints "ASSIGNED p p ...",
// "REVOKED p ..." and "LOST p ..." (the partitions added or taken away). SIGTERM makes it close the consumer (the member
// leaves the group) and print "CLOSED". With the consumer protocol it sets
// none of session.timeout.ms, heartbeat.interval.ms and
// partition.assignment.strategy: the consumer protocol refuses them (the
// coordinator owns them). With classic it keeps Java's default assignors
// (range, then cooperative-sticky) and sets only heartbeat.interval.ms=500
// and session.timeout.ms=10000, to keep rebalances quick.
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.TreeSet;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;

public class GroupMember {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("group.id", args[2]);
        p.put("client.id", args[3]);
        String protocol = args.length > 4 ? args[4] : "consumer";
        if (!protocol.equals("consumer") && !protocol.equals("classic")) {
            throw new IllegalArgumentException("protocol " + protocol + ": want consumer or classic");
        }
        p.put("group.protocol", protocol);
        if (protocol.equals("classic")) {
            p.put("heartbeat.interval.ms", "500");
            p.put("session.timeout.ms", "10000");
        }
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        KafkaConsumer<String, String> c = new KafkaConsumer<>(p);
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            c.wakeup();
            try {
                main.join(20000);
            } catch (InterruptedException e) {
                // exiting anyway
            }
        }));
        c.subscribe(List.of(args[1]), new ConsumerRebalanceListener() {
            void print(String what, Collection<TopicPartition> ps) {
                TreeSet<Integer> sorted = new TreeSet<>();
                for (TopicPartition tp : ps) {
                    sorted.add(tp.partition());
                }
                StringBuilder b = new StringBuilder(what);
                for (int q : sorted) {
                    b.append(' ').append(q);
                }
                System.out.println(b);
                System.out.flush();
            }

            public void onPartitionsRevoked(Collection<TopicPartition> ps) {
                print("REVOKED", ps);
            }

            public void onPartitionsAssigned(Collection<TopicPartition> ps) {
                print("ASSIGNED", ps);
            }

            public void onPartitionsLost(Collection<TopicPartition> ps) {
                print("LOST", ps);
            }
        });
        try {
            while (true) {
                ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(200));
                for (ConsumerRecord<String, String> r : rs) {
                    System.out.println("REC " + r.partition() + " " + r.offset() + " " + r.key());
                }
                if (!rs.isEmpty()) {
                    c.commitSync();
                    System.out.println("COMMITTED");
                }
                System.out.flush();
            }
        } catch (WakeupException e) {
            // SIGTERM
        } finally {
            c.close();
            System.out.println("CLOSED");
            System.out.flush();
        }
    }
}
