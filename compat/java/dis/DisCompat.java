// The DIS side of compat's rows dis-java-sdk, dis-java-sdk-protobuf,
// dis-kafka-adapter and dis-interop: the official DIS Java SDK 1.3.21
// (DISClient) and DIS Kafka Adapter 1.2.2 (DISKafkaProducer,
// DISKafkaConsumer), unchanged, against the DIS endpoint in
// DISGW_COMPAT_DIS_ENDPOINT (compat's dislocal, AK/SK signatures checked:
// DISGW_COMPAT_DIS_AK, DISGW_COMPAT_DIS_SK, DISGW_COMPAT_DIS_PROJECT).
//
//   java DisCompat sdk json|protobuf STREAM GROUP   the dis-java-sdk rows
//   java DisCompat adapter STREAM GROUP             the dis-kafka-adapter row
//   java DisCompat sdk-describe STREAM              ##OFF lines: partition, range start and end
//   java DisCompat sdk-read STREAM                  ##REC lines: every record, read with the SDK
//   java DisCompat adapter-read STREAM              ##REC lines: every record, read with DISKafkaConsumer (assign)
//   java DisCompat sdk-put STREAM FROM N            puts keys FROM..FROM+N-1 with putRecords; ##REC lines
//   java DisCompat adapter-put STREAM FROM N        the same with DISKafkaProducer
//   java DisCompat sdk-checkpoints STREAM APP       ##OFF lines: getCheckpoint LAST_READ (-1: none)
//   java DisCompat adapter-committed STREAM GROUP   ##OFF lines: DISKafkaConsumer.committed (-1: none)
//   java DisCompat adapter-commit STREAM GROUP P=OFF,...  commitSync of those offsets
//
// The rows print compat's ##STEP lines (compat/internal/scen); the helpers
// of dis-interop print ##REC {"partition","offset","key","value"} and ##OFF
// {"partition","offset"[,"end"]} lines that its Go side checks, and exit 1
// on an error. Logs (slf4j-simple) go to stderr.

import com.huaweicloud.dis.DISClient;
import com.huaweicloud.dis.DISConfig;
import com.huaweicloud.dis.adapter.kafka.clients.consumer.ConsumerRebalanceListener;
import com.huaweicloud.dis.adapter.kafka.clients.consumer.ConsumerRecord;
import com.huaweicloud.dis.adapter.kafka.clients.consumer.ConsumerRecords;
import com.huaweicloud.dis.adapter.kafka.clients.consumer.DISKafkaConsumer;
import com.huaweicloud.dis.adapter.kafka.clients.consumer.OffsetAndMetadata;
import com.huaweicloud.dis.adapter.kafka.clients.producer.DISKafkaProducer;
import com.huaweicloud.dis.adapter.kafka.clients.producer.ProducerRecord;
import com.huaweicloud.dis.adapter.kafka.clients.producer.RecordMetadata;
import com.huaweicloud.dis.adapter.kafka.common.TopicPartition;
import com.huaweicloud.dis.iface.data.request.CommitCheckpointRequest;
import com.huaweicloud.dis.iface.data.request.GetCheckpointRequest;
import com.huaweicloud.dis.iface.data.request.GetPartitionCursorRequest;
import com.huaweicloud.dis.iface.data.request.GetRecordsRequest;
import com.huaweicloud.dis.iface.data.request.PutRecordsRequest;
import com.huaweicloud.dis.iface.data.request.PutRecordsRequestEntry;
import com.huaweicloud.dis.iface.data.response.GetCheckpointResult;
import com.huaweicloud.dis.iface.data.response.GetRecordsResult;
import com.huaweicloud.dis.iface.data.response.PutRecordsResult;
import com.huaweicloud.dis.iface.data.response.PutRecordsResultEntry;
import com.huaweicloud.dis.iface.data.response.Record;
import com.huaweicloud.dis.iface.stream.request.CreateStreamRequest;
import com.huaweicloud.dis.iface.stream.request.DescribeStreamRequest;
import com.huaweicloud.dis.iface.stream.response.DescribeStreamResult;
import com.huaweicloud.dis.iface.stream.response.PartitionResult;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

public class DisCompat {
    static final int N = 1000, HALF = 500, PARTITIONS = 3;
    static final String LAST_READ = "LAST_READ";

    static String key(int i) { return String.format("key-%04d", i); }
    static String value(int i) { return String.format("value-%04d", i); }

    static int index(String key) {
        if (key == null || !key.startsWith("key-")) {
            throw new IllegalStateException("key " + key + " is not key-NNNN");
        }
        return Integer.parseInt(key.substring(4));
    }

    static String shard(int p) { return String.format("shardId-%010d", p); }

    /** The partition number of a DIS partition id, shardId-0000000002 or 2. */
    static int partition(String id) {
        int i = id.lastIndexOf('-');
        return Integer.parseInt(id.substring(i + 1));
    }

    // ---- output

    static String json(Object... kv) {
        StringBuilder b = new StringBuilder("{");
        for (int i = 0; i < kv.length; i += 2) {
            if (i > 0) b.append(',');
            b.append(quote(String.valueOf(kv[i]))).append(':');
            Object v = kv[i + 1];
            b.append(v == null ? "null" : v instanceof Number ? v.toString() : quote(v.toString()));
        }
        return b.append('}').toString();
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
                    else b.append(c);
            }
        }
        return b.append('"').toString();
    }

    static synchronized void emit(String kind, String json) {
        System.out.println(kind + " " + json);
        System.out.flush();
    }

    static void step(String step, String status, String detail) {
        emit("##STEP", json("step", step, "status", status, "detail", detail));
    }

    static void info(String k, String v) { emit("##INFO", json("key", k, "value", v)); }

    static void rec(int p, long off, String k, String v) {
        emit("##REC", json("partition", p, "offset", off, "key", k, "value", v));
    }

    interface Body { String run() throws Exception; }

    /** The steps of a row: the first to fail makes the rest skip. */
    static class Steps {
        boolean failed;

        boolean run(String name, Body body) {
            if (failed) {
                step(name, "skip", "an earlier step failed");
                return false;
            }
            try {
                step(name, "pass", body.run());
                return true;
            } catch (Throwable e) {
                failed = true;
                step(name, "fail", describe(e));
                e.printStackTrace();
                return false;
            }
        }
    }

    static String describe(Throwable e) {
        StringBuilder b = new StringBuilder();
        for (Throwable t = e; t != null && b.length() < 600; t = t.getCause()) {
            if (b.length() > 0) b.append(" <- ");
            b.append(t.getClass().getSimpleName()).append(": ").append(t.getMessage());
            if (t.getCause() == t) break;
        }
        return b.toString();
    }

    static void check(boolean ok, String fmt, Object... args) {
        if (!ok) throw new IllegalStateException(String.format(fmt, args));
    }

    // ---- configuration

    static String env(String name) {
        String v = System.getenv(name);
        if (v == null || v.isEmpty()) {
            throw new IllegalStateException(name + " is not set (compat sets it on backend dis)");
        }
        return v;
    }

    /** The connection keys both the SDK and the adapter read. */
    static Properties base(String serialize) {
        Properties p = new Properties();
        String endpoint = env("DISGW_COMPAT_DIS_ENDPOINT");
        p.setProperty(DISConfig.PROPERTY_ENDPOINT, endpoint);
        p.setProperty(DISConfig.PROPERTY_MANAGER_ENDPOINT, endpoint);
        p.setProperty(DISConfig.PROPERTY_AK, env("DISGW_COMPAT_DIS_AK"));
        p.setProperty(DISConfig.PROPERTY_SK, env("DISGW_COMPAT_DIS_SK"));
        p.setProperty(DISConfig.PROPERTY_PROJECT_ID, env("DISGW_COMPAT_DIS_PROJECT"));
        p.setProperty(DISConfig.PROPERTY_REGION_ID, "southchina");
        p.setProperty(DISConfig.PROPERTY_IS_DEFAULT_DATA_ENCRYPT_ENABLED, "false");
        p.setProperty(DISConfig.PROPERTY_IS_DEFAULT_TRUSTED_JKS_ENABLED, "false");
        p.setProperty(DISConfig.PROPERTY_BODY_SERIALIZE_TYPE, serialize);
        return p;
    }

    static DISClient sdk(String serialize) {
        return sdk(serialize, null);
    }

    /** A DISClient; compress, when set, is its body.compress.type (body.compress.enabled). */
    static DISClient sdk(String serialize, String compress) {
        DISConfig c = new DISConfig();
        c.putAll(base(serialize));
        if (compress != null) {
            c.setProperty(DISConfig.PROPERTY_BODY_COMPRESS_ENABLED, "true");
            c.setProperty(DISConfig.PROPERTY_BODY_COMPRESS_TYPE, compress);
        }
        return new DISClient(c);
    }

    // ---- the SDK

    static void createStream(DISClient c, String stream) {
        CreateStreamRequest r = new CreateStreamRequest();
        r.setStreamName(stream);
        r.setPartitionCount(PARTITIONS);
        r.setStreamType("COMMON");
        r.setDataDuration(24);
        r.setDataType("BLOB");
        c.createStream(r);
    }

    /** Each partition's sequence_number_range [first, next], by describeStream. */
    static TreeMap<Integer, long[]> ranges(DISClient c, String stream) {
        TreeMap<Integer, long[]> out = new TreeMap<>();
        String start = null;
        for (int page = 0; page < 100; page++) {
            DescribeStreamRequest r = new DescribeStreamRequest();
            r.setStreamName(stream);
            r.setLimitPartitions(100);
            if (start != null) r.setStartPartitionId(start);
            DescribeStreamResult res = c.describeStream(r);
            for (PartitionResult p : res.getPartitions()) {
                String range = p.getSequenceNumberRange();
                check(range != null, "partition %s has no sequence_number_range", p.getPartitionId());
                String[] f = range.replace("[", "").replace("]", "").split(":");
                out.put(partition(p.getPartitionId()), new long[] {Long.parseLong(f[0].trim()), Long.parseLong(f[1].trim())});
                start = p.getPartitionId();
            }
            if (!Boolean.TRUE.equals(res.getHasMorePartitions()) || res.getPartitions().isEmpty()) break;
        }
        return out;
    }

    static String rangesString(Map<Integer, long[]> r) {
        StringBuilder b = new StringBuilder();
        for (Map.Entry<Integer, long[]> e : r.entrySet()) {
            b.append(b.length() > 0 ? " " : "").append("p").append(e.getKey()).append("=[").append(e.getValue()[0]).append(":").append(e.getValue()[1]).append("]");
        }
        return b.toString();
    }

    static Map<Integer, long[]> sdkPut(DISClient c, String stream, int from, int n) {
        return sdkPut(Collections.singletonList(c), stream, from, n);
    }

    /**
     * putRecords of keys from..from+n-1, 250 a request, the requests sent by
     * each of cs in turn; returns key index -> {partition, sequence number}.
     */
    static Map<Integer, long[]> sdkPut(List<DISClient> cs, String stream, int from, int n) {
        Map<Integer, long[]> out = new TreeMap<>();
        for (int at = from, req = 0; at < from + n; at += 250, req++) {
            DISClient c = cs.get(req % cs.size());
            int end = Math.min(at + 250, from + n);
            List<PutRecordsRequestEntry> entries = new ArrayList<>();
            for (int i = at; i < end; i++) {
                PutRecordsRequestEntry e = new PutRecordsRequestEntry();
                e.setPartitionKey(key(i));
                e.setData(ByteBuffer.wrap(value(i).getBytes(StandardCharsets.UTF_8)));
                entries.add(e);
            }
            PutRecordsRequest r = new PutRecordsRequest();
            r.setStreamName(stream);
            r.setRecords(entries);
            PutRecordsResult res = c.putRecords(r);
            check(res.getFailedRecordCount().get() == 0, "putRecords: failed_record_count %d", res.getFailedRecordCount().get());
            check(res.getRecords().size() == entries.size(), "putRecords: %d results for %d records", res.getRecords().size(), entries.size());
            for (int j = 0; j < entries.size(); j++) {
                PutRecordsResultEntry e = res.getRecords().get(j);
                check(e.getErrorCode() == null, "putRecords: record %s: %s %s", key(at + j), e.getErrorCode(), e.getErrorMessage());
                out.put(at + j, new long[] {partition(e.getPartitionId()), Long.parseLong(e.getSequenceNumber())});
            }
        }
        return out;
    }

    /** Checks that the sequence numbers putRecords gave are 0,1,2,... from start[p] in each partition, in order of the puts. */
    static void checkAssigned(Map<Integer, long[]> put, Map<Integer, Long> start) {
        Map<Integer, Long> next = new HashMap<>(start);
        for (Map.Entry<Integer, long[]> e : put.entrySet()) {
            int p = (int) e.getValue()[0];
            long want = next.getOrDefault(p, 0L);
            check(e.getValue()[1] == want, "%s: partition %d sequence number %d, want %d", key(e.getKey()), p, e.getValue()[1], want);
            next.put(p, want + 1);
        }
    }

    static String cursor(DISClient c, String stream, int p, long seq) {
        GetPartitionCursorRequest r = new GetPartitionCursorRequest();
        r.setStreamName(stream);
        r.setPartitionId(shard(p));
        r.setCursorType("AT_SEQUENCE_NUMBER");
        r.setStartingSequenceNumber(Long.toString(seq));
        return c.getPartitionCursor(r).getPartitionCursor();
    }

    static class Read {
        int partition;
        long seq;
        String key, value;

        Read(int p, long s, String k, String v) { partition = p; seq = s; key = k; value = v; }
    }

    /**
     * Reads partition p from seq on with getRecords (app app, if set) until
     * limit records or the end; checks each record's sequence number follows
     * the last.
     */
    static List<Read> sdkRead(DISClient c, String stream, String app, int p, long seq, long end, int limit) {
        List<Read> out = new ArrayList<>();
        if (seq >= end || limit <= 0) return out;
        String cur = cursor(c, stream, p, seq);
        long want = seq;
        int empty = 0;
        while (out.size() < limit && want < end) {
            GetRecordsRequest r = new GetRecordsRequest();
            r.setPartitionCursor(cur);
            r.setLimit(Math.min(limit - out.size(), 1000));
            if (app != null) r.setAppName(app);
            GetRecordsResult res = c.getRecords(r);
            for (Record rec : res.getRecords()) {
                if (out.size() >= limit) break;
                long s = Long.parseLong(rec.getSequenceNumber());
                check(s == want, "partition %d: getRecords gave sequence number %d, want %d", p, s, want);
                ByteBuffer d = rec.getData();
                byte[] b = new byte[d.remaining()];
                d.get(b);
                out.add(new Read(p, s, rec.getPartitionKey(), new String(b, StandardCharsets.UTF_8)));
                want = s + 1;
            }
            if (res.getRecords().isEmpty()) {
                check(++empty < 20, "partition %d: getRecords empty 20 times at %d, end %d", p, want, end);
            }
            cur = res.getNextPartitionCursor();
        }
        return out;
    }

    static void checkRead(Read r, Map<Integer, long[]> put) {
        int i = index(r.key);
        check(r.value.equals(value(i)), "p%d@%d: key %s has value %s, want %s", r.partition, r.seq, r.key, r.value, value(i));
        long[] at = put.get(i);
        check(at != null, "p%d@%d: key %s was not put", r.partition, r.seq, r.key);
        check(at[0] == r.partition && at[1] == r.seq, "key %s read at p%d@%d, put at p%d@%d", r.key, r.partition, r.seq, at[0], at[1]);
    }

    static void commit(DISClient c, String stream, String app, int p, long seq) {
        CommitCheckpointRequest r = new CommitCheckpointRequest();
        r.setAppName(app);
        r.setCheckpointType(LAST_READ);
        r.setStreamName(stream);
        r.setPartitionId(shard(p));
        r.setSequenceNumber(Long.toString(seq));
        c.commitCheckpoint(r);
    }

    /** getCheckpoint LAST_READ of app on partition p; -1 when there is none. */
    static long checkpoint(DISClient c, String stream, String app, int p) {
        GetCheckpointRequest r = new GetCheckpointRequest();
        r.setStreamName(stream);
        r.setPartitionId(shard(p));
        r.setAppName(app);
        r.setCheckpointType(LAST_READ);
        GetCheckpointResult res = c.getCheckpoint(r);
        String s = res.getSequenceNumber();
        if (s == null || s.isEmpty()) return -1;
        return Long.parseLong(s);
    }

    static void sdkRow(String serialize, String stream, String group) {
        info("version", "huaweicloud-sdk-java-dis 1.3.21 (DISClient, body.serialize.type=" + serialize + "), " + javaVersion());
        Steps s = new Steps();
        DISClient c = sdk(serialize);
        Map<Integer, long[]> put = new TreeMap<>();
        Map<Integer, Long> committed = new TreeMap<>();
        Set<String> seen = new HashSet<>();
        s.run("create", () -> {
            createStream(c, stream);
            Map<Integer, long[]> r = ranges(c, stream);
            check(r.size() == PARTITIONS, "describeStream: %d partitions, want %d", r.size(), PARTITIONS);
            for (long[] v : r.values()) check(v[0] == 0 && v[1] == 0, "new stream ranges %s", rangesString(r));
            return "createStream " + stream + ", 3 partitions; describeStream: " + rangesString(r);
        });
        s.run("produce", () -> {
            // JSON bodies: the 4 requests plain and compressed
            // (body.compress.enabled) with each body.compress.type.
            List<DISClient> cs = new ArrayList<>(Collections.singletonList(c));
            String how = "";
            if (serialize.equals("json")) {
                for (String z : new String[] {"lz4", "snappy", "zstd"}) cs.add(sdk(serialize, z));
                how = ": plain, and with body.compress.type lz4, snappy, zstd";
            }
            put.putAll(sdkPut(cs, stream, 0, N));
            checkAssigned(put, Collections.emptyMap());
            int[] per = new int[PARTITIONS];
            for (long[] v : put.values()) per[(int) v[0]]++;
            return String.format("putRecords of %d keyed records (4 requests%s), failed_record_count 0; sequence numbers 0,1,2,... per partition: %s", N, how, Arrays.toString(per));
        });
        s.run("consume", () -> {
            c.createApp(group);
            Map<Integer, long[]> r = ranges(c, stream);
            List<Read> got = new ArrayList<>();
            // round-robin over the partitions, 100 records a call, until 500
            Map<Integer, Long> next = new TreeMap<>();
            for (int p = 0; p < PARTITIONS; p++) next.put(p, 0L);
            while (got.size() < HALF) {
                int before = got.size();
                for (int p = 0; p < PARTITIONS && got.size() < HALF; p++) {
                    List<Read> part = sdkRead(c, stream, group, p, next.get(p), r.get(p)[1], Math.min(100, HALF - got.size()));
                    got.addAll(part);
                    next.put(p, next.get(p) + part.size());
                }
                check(got.size() > before, "read %d records, then nothing", got.size());
            }
            for (Read x : got) {
                checkRead(x, put);
                check(seen.add(x.key), "key %s read twice", x.key);
            }
            for (int p = 0; p < PARTITIONS; p++) {
                commit(c, stream, group, p, next.get(p));
                committed.put(p, next.get(p));
            }
            return String.format("app %s (createApp); getPartitionCursor AT_SEQUENCE_NUMBER 0 + getRecords: %d records, keys, values, partitions and sequence numbers as put; commitCheckpoint LAST_READ %s",
                    group, got.size(), committed);
        });
        s.run("resume", () -> {
            DISClient c2 = sdk(serialize);
            Map<Integer, long[]> r = ranges(c2, stream);
            Map<Integer, Long> from = new TreeMap<>();
            int n = 0;
            for (int p = 0; p < PARTITIONS; p++) {
                long cp = checkpoint(c2, stream, group, p);
                check(cp == committed.get(p), "partition %d: getCheckpoint %d, committed %d", p, cp, committed.get(p));
                from.put(p, cp);
                List<Read> part = sdkRead(c2, stream, group, p, cp, r.get(p)[1], Integer.MAX_VALUE);
                check(part.isEmpty() || part.get(0).seq == cp, "partition %d: resumed at %d, checkpoint %d", p, part.isEmpty() ? -1 : part.get(0).seq, cp);
                for (Read x : part) {
                    checkRead(x, put);
                    check(seen.add(x.key), "key %s (p%d@%d) read again after its checkpoint", x.key, x.partition, x.seq);
                }
                n += part.size();
                commit(c2, stream, group, p, r.get(p)[1]);
            }
            check(seen.size() == N, "%d of %d records read in all", seen.size(), N);
            return String.format("a fresh client read from getCheckpoint %s exactly the other %d records (none twice, none skipped); committed the ends", from, n);
        });
        s.run("describe", () -> {
            Map<Integer, long[]> r = ranges(c, stream);
            long total = 0;
            for (int p = 0; p < PARTITIONS; p++) {
                check(r.get(p)[0] == 0, "partition %d range starts at %d", p, r.get(p)[0]);
                total += r.get(p)[1];
                long cp = checkpoint(c, stream, group, p);
                check(cp == r.get(p)[1], "partition %d: getCheckpoint %d, range end %d", p, cp, r.get(p)[1]);
            }
            check(total == N, "ranges hold %d records, want %d", total, N);
            return "describeStream " + rangesString(r) + " (1000 records); getCheckpoint of " + group + " = each range end";
        });
    }

    // ---- the adapter

    static Properties adapterProps(String group, String clientId) {
        Properties p = base("json");
        if (group != null) p.setProperty("group.id", group);
        if (clientId != null) p.setProperty("client.id", clientId);
        p.setProperty("enable.auto.commit", "false");
        p.setProperty("auto.offset.reset", "earliest");
        p.setProperty("key.deserializer", "com.huaweicloud.dis.adapter.kafka.common.serialization.StringDeserializer");
        p.setProperty("value.deserializer", "com.huaweicloud.dis.adapter.kafka.common.serialization.StringDeserializer");
        p.setProperty("key.serializer", "com.huaweicloud.dis.adapter.kafka.common.serialization.StringSerializer");
        p.setProperty("value.serializer", "com.huaweicloud.dis.adapter.kafka.common.serialization.StringSerializer");
        // No timing keys: 1.2.2 reads neither heartbeat.interval.ms nor
        // rebalance.timeout.ms (later versions' keys) nor session.timeout.ms;
        // it heartbeats from poll() every 10 s (fixed), sends no
        // rebalanceTimeoutMs in JoinGroup, and close() sends no LeaveGroup:
        // how long a rebalance takes is dislocal's (compat's disArgs).
        return p;
    }

    /** DISKafkaProducer sends of keys from..from+n-1, flushed; returns key index -> {partition, offset} from the callbacks. */
    static Map<Integer, long[]> adapterPut(String stream, int from, int n) throws Exception {
        Map<Integer, long[]> out = new ConcurrentHashMap<>();
        AtomicReference<Exception> failed = new AtomicReference<>();
        CountDownLatch done = new CountDownLatch(n);
        DISKafkaProducer<String, String> prod = new DISKafkaProducer<>(adapterProps(null, null));
        try {
            for (int i = from; i < from + n; i++) {
                final int idx = i;
                prod.send(new ProducerRecord<>(stream, key(i), value(i)), (RecordMetadata md, Exception e) -> {
                    if (e != null) failed.compareAndSet(null, e);
                    else out.put(idx, new long[] {md.partition(), md.offset()});
                    done.countDown();
                });
            }
            prod.flush();
            check(done.await(60, TimeUnit.SECONDS), "%d of %d send callbacks after flush and 60 s", n - done.getCount(), n);
        } finally {
            prod.close();
        }
        if (failed.get() != null) throw failed.get();
        check(out.size() == n, "%d of %d sends acknowledged", out.size(), n);
        return new TreeMap<>(out);
    }

    static List<TopicPartition> tps(String stream) {
        List<TopicPartition> l = new ArrayList<>();
        for (int p = 0; p < PARTITIONS; p++) l.add(new TopicPartition(stream, p));
        return l;
    }

    static Read read(ConsumerRecord<String, String> r) { return new Read(r.partition(), r.offset(), r.key(), r.value()); }

    /** Polls c until want records (more are not processed: the rest of a poll is left) or until ends are reached; at most limit. */
    static List<Read> pollUntil(DISKafkaConsumer<String, String> c, int want, long seconds) {
        List<Read> out = new ArrayList<>();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (out.size() < want && System.nanoTime() < deadline) {
            ConsumerRecords<String, String> rs = c.poll(1000);
            for (ConsumerRecord<String, String> r : rs) {
                if (out.size() >= want) break;
                out.add(read(r));
            }
        }
        return out;
    }

    static Map<TopicPartition, OffsetAndMetadata> nextOffsets(String stream, List<Read> rs) {
        Map<TopicPartition, OffsetAndMetadata> m = new HashMap<>();
        for (Read r : rs) {
            TopicPartition tp = new TopicPartition(stream, r.partition);
            if (!m.containsKey(tp) || m.get(tp).offset() < r.seq + 1) m.put(tp, new OffsetAndMetadata(r.seq + 1));
        }
        return m;
    }

    /** Checks rs continue each partition without a gap from from[p] (a partition's first record at from[p]). */
    static void checkContiguous(List<Read> rs, Map<Integer, Long> from) {
        Map<Integer, Long> next = new HashMap<>(from);
        for (Read r : rs) {
            long want = next.getOrDefault(r.partition, 0L);
            check(r.seq == want, "partition %d: offset %d, want %d", r.partition, r.seq, want);
            next.put(r.partition, want + 1);
        }
    }

    static String offsets(Map<TopicPartition, OffsetAndMetadata> m) {
        TreeMap<Integer, Long> t = new TreeMap<>();
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : m.entrySet()) t.put(e.getKey().partition(), e.getValue().offset());
        return t.toString();
    }

    static void adapterRow(String stream, String group) {
        info("version", "huaweicloud-dis-kafka-adapter 1.2.2 (DISKafkaProducer, DISKafkaConsumer) on huaweicloud-sdk-java-dis 1.3.21, " + javaVersion());
        Steps s = new Steps();
        DISClient sdk = sdk("json");
        Map<Integer, long[]> put = new TreeMap<>();
        Set<String> seen = new HashSet<>();
        Map<Integer, Long> committed = new TreeMap<>();
        String sub = stream + "-sub", subGroup = group + "-sub";
        s.run("create", () -> {
            createStream(sdk, stream);
            DISKafkaProducer<String, String> prod = new DISKafkaProducer<>(adapterProps(null, null));
            int n;
            try {
                n = prod.partitionsFor(stream).size();
            } finally {
                prod.close();
            }
            check(n == PARTITIONS, "DISKafkaProducer.partitionsFor: %d partitions", n);
            return "the adapter has no admin API: createStream (DIS SDK) " + stream + ", 3 partitions; DISKafkaProducer.partitionsFor gives 3";
        });
        s.run("produce", () -> {
            put.putAll(adapterPut(stream, 0, N));
            checkAssigned(put, Collections.emptyMap());
            return String.format("DISKafkaProducer.send of %d keyed records, flush: every callback without an exception, offsets 0,1,2,... per partition", N);
        });
        s.run("consume", () -> {
            DISKafkaConsumer<String, String> c = new DISKafkaConsumer<>(adapterProps(group, "c1-" + group));
            try {
                c.assign(tps(stream));
                List<Read> got = pollUntil(c, HALF, 60);
                check(got.size() == HALF, "read %d of %d records in 60 s", got.size(), HALF);
                checkContiguous(got, Collections.emptyMap());
                for (Read r : got) {
                    checkRead(r, put);
                    check(seen.add(r.key), "key %s read twice", r.key);
                }
                Map<TopicPartition, OffsetAndMetadata> m = nextOffsets(stream, got);
                c.commitSync(m);
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e : m.entrySet()) committed.put(e.getKey().partition(), e.getValue().offset());
                return "assign() of the 3 partitions, group.id " + group + ", auto.offset.reset=earliest: " + HALF
                        + " records, keys, values, partitions and offsets as produced; commitSync " + offsets(m);
            } finally {
                c.close();
            }
        });
        s.run("resume", () -> {
            DISKafkaConsumer<String, String> c = new DISKafkaConsumer<>(adapterProps(group, "c2-" + group));
            try {
                c.assign(tps(stream));
                for (int p = 0; p < PARTITIONS; p++) {
                    OffsetAndMetadata om = c.committed(new TopicPartition(stream, p));
                    Long want = committed.get(p);
                    check(want == null ? om == null || om.offset() < 0 : om != null && om.offset() == want,
                            "partition %d: committed() %s, commitSync gave %s", p, om == null ? "null" : om.offset(), want);
                }
                List<Read> got = pollUntil(c, N - HALF, 60);
                check(got.size() == N - HALF, "read %d of the other %d records in 60 s", got.size(), N - HALF);
                checkContiguous(got, committed);
                for (Read r : got) {
                    checkRead(r, put);
                    check(seen.add(r.key), "key %s (p%d@%d) read again after its commit", r.key, r.partition, r.seq);
                }
                check(seen.size() == N, "%d of %d keys read in all", seen.size(), N);
                List<Read> more = pollUntil(c, 1, 3);
                check(more.isEmpty(), "read past the end: p%d@%d", more.isEmpty() ? 0 : more.get(0).partition, more.isEmpty() ? 0 : more.get(0).seq);
                c.commitSync();
                return "a new consumer, assign() again: committed() = what was committed, it read from there exactly the other " + (N - HALF)
                        + " records (none twice, none skipped); commitSync()";
            } finally {
                c.close();
            }
        });
        s.run("describe", () -> {
            DISKafkaConsumer<String, String> c = new DISKafkaConsumer<>(adapterProps(group, "c3-" + group));
            try {
                Map<TopicPartition, Long> begin = c.beginningOffsets(tps(stream)), end = c.endOffsets(tps(stream));
                long total = 0;
                StringBuilder b = new StringBuilder();
                for (TopicPartition tp : tps(stream)) {
                    check(begin.get(tp) != null && begin.get(tp) == 0, "%s beginningOffsets %s", tp, begin.get(tp));
                    check(end.get(tp) != null, "%s: no endOffsets", tp);
                    OffsetAndMetadata om = c.committed(tp);
                    check(om != null && om.offset() == end.get(tp), "%s: committed %s, end offset %d", tp, om == null ? "null" : om.offset(), end.get(tp));
                    total += end.get(tp);
                    b.append(" p").append(tp.partition()).append("=").append(end.get(tp));
                }
                check(total == N, "end offsets sum to %d, want %d", total, N);
                return "beginningOffsets 0, endOffsets" + b + "; committed() = the end offsets";
            } finally {
                c.close();
            }
        });
        s.run("subscribe group of two", () -> {
            createStream(sdk, sub);
            String r = subscribeTwo(sub, subGroup, new String[] {"a-" + subGroup, "b-" + subGroup}, 0, 600);
            return "stream " + sub + ", group " + subGroup + ": " + r;
        });
        s.run("group restart", () -> {
            Map<Integer, Long> cps = new TreeMap<>();
            for (int p = 0; p < PARTITIONS; p++) cps.put(p, checkpoint(sdk, sub, subGroup, p));
            String r = subscribeTwo(sub, subGroup, new String[] {"c-" + subGroup, "d-" + subGroup}, 600, 300);
            return "both closed; the group's checkpoints " + cps + "; " + r + " (only the records produced after)";
        });
    }

    /**
     * Two DISKafkaConsumers of group with distinct client.id subscribe to
     * stream, each polled by its own thread, until their assignments are
     * disjoint and cover the partitions; then keys from..from+n-1 are
     * produced, and together they must read exactly those (each once, each
     * from a partition it is assigned), committing after each poll. Both are
     * closed at the end.
     */
    static String subscribeTwo(String stream, String group, String[] ids, int from, int n) throws Exception {
        List<DISKafkaConsumer<String, String>> cs = new ArrayList<>();
        Map<String, String> readBy = new ConcurrentHashMap<>();
        List<String> dups = Collections.synchronizedList(new ArrayList<>());
        List<String> commitErrors = Collections.synchronizedList(new ArrayList<>());
        Map<String, Set<Integer>> assigned = new ConcurrentHashMap<>();
        AtomicReference<Throwable> failed = new AtomicReference<>();
        Flag stop = new Flag();
        List<Thread> ts = new ArrayList<>();
        for (String id : ids) {
            DISKafkaConsumer<String, String> c = new DISKafkaConsumer<>(adapterProps(group, id));
            cs.add(c);
            assigned.put(id, new HashSet<>());
            Thread t = new Thread(() -> {
                try {
                    c.subscribe(Collections.singletonList(stream), new ConsumerRebalanceListener() {
                        public void onPartitionsRevoked(Collection<TopicPartition> ps) {}

                        public void onPartitionsAssigned(Collection<TopicPartition> ps) {}
                    });
                    while (!stop.v) {
                        ConsumerRecords<String, String> rs = c.poll(500);
                        Set<Integer> a = new HashSet<>();
                        for (TopicPartition tp : c.assignment()) a.add(tp.partition());
                        assigned.put(id, a);
                        for (ConsumerRecord<String, String> r : rs) {
                            check(a.contains(r.partition()), "%s read p%d@%d, assigned %s", id, r.partition(), r.offset(), a);
                            check(r.value().equals(value(index(r.key()))), "%s: key %s value %s", id, r.key(), r.value());
                            String was = readBy.putIfAbsent(r.key(), id + "@p" + r.partition());
                            if (was != null) dups.add(r.key() + " by " + was + " and " + id);
                        }
                        if (!rs.isEmpty()) {
                            try {
                                c.commitSync();
                            } catch (RuntimeException e) {
                                // A commit refused in a rebalance (DIS.4701-4703)
                                // is the application's to live with; a record
                                // read again because of it fails the step below.
                                commitErrors.add(id + ": " + describe(e));
                            }
                        }
                    }
                } catch (Throwable e) {
                    failed.compareAndSet(null, e);
                }
            }, "poll-" + id);
            t.setDaemon(true);
            ts.add(t);
            t.start();
        }
        String result;
        try {
            long start = System.nanoTime();
            long deadline = start + TimeUnit.SECONDS.toNanos(90);
            while (true) {
                if (failed.get() != null) throw new IllegalStateException("a consumer failed", failed.get());
                Set<Integer> a = assigned.get(ids[0]), b = assigned.get(ids[1]);
                Set<Integer> both = new HashSet<>(a);
                both.retainAll(b);
                if (!a.isEmpty() && !b.isEmpty() && both.isEmpty() && a.size() + b.size() == PARTITIONS) break;
                check(System.nanoTime() < deadline, "after 90 s the assignments are %s and %s, want disjoint and covering %d partitions", a, b, PARTITIONS);
                Thread.sleep(200);
            }
            long stable = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            check(readBy.isEmpty(), "read %d records before any was produced", readBy.size());
            Map<Integer, long[]> put = adapterPut(stream, from, n);
            deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (readBy.size() < n && failed.get() == null && System.nanoTime() < deadline) Thread.sleep(100);
            Thread.sleep(1500); // a record read twice shows in this time
            if (failed.get() != null) throw new IllegalStateException("a consumer failed", failed.get());
            check(dups.isEmpty(), "read twice: %s; refused commits: %s", dups.subList(0, Math.min(3, dups.size())), commitErrors);
            for (int i = from; i < from + n; i++) check(readBy.containsKey(key(i)), "%s (p%d@%d) never read; %d of %d read", key(i), put.get(i)[0], put.get(i)[1], readBy.size(), n);
            check(readBy.size() == n, "%d records read, %d produced", readBy.size(), n);
            int byA = 0;
            for (String v : readBy.values()) if (v.startsWith(ids[0] + "@")) byA++;
            result = String.format("%s and %s subscribed: assigned %s and %s (stable after %.1f s); of %d records produced after, they read %d and %d, each exactly once, committing%s",
                    ids[0], ids[1], assigned.get(ids[0]), assigned.get(ids[1]), stable / 1000.0, n, byA, n - byA,
                    commitErrors.isEmpty() ? "" : " (refused commits: " + commitErrors + ")");
        } finally {
            stop.v = true;
            for (Thread t : ts) t.join(30000);
            for (DISKafkaConsumer<String, String> c : cs) c.close();
        }
        return result;
    }

    static class Flag {
        volatile boolean v;
    }

    // ---- dis-interop helpers

    static void printRanges(String stream) {
        for (Map.Entry<Integer, long[]> e : ranges(sdk("json"), stream).entrySet()) {
            emit("##OFF", json("partition", e.getKey(), "offset", e.getValue()[0], "end", e.getValue()[1]));
        }
    }

    static void sdkReadAll(String stream) {
        DISClient c = sdk("json");
        for (Map.Entry<Integer, long[]> e : ranges(c, stream).entrySet()) {
            for (Read r : sdkRead(c, stream, null, e.getKey(), e.getValue()[0], e.getValue()[1], Integer.MAX_VALUE)) {
                rec(r.partition, r.seq, r.key, r.value);
            }
        }
    }

    static void adapterReadAll(String stream) {
        DISKafkaConsumer<String, String> c = new DISKafkaConsumer<>(adapterProps(null, null));
        try {
            c.assign(tps(stream));
            Map<TopicPartition, Long> end = c.endOffsets(tps(stream));
            c.seekToBeginning(tps(stream));
            long total = 0;
            for (Long v : end.values()) total += v;
            List<Read> got = pollUntil(c, (int) total, 60);
            check(got.size() == total, "read %d of %d records in 60 s", got.size(), total);
            for (Read r : got) rec(r.partition, r.seq, r.key, r.value);
        } finally {
            c.close();
        }
    }

    static void printPut(Map<Integer, long[]> put) {
        for (Map.Entry<Integer, long[]> e : put.entrySet()) rec((int) e.getValue()[0], e.getValue()[1], key(e.getKey()), value(e.getKey()));
    }

    static void sdkCheckpoints(String stream, String app) {
        DISClient c = sdk("json");
        for (int p = 0; p < PARTITIONS; p++) emit("##OFF", json("partition", p, "offset", checkpoint(c, stream, app, p)));
    }

    static void adapterCommitted(String stream, String group) {
        DISKafkaConsumer<String, String> c = new DISKafkaConsumer<>(adapterProps(group, null));
        try {
            c.assign(tps(stream));
            for (TopicPartition tp : tps(stream)) {
                OffsetAndMetadata om = c.committed(tp);
                emit("##OFF", json("partition", tp.partition(), "offset", om == null ? -1 : om.offset()));
            }
        } finally {
            c.close();
        }
    }

    static void adapterCommit(String stream, String group, String spec) {
        DISKafkaConsumer<String, String> c = new DISKafkaConsumer<>(adapterProps(group, null));
        try {
            c.assign(tps(stream));
            c.poll(100); // creates the app (the adapter's first poll)
            Map<TopicPartition, OffsetAndMetadata> m = new HashMap<>();
            for (String kv : spec.split(",")) {
                String[] f = kv.split("=");
                m.put(new TopicPartition(stream, Integer.parseInt(f[0])), new OffsetAndMetadata(Long.parseLong(f[1])));
            }
            c.commitSync(m);
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : m.entrySet()) emit("##OFF", json("partition", e.getKey().partition(), "offset", e.getValue().offset()));
        } finally {
            c.close();
        }
    }

    static String javaVersion() {
        return "Java " + System.getProperty("java.version");
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: DisCompat sdk|adapter|sdk-describe|sdk-read|adapter-read|sdk-put|adapter-put|sdk-checkpoints|adapter-committed|adapter-commit ARGS");
            System.exit(2);
        }
        int code = 0;
        try {
            switch (args[0]) {
                case "sdk": sdkRow(args[1], args[2], args[3]); break;
                case "adapter": adapterRow(args[1], args[2]); break;
                case "sdk-describe": printRanges(args[1]); break;
                case "sdk-read": sdkReadAll(args[1]); break;
                case "adapter-read": adapterReadAll(args[1]); break;
                case "sdk-put": printPut(sdkPut(sdk("json"), args[1], Integer.parseInt(args[2]), Integer.parseInt(args[3]))); break;
                case "adapter-put": printPut(adapterPut(args[1], Integer.parseInt(args[2]), Integer.parseInt(args[3]))); break;
                case "sdk-checkpoints": sdkCheckpoints(args[1], args[2]); break;
                case "adapter-committed": adapterCommitted(args[1], args[2]); break;
                case "adapter-commit": adapterCommit(args[1], args[2], args[3]); break;
                default:
                    System.err.println("unknown command " + args[0]);
                    code = 2;
            }
        } catch (Throwable e) {
            System.err.println("DisCompat " + args[0] + ": " + describe(e));
            e.printStackTrace();
            code = 1;
        }
        System.out.flush();
        // The SDK's and the adapter's thread pools are not all daemons.
        System.exit(code);
    }
}
