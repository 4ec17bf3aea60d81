package check;

import com.huaweicloud.dis.DISClient;
import com.huaweicloud.dis.DISConfig;
import com.huaweicloud.dis.adapter.kafka.clients.consumer.*;
import com.huaweicloud.dis.adapter.kafka.clients.producer.*;
import com.huaweicloud.dis.adapter.kafka.common.TopicPartition;
import com.huaweicloud.dis.iface.stream.request.CreateStreamRequest;

import java.util.*;
import java.util.concurrent.*;

/**
 * Two DISKafkaConsumers (adapter 1.2.2 on SDK 1.3.21) subscribe() to one
 * stream through dislocal's consumer-group API; they must get disjoint
 * partitions and read every record once. A manual check, not run by go test:
 *
 * <pre>
 * DISGW_DISLOCAL_SK=$SK bin/disgw dislocal --listen 127.0.0.1:0 --data DIR --ak $AK \
 *     --group-sync-delay 1s --group-session-timeout 15s --ready-file DIR/ready &
 * mvn -q package dependency:copy-dependencies -DoutputDirectory=target/lib
 * AK=... SK=... PROJECT=any java -cp "target/classes:target/lib/*" check.GroupCheck \
 *     http://$(cat DIR/ready) STREAM PARTITIONS RECORDS [STAGGER_MS [expire]]
 * </pre>
 *
 * STAGGER_MS starts the second consumer later (a rebalance on join);
 * "expire" closes it without unsubscribe() (no LeaveGroup), so the first
 * consumer takes over after the session timeout. Exit code 0 when every
 * record was read exactly once.
 */
public class GroupCheck {
    static Properties base(String endpoint) {
        Properties p = new Properties();
        p.setProperty("endpoint", endpoint);
        p.setProperty("manager.endpoint", endpoint);
        p.setProperty("region", "cn-north-1");
        p.setProperty("projectId", System.getenv("PROJECT"));
        p.setProperty("ak", System.getenv("AK"));
        p.setProperty("sk", System.getenv("SK"));
        return p;
    }

    public static void main(String[] args) throws Exception {
        String endpoint = args[0], stream = args[1];
        int parts = Integer.parseInt(args[2]), n = Integer.parseInt(args[3]);
        DISClient dis = new DISClient(new DISConfig() {{ putAll(base(endpoint)); }});
        CreateStreamRequest cs = new CreateStreamRequest();
        cs.setStreamName(stream); cs.setPartitionCount(parts); cs.setDataDuration(24); cs.setStreamType("COMMON"); cs.setDataType("BLOB");
        dis.createStream(cs);

        long staggerMs = args.length > 4 ? Long.parseLong(args[4]) : 0;
        boolean expire = args.length > 5 && args[5].equals("expire");
        ConcurrentHashMap<String, List<String>> current = new ConcurrentHashMap<>();
        ConcurrentHashMap<String, Integer> seen = new ConcurrentHashMap<>();
        ConcurrentHashMap<String, String> owner = new ConcurrentHashMap<>();
        ExecutorService ex = Executors.newFixedThreadPool(2);
        List<Future<String>> fs = new ArrayList<>();
        for (String id : new String[]{"c1", "c2"}) {
            if (id.equals("c2") && staggerMs > 0) Thread.sleep(staggerMs);
            fs.add(ex.submit(() -> {
                Properties cp = base(endpoint);
                cp.setProperty("group.id", "gcheck");
                cp.setProperty("client.id", id);
                cp.setProperty("auto.offset.reset", "earliest");
                cp.setProperty("enable.auto.commit", "false");
                cp.setProperty("key.deserializer", "com.huaweicloud.dis.adapter.kafka.common.serialization.StringDeserializer");
                cp.setProperty("value.deserializer", "com.huaweicloud.dis.adapter.kafka.common.serialization.StringDeserializer");
                DISKafkaConsumer<String, String> c = new DISKafkaConsumer<>(cp);
                List<String> assigned = new ArrayList<>();
                c.subscribe(Collections.singletonList(stream), new ConsumerRebalanceListener() {
                    public void onPartitionsRevoked(Collection<TopicPartition> ps) { System.out.println(id + " revoked " + ps); }
                    public void onPartitionsAssigned(Collection<TopicPartition> ps) {
                        System.out.println(id + " assigned " + ps);
                        assigned.clear();
                        for (TopicPartition tp : ps) assigned.add(tp.toString());
                        current.put(id, new ArrayList<>(assigned));
                    }
                });
                long end = System.currentTimeMillis() + 150000;
                int mine = 0;
                while (System.currentTimeMillis() < end && seen.size() < n) {
                    ConsumerRecords<String, String> rs = c.poll(1000);
                    if (expire && id.equals("c2") && !assigned.isEmpty()) {
                        c.close(); // no unsubscribe(): no LeaveGroup, the server must expire c2
                        current.remove("c2");
                        return "c2 closed without leaving, holding " + assigned;
                    }
                    for (ConsumerRecord<String, String> r : rs) {
                        String tp = r.topic() + "-" + r.partition();
                        String prev = owner.putIfAbsent(tp, id);
                        if (prev != null && !prev.equals(id)) System.out.println("PARTITION " + tp + " read by " + prev + " and " + id);
                        seen.merge(r.value(), 1, Integer::sum);
                        mine++;
                    }
                    if (!rs.isEmpty()) c.commitSync();
                }
                c.unsubscribe();
                c.close();
                return id + " read " + mine + " records from " + assigned;
            }));
        }
        long until = System.currentTimeMillis() + 120000;
        while (System.currentTimeMillis() < until) {
            List<String> a = current.get("c1"), b = current.get("c2");
            if (expire) {
                if (fs.get(1).isDone() && a != null && a.size() == parts) break;
            } else if (a != null && b != null && !a.isEmpty() && !b.isEmpty() && a.size() + b.size() == parts) break;
            Thread.sleep(100);
        }
        System.out.println("assignments before producing: " + current);
        Properties pp = base(endpoint);
        pp.setProperty("key.serializer", "com.huaweicloud.dis.adapter.kafka.common.serialization.StringSerializer");
        pp.setProperty("value.serializer", "com.huaweicloud.dis.adapter.kafka.common.serialization.StringSerializer");
        DISKafkaProducer<String, String> prod = new DISKafkaProducer<>(pp);
        for (int i = 0; i < n; i++) prod.send(new ProducerRecord<>(stream, "k" + i, "v" + i)).get();
        prod.close();
        System.out.println("produced " + n);
        for (Future<String> f : fs) System.out.println(f.get());
        ex.shutdown();
        long dups = seen.values().stream().filter(v -> v > 1).count();
        System.out.println("distinct " + seen.size() + " of " + n + ", read twice " + dups + ", owners " + new TreeMap<>(owner));
        System.exit(seen.size() == n && dups == 0 ? 0 : 1);
    }
}
