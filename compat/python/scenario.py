"""The compatibility scenario for kafka-python and confluent-kafka-python.

Run by compat/cmd/compat with Debian's /usr/bin/python3 (python3-kafka,
python3-confluent-kafka) and with a virtualenv holding the newest releases
from PyPI:

    python scenario.py --lib kafka-python|confluent-kafka --name NAME \
        --broker HOST:PORT --topic T --group G [--txn]

With --txn it also runs the step "transactions" (transactions.md): a
transactional producer commits, aborts and commits again, and
read_committed and read_uncommitted consumers read what they must.

It prints the same ##STEP / ##INFO lines as the Go scenarios
(compat/internal/scen), and makes the same checks.
"""

import argparse
import json
import os
import sys
import threading
import time
import traceback

N = 1000
HALF = 500
PARTITIONS = 3
ADMIN_TIMEOUT = 20
CONSUME_TIMEOUT = 30


def security_config():
    """librdkafka properties of a SASL or TLS row of the matrix: the driver
    sets COMPAT_SECURITY_PROTOCOL and the rest (compat/internal/scen
    security.go); empty for PLAINTEXT."""
    proto = os.environ.get("COMPAT_SECURITY_PROTOCOL", "PLAINTEXT") or "PLAINTEXT"
    if proto == "PLAINTEXT":
        return {}
    c = {"security.protocol": proto}
    if proto.startswith("SASL_"):
        c["sasl.mechanisms"] = os.environ["COMPAT_SASL_MECHANISM"]
        c["sasl.username"] = os.environ["COMPAT_SASL_USERNAME"]
        c["sasl.password"] = os.environ["COMPAT_SASL_PASSWORD"]
    if proto in ("SSL", "SASL_SSL"):
        c["ssl.ca.location"] = os.environ["COMPAT_SSL_CA_FILE"]
    return c


def kafka_python_security():
    """security_config() as kafka-python's keyword arguments."""
    c = security_config()
    if not c:
        return {}
    kw = {"security_protocol": c["security.protocol"]}
    if "sasl.mechanisms" in c:
        kw.update(sasl_mechanism=c["sasl.mechanisms"], sasl_plain_username=c["sasl.username"],
                  sasl_plain_password=c["sasl.password"])
    if "ssl.ca.location" in c:
        kw["ssl_cafile"] = c["ssl.ca.location"]
    return kw


def emit(kind, obj):
    sys.stdout.write("%s %s\n" % (kind, json.dumps(obj)))
    sys.stdout.flush()


def report(step, status, detail):
    emit("##STEP", {"step": step, "status": status, "detail": detail})


def info(key, value):
    emit("##INFO", {"key": key, "value": value})


class Fail(Exception):
    pass


class NA(Exception):
    pass


def with_timeout(fn, seconds, what):
    """Runs fn in a daemon thread: some clients block forever (kafka-python's
    poll waits for a coordinator without a deadline)."""
    box = {}

    def target():
        try:
            box["ok"] = fn()
        except BaseException as e:  # handed to the caller
            box["err"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        raise Fail("%s: no answer within %ds (the client blocked)" % (what, seconds))
    if "err" in box:
        raise box["err"]
    return box["ok"]


def run(step, fn, timeout=60):
    try:
        detail = with_timeout(fn, timeout, step)
    except NA as e:
        report(step, "na", str(e))
        return False
    except Exception as e:  # the failing assertion, or the client's error
        msg = "%s: %s" % (type(e).__name__, e) if not isinstance(e, Fail) else str(e)
        sys.stderr.write(traceback.format_exc())
        report(step, "fail", msg)
        return False
    report(step, "pass", detail)
    return True


def key(i):
    return "key-%04d" % i


def value(i):
    return "value-%04d" % i


def headers(i, client):
    return [("idx", str(i)), ("client", client)]


def dec(b):
    if b is None:
        return None
    return b.decode() if isinstance(b, (bytes, bytearray)) else str(b)


def check(r, client):
    p, o, k, v, hs = r
    if not k or not k.startswith("key-"):
        raise Fail("p%d@%d: key %r is not key-NNNN" % (p, o, k))
    i = int(k[4:])
    if v != value(i):
        raise Fail("p%d@%d: key %s has value %r, want %r" % (p, o, k, v, value(i)))
    for hk, hv in headers(i, client):
        if hs.get(hk) != hv:
            raise Fail("p%d@%d: key %s header %r = %r, want %r; headers %r" % (p, o, k, hk, hs.get(hk), hv, hs))


def check_first(recs, client):
    seen, nxt = set(), {}
    for r in recs:
        check(r, client)
        p, o, k = r[0], r[1], r[2]
        if k in seen:
            raise Fail("key %s consumed twice (p%d@%d)" % (k, p, o))
        seen.add(k)
        if o != nxt.get(p, 0):
            raise Fail("partition %d: consumed offset %d, want %d (the group started at the earliest offset)" % (p, o, nxt.get(p, 0)))
        nxt[p] = o + 1


def committed_of(recs):
    c = {}
    for p, o, _, _, _ in recs:
        c[p] = max(c.get(p, 0), o + 1)
    return c


def fmt_offsets(m):
    return " ".join("p%d=%d" % (p, m[p]) for p in sorted(m))


def covers(first, second, n):
    return len({r[2] for r in first} | {r[2] for r in second}) >= n


def check_resume(first, committed, second, n, client):
    seen = {r[2] for r in first}
    nxt, started = {}, set()
    for r in second:
        check(r, client)
        p, o, k = r[0], r[1], r[2]
        if p not in started:
            started.add(p)
            if o != committed.get(p, 0):
                raise Fail("partition %d: resumed at offset %d, committed offset is %d" % (p, o, committed.get(p, 0)))
        elif o != nxt[p]:
            raise Fail("partition %d: offset %d after %d (gap or rewind)" % (p, o, nxt[p] - 1))
        nxt[p] = o + 1
        if k in seen:
            raise Fail("key %s (p%d@%d) read again after it was committed" % (k, p, o))
        seen.add(k)
    missing = [i for i in range(n) if key(i) not in seen]
    if missing:
        raise Fail("%d of %d records never read by either consumer (first missing: %s)" % (len(missing), n, key(missing[0])))


def check_committed_at_end(committed, ends):
    if not ends:
        raise Fail("no end offsets")
    for p in sorted(ends):
        if p not in committed:
            raise Fail("partition %d: no committed offset, end offset %d" % (p, ends[p]))
        if committed[p] != ends[p]:
            raise Fail("partition %d: committed offset %d, end offset %d" % (p, committed[p], ends[p]))


# ---------------------------------------------------------------- kafka-python


class KafkaPython:
    def __init__(self, a):
        import kafka

        self.k = kafka
        self.a = a
        self.sec = kafka_python_security()
        info("version", "kafka-python %s (%s)" % (kafka.__version__, sys.executable))

    def create(self, topic=None):
        from kafka.admin import KafkaAdminClient, NewTopic

        topic = topic or self.a.topic
        adm = KafkaAdminClient(bootstrap_servers=self.a.broker, **self.sec, request_timeout_ms=ADMIN_TIMEOUT * 1000)
        try:
            resp = adm.create_topics([NewTopic(topic, PARTITIONS, 1)])
            errs = getattr(resp, "topic_errors", None) or getattr(resp, "topics", None) or []
            for e in errs:
                if e[1] != 0:
                    raise Fail("create_topics: %r" % (e,))
        finally:
            adm.close()
        c = self.k.KafkaConsumer(bootstrap_servers=self.a.broker, **self.sec)
        try:
            parts = c.partitions_for_topic(topic)
        finally:
            c.close()
        if not parts or len(parts) != PARTITIONS:
            raise Fail("partitions_for_topic after create: %r, want %d" % (parts, PARTITIONS))
        return "KafkaAdminClient.create_topics made %d partitions" % PARTITIONS

    def produce(self):
        p = self.k.KafkaProducer(bootstrap_servers=self.a.broker, **self.sec)
        try:
            futs = [p.send(self.a.topic, key=key(i).encode(), value=value(i).encode(),
                           headers=[(hk, hv.encode()) for hk, hv in headers(i, self.a.name)]) for i in range(N)]
            p.flush(60)
            for f in futs:
                f.get(timeout=60)
        finally:
            p.close()
        return "%d records acknowledged (default acks=1)" % N

    def consume(self, enough):
        from kafka.structs import TopicPartition, OffsetAndMetadata

        c = self.k.KafkaConsumer(self.a.topic, bootstrap_servers=self.a.broker, **self.sec, group_id=self.a.group,
                                 auto_offset_reset="earliest", enable_auto_commit=False)
        out = []
        deadline = time.time() + CONSUME_TIMEOUT
        try:
            while not enough(out) and time.time() < deadline:
                for tp, msgs in c.poll(timeout_ms=500).items():
                    for m in msgs:
                        if enough(out):
                            break
                        hs = {hk: dec(hv) for hk, hv in (m.headers or [])}
                        out.append((m.partition, m.offset, dec(m.key), dec(m.value), hs))
            if not enough(out):
                return out, "timed out after %ds with %d records" % (CONSUME_TIMEOUT, len(out))
            offs = {}
            for p, o in committed_of(out).items():
                try:
                    om = OffsetAndMetadata(o, "", -1)  # kafka-python 2.1+: leader_epoch
                except TypeError:
                    om = OffsetAndMetadata(o, "")
                offs[TopicPartition(self.a.topic, p)] = om
            c.commit(offs)
        finally:
            c.close(autocommit=False)
        return out, None

    def transact(self, topic, txns):
        """Sends each (values, commit) of txns as one transaction over the
        topic's partitions, committed or aborted."""
        p = self.k.KafkaProducer(bootstrap_servers=self.a.broker, **self.sec, transactional_id=self.a.name + "-txn")
        try:
            p.init_transactions()
            for vals, commit in txns:
                p.begin_transaction()
                for i, v in enumerate(vals):
                    p.send(topic, value=v.encode(), partition=i % PARTITIONS)
                if commit:
                    p.commit_transaction()
                else:
                    p.flush()  # abort drops what is not sent yet
                    p.abort_transaction()
        finally:
            p.close()

    def read(self, topic, committed, want):
        """Reads topic from the start with read_committed (or not) until it
        has want values or CONSUME_TIMEOUT passes, then 2 s more."""
        from kafka.structs import TopicPartition

        c = self.k.KafkaConsumer(bootstrap_servers=self.a.broker, **self.sec, auto_offset_reset="earliest",
                                 enable_auto_commit=False,
                                 isolation_level="read_committed" if committed else "read_uncommitted")
        out = []
        try:
            c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
            c.seek_to_beginning()
            deadline, extra = time.time() + CONSUME_TIMEOUT, None
            while time.time() < deadline and (extra is None or time.time() < extra):
                for tp, msgs in c.poll(timeout_ms=300).items():
                    out.extend(dec(m.value) for m in msgs)
                if len(out) >= want and extra is None:
                    extra = time.time() + 2
        finally:
            c.close(autocommit=False)
        return sorted(out)

    def describe(self):
        from kafka.admin import KafkaAdminClient
        from kafka.structs import TopicPartition

        adm = KafkaAdminClient(bootstrap_servers=self.a.broker, **self.sec, request_timeout_ms=ADMIN_TIMEOUT * 1000)
        try:
            if hasattr(adm, "describe_consumer_groups"):  # kafka-python 2.x
                g = adm.describe_consumer_groups([self.a.group])[0]
                state = getattr(g, "state", "?")
                members = len(getattr(g, "members", []) or [])
                offs = adm.list_consumer_group_offsets(self.a.group)
            else:  # kafka-python 3.x renamed them, and returns dicts
                g = adm.describe_groups([self.a.group])[self.a.group]
                state = g.get("group_state", g.get("state", "?"))
                members = len(g.get("members") or [])
                offs = adm.list_group_offsets({self.a.group: None})[self.a.group]
        finally:
            adm.close()
        committed = {tp.partition: om.offset for tp, om in offs.items() if tp.topic == self.a.topic and om.offset >= 0}
        c = self.k.KafkaConsumer(bootstrap_servers=self.a.broker, **self.sec)
        try:
            parts = c.partitions_for_topic(self.a.topic) or []
            ends = {tp.partition: o for tp, o in c.end_offsets([TopicPartition(self.a.topic, p) for p in parts]).items()}
        finally:
            c.close()
        return state, members, committed, ends


# ----------------------------------------------------- confluent-kafka-python


class ConfluentPython:
    def __init__(self, a):
        import confluent_kafka

        self.ck = confluent_kafka
        self.a = a
        self.sec = security_config()
        v, lv = confluent_kafka.version(), confluent_kafka.libversion()
        v = v[0] if isinstance(v, tuple) else v  # a tuple in 1.x
        lv = lv[0] if isinstance(lv, tuple) else lv
        info("version", "confluent-kafka %s, librdkafka %s (%s)" % (v, lv, sys.executable))

    def create(self, topic=None):
        from confluent_kafka.admin import AdminClient, NewTopic

        topic = topic or self.a.topic
        adm = AdminClient({**self.sec, "bootstrap.servers": self.a.broker})
        fs = adm.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)],
                               request_timeout=ADMIN_TIMEOUT)
        for t, f in fs.items():
            f.result(timeout=ADMIN_TIMEOUT)
        md = adm.list_topics(topic, timeout=ADMIN_TIMEOUT)
        tm = md.topics.get(topic)
        if tm is None or tm.error is not None or len(tm.partitions) != PARTITIONS:
            raise Fail("metadata after create: %r, want %d partitions" % (tm and (tm.error, len(tm.partitions)), PARTITIONS))
        return "AdminClient.create_topics made %d partitions" % PARTITIONS

    def produce(self):
        p = self.ck.Producer({**self.sec, "bootstrap.servers": self.a.broker})
        errs, done = [], [0]

        def cb(err, msg):
            done[0] += 1
            if err is not None:
                errs.append((msg.key(), err))

        for i in range(N):
            while True:
                try:
                    p.produce(self.a.topic, key=key(i), value=value(i), headers=headers(i, self.a.name), on_delivery=cb)
                    break
                except BufferError:
                    p.poll(0.1)
        left = p.flush(60)
        if left:
            raise Fail("%d records still in the queue after flush(60)" % left)
        if errs:
            raise Fail("%d delivery errors, first: %r" % (len(errs), errs[0]))
        if done[0] != N:
            raise Fail("%d delivery reports, want %d" % (done[0], N))
        return "%d delivery reports without error" % N

    def consume(self, enough):
        TP = self.ck.TopicPartition
        c = self.ck.Consumer({**self.sec, "bootstrap.servers": self.a.broker, "group.id": self.a.group,
                              "auto.offset.reset": "earliest", "enable.auto.commit": False})
        out, last_err = [], None
        deadline = time.time() + CONSUME_TIMEOUT
        try:
            c.subscribe([self.a.topic])
            while not enough(out) and time.time() < deadline:
                m = c.poll(0.5)
                if m is None:
                    continue
                if m.error():
                    last_err = m.error()
                    continue
                hs = {hk: dec(hv) for hk, hv in (m.headers() or [])}
                out.append((m.partition(), m.offset(), dec(m.key()), dec(m.value()), hs))
            if not enough(out):
                return out, "timed out after %ds with %d records (last error: %s)" % (CONSUME_TIMEOUT, len(out), last_err)
            c.commit(offsets=[TP(self.a.topic, p, o) for p, o in committed_of(out).items()], asynchronous=False)
        finally:
            c.close()
        return out, None

    def transact(self, topic, txns):
        """Sends each (values, commit) of txns as one transaction over the
        topic's partitions, committed or aborted."""
        p = self.ck.Producer({**self.sec, "bootstrap.servers": self.a.broker, "transactional.id": self.a.name + "-txn"})
        p.init_transactions(ADMIN_TIMEOUT)
        for vals, commit in txns:
            p.begin_transaction()
            for i, v in enumerate(vals):
                p.produce(topic, value=v, partition=i % PARTITIONS)
            if commit:
                p.commit_transaction(ADMIN_TIMEOUT)
            else:
                p.flush(ADMIN_TIMEOUT)
                p.abort_transaction(ADMIN_TIMEOUT)

    def read(self, topic, committed, want):
        """Reads topic from the start with read_committed (or not) until it
        has want values or CONSUME_TIMEOUT passes, then 2 s more."""
        TP = self.ck.TopicPartition
        c = self.ck.Consumer({**self.sec, "bootstrap.servers": self.a.broker, "group.id": self.a.group + "-txn-read",
                              "enable.auto.commit": False,
                              "isolation.level": "read_committed" if committed else "read_uncommitted"})
        out = []
        try:
            c.assign([TP(topic, p, self.ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])
            deadline, extra = time.time() + CONSUME_TIMEOUT, None
            while time.time() < deadline and (extra is None or time.time() < extra):
                m = c.poll(0.3)
                if m is not None and not m.error():
                    out.append(dec(m.value()))
                if len(out) >= want and extra is None:
                    extra = time.time() + 2
        finally:
            c.close()
        return sorted(out)

    def describe(self):
        from confluent_kafka.admin import AdminClient

        adm = AdminClient({**self.sec, "bootstrap.servers": self.a.broker})
        TP = self.ck.TopicPartition
        md = adm.list_topics(self.a.topic, timeout=ADMIN_TIMEOUT)
        parts = sorted(md.topics[self.a.topic].partitions)
        if hasattr(adm, "describe_consumer_groups"):
            g = adm.describe_consumer_groups([self.a.group], request_timeout=ADMIN_TIMEOUT)[self.a.group].result(timeout=ADMIN_TIMEOUT)
            state, members = str(g.state), len(g.members)
        else:  # confluent-kafka 1.x: ListGroups + DescribeGroups
            gs = adm.list_groups(self.a.group, timeout=ADMIN_TIMEOUT)
            if len(gs) != 1:
                raise Fail("list_groups(%s): %r" % (self.a.group, gs))
            state, members = gs[0].state, len(gs[0].members)
        c = self.ck.Consumer({**self.sec, "bootstrap.servers": self.a.broker, "group.id": self.a.group, "enable.auto.commit": False})
        try:
            committed = {}
            for tp in c.committed([TP(self.a.topic, p) for p in parts], timeout=ADMIN_TIMEOUT):
                if tp.error is not None:
                    raise Fail("committed() partition %d: %s" % (tp.partition, tp.error))
                if tp.offset >= 0:
                    committed[tp.partition] = tp.offset
            ends = {}
            for p in parts:
                ends[p] = c.get_watermark_offsets(TP(self.a.topic, p), timeout=ADMIN_TIMEOUT)[1]
        finally:
            c.close()
        return state, members, committed, ends


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True, choices=["kafka-python", "confluent-kafka"])
    ap.add_argument("--name", required=True)
    ap.add_argument("--broker", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--txn", action="store_true", help='also run the step "transactions"')
    a = ap.parse_args()
    try:
        cl = KafkaPython(a) if a.lib == "kafka-python" else ConfluentPython(a)
    except Exception as e:
        for s in ("create", "produce", "consume", "resume", "describe") + (("transactions",) if a.txn else ()):
            report(s, "fail", "import %s with %s: %s" % (a.lib, sys.executable, e))
        return

    run("create", cl.create)
    run("produce", cl.produce)

    state = {}

    def consume():
        t0 = time.time()
        recs, err = cl.consume(lambda r: len(r) >= HALF)
        state["first"] = recs
        check_first(recs, a.name)
        if err:
            raise Fail("group consumer processed %d of %d records: %s" % (len(recs), HALF, err))
        return "processed %d records in group %s and committed %s (%.1fs)" % (len(recs), a.group, fmt_offsets(committed_of(recs)), time.time() - t0)

    if run("consume", consume, CONSUME_TIMEOUT + 15):
        first = state["first"]
        committed = committed_of(first)

        def resume():
            recs, err = cl.consume(lambda r: covers(first, r, N))
            try:
                check_resume(first, committed, recs, N, a.name)
            except Fail as e:
                raise Fail("%s (consumer: %s)" % (e, err) if err else str(e))
            if err:
                raise Fail(err)
            return "new consumer resumed at %s and read the other %d records" % (fmt_offsets(committed), len(recs))

        run("resume", resume, CONSUME_TIMEOUT + 15)
    else:
        report("resume", "skip", "needs a committed first consumer (consume failed)")

    def describe():
        st, members, committed, ends = cl.describe()
        # Every member has left: Kafka's group is Empty.
        if str(st).rsplit(".", 1)[-1].lower() != "empty" or members:
            raise Fail("group state %r with %d members after every consumer closed, want 'Empty' with 0" % (st, members))
        try:
            check_committed_at_end(committed, ends)
        except Fail as e:
            raise Fail("group state %r: %s" % (st, e))
        return "group state %r, %d members, committed %s = end offsets" % (st, members, fmt_offsets(committed))

    run("describe", describe, ADMIN_TIMEOUT + 10)

    def transactions():
        topic = a.topic + ".txn"
        cl.create(topic)
        c1 = ["c1-%02d" % i for i in range(9)]
        ab = ["ab-%02d" % i for i in range(7)]
        c2 = ["c2-%02d" % i for i in range(5)]
        cl.transact(topic, [(c1, True), (ab, False), (c2, True)])
        committed, everything = sorted(c1 + c2), sorted(c1 + ab + c2)
        got = cl.read(topic, True, len(committed))
        if got != committed:
            raise Fail("read_committed read %d values %s, want the %d committed ones" % (len(got), got, len(committed)))
        got = cl.read(topic, False, len(everything))
        if got != everything:
            raise Fail("read_uncommitted read %d values %s, want all %d" % (len(got), got, len(everything)))
        return ("3 transactions (commit %d, abort %d, commit %d records): read_committed read the %d committed, "
                "read_uncommitted all %d" % (len(c1), len(ab), len(c2), len(committed), len(everything)))

    if a.txn:
        run("transactions", transactions, 2 * CONSUME_TIMEOUT + 4 * ADMIN_TIMEOUT)


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)  # threads of a blocked client must not keep the process alive
