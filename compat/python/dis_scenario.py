"""The compatibility scenario for the DIS Python SDK (huaweicloud-sdk-python-dis).

Run by compat/cmd/compat (rows dis-python-sdk and dis-python-sdk-protobuf,
backend dis only) with the compat virtualenv's Python, which compat/setup
gave the newest huaweicloud-sdk-python-dis from PyPI:

    python dis_scenario.py --name NAME [--protobuf] --topic T --group G

The SDK talks to the dislocal behind the scenario's disgw, not to disgw:
its endpoint, AK/SK and project id come from the environment
(DISGW_COMPAT_DIS_ENDPOINT, _AK, _SK, _PROJECT). The stream is named as
disgw names topic T's stream, the app is group G. The SDK is used
unchanged, at its defaults (derived-key signatures, JSON bodies), and with
--protobuf in its protobuf body mode (bodySerializeType="protobuf": the
PutRecords request and answer and the GetRecords answer in protobuf).

It prints the same ##STEP / ##INFO lines as the Kafka scenarios, one per
column:

  create    createStream (3 partitions, COMMON, BLOB), then describeStream
            shows 3 ACTIVE partitions
  produce   putRecords of 1,000 records key-NNNN / value-NNNN with
            partition_key key-NNNN: none failed, each answer names a
            partition, every partition got some, and each partition's
            sequence numbers are 0, 1, 2, ... in the request's order
  consume   createApp (the group), getCursor TRIM_HORIZON of each partition,
            getRecords (limit 100) in turn until 500 records are processed,
            then commitCheckpoint LAST_READ with the next sequence number of
            each partition; every record's data, partition key, partition
            and sequence number as putRecords answered, no record twice,
            sequence numbers 0, 1, 2, ... without a gap
  resume    a fresh client reads getCheckpoint of each partition, reads
            from getCursor AT_SEQUENCE_NUMBER there to the end and commits
            the end: it starts exactly at the checkpoint, reads no record
            the first read, skips none, and the two read all 1,000
  describe  describeStream's sequence_number_range of each partition ends
            at the partition's end (the records putRecords put there) and
            getCheckpoint equals it
"""

import argparse
import os
import sys
import time

# The SDK's generated record_pb2.py predates protobuf 4: with the newest
# protobuf (which pip installs for it) it only imports on the pure-Python
# implementation. Only the protobuf body mode imports it.
os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scenario import Fail, info, key, report, run, value  # noqa: E402

N = 1000
HALF = 500
PARTITIONS = 3
READ_LIMIT = 100
STEP_TIMEOUT = 50


class Observer(object):
    """Notes the content types of the SDK's requests and answers (it sends
    every request through requests.request), to show which went in
    protobuf. It changes nothing the SDK sends or receives."""

    def __init__(self):
        import requests

        self.seen = {}
        orig = requests.request

        def observed(method, url, **kw):
            r = orig(method, url, **kw)
            path = url.split("://", 1)[-1].split("/", 1)[-1]
            op = "%s %s" % (method, "/".join(path.rstrip("/").split("/")[2:3]))
            req_ct = (kw.get("headers") or {}).get("Content-Type", "")
            self.seen.setdefault(op, set()).add((req_ct.split(";")[0], r.headers.get("Content-Type", "").split(";")[0]))
            return r

        requests.request = observed

    def types(self, op):
        return sorted(self.seen.get(op, ()))


def stream_of(topic):
    # disbackend.StreamNameForTopic for names of at most 64 characters.
    return topic.replace(".", "_")


def pid(i):
    return "shardId-%010d" % i


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", required=True)
    ap.add_argument("--protobuf", action="store_true")
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    args = ap.parse_args()

    endpoint = os.environ.get("DISGW_COMPAT_DIS_ENDPOINT", "")
    ak, sk = os.environ.get("DISGW_COMPAT_DIS_AK", ""), os.environ.get("DISGW_COMPAT_DIS_SK", "")
    project = os.environ.get("DISGW_COMPAT_DIS_PROJECT", "")
    if not endpoint:
        for s in ("create", "produce", "consume", "resume", "describe"):
            report(s, "fail", "no DISGW_COMPAT_DIS_ENDPOINT: run with compat -backend dis")
        return

    import importlib.metadata as md
    from dis_sdk_python.com.huaweicloud.dis.sdk.python.client.disclient import disclient

    obs = Observer()
    mode = "protobuf" if args.protobuf else ""
    info("version", "huaweicloud-sdk-python-dis %s, protobuf %s (%s), body %s" % (
        md.version("huaweicloud-sdk-python-dis"), md.version("protobuf"),
        os.environ["PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"], mode or "JSON"))

    def client():
        return disclient(endpoint=endpoint, ak=ak, sk=sk, projectid=project, region="cn-north-4",
                         bodySerializeType=mode)

    stream, app = stream_of(args.topic), args.group
    cl = client()
    state = {}

    def create():
        r = cl.createStream(stream, PARTITIONS, "BLOB", "COMMON")
        if r.statusCode != 201:
            raise Fail("createStream: status %s, want 201" % r.statusCode)
        d = cl.describeStream(stream)
        active = [p.get("partition_id") for p in d.partitions if p.get("status") == "ACTIVE"]
        if active != [pid(i) for i in range(PARTITIONS)]:
            raise Fail("describeStream after createStream: partitions %r, want %d ACTIVE" % (d.partitions, PARTITIONS))
        return "createStream %s made %d partitions (describeStream: %s, %s)" % (stream, PARTITIONS, d.status, d.streamType)

    def produce():
        recs = [{"data": value(i), "partition_key": key(i)} for i in range(N)]
        r = cl.putRecords(stream, recs)
        if r.failedRecordCount != 0:
            raise Fail("putRecords: %d of %d failed: %r" % (r.failedRecordCount, N, [x for x in r.recordResult if x.get("error_code")][:3]))
        if len(r.recordResult) != N:
            raise Fail("putRecords: %d results for %d records" % (len(r.recordResult), N))
        where, nxt = {}, {}
        for i, res in enumerate(r.recordResult):
            p, sn = res.get("partition_id"), res.get("sequence_number")
            if p not in [pid(j) for j in range(PARTITIONS)] or sn is None:
                raise Fail("putRecords: record %d answered partition %r sequence number %r" % (i, p, sn))
            if int(sn) != nxt.get(p, 0):
                raise Fail("putRecords: record %d got %s@%s, want sequence number %d (0, 1, 2, ... per partition)" % (i, p, sn, nxt.get(p, 0)))
            nxt[p] = int(sn) + 1
            where[key(i)] = (p, int(sn))
        if len(nxt) != PARTITIONS:
            raise Fail("putRecords: the keys went to %d partitions, want %d" % (len(nxt), PARTITIONS))
        state["where"], state["ends"] = where, nxt
        detail = "putRecords of %d keyed records, none failed, %s" % (N, fmt(nxt))
        if args.protobuf:
            detail += "; %s" % wire(obs, "POST records", True)
        return detail

    def check_rec(p, r, seen):
        k, d, sn = r.get("partitionKey"), r.get("data"), r.get("sequence_number")
        if isinstance(d, bytes):
            d = d.decode("utf-8")
        if not k or not k.startswith("key-"):
            raise Fail("%s@%s: partition key %r is not key-NNNN" % (p, sn, k))
        i = int(k[4:])
        if d != value(i):
            raise Fail("%s@%s: key %s has data %r, want %r" % (p, sn, k, d, value(i)))
        if state["where"].get(k) != (p, int(sn)):
            raise Fail("%s@%s: key %s, which putRecords put at %s@%d" % ((p, sn, k) + state["where"][k]))
        if k in seen:
            raise Fail("key %s read twice (%s@%s)" % (k, p, sn))
        seen.add(k)

    def consume():
        cl.createApp(app)
        cursors = {}
        for i in range(PARTITIONS):
            cursors[pid(i)] = cl.getCursor(stream, pid(i), "TRIM_HORIZON").cursor
        seen, nxt, done = set(), {}, 0
        while done < HALF:
            progressed = False
            for i in range(PARTITIONS):
                p = pid(i)
                if done >= HALF:
                    break
                r = cl.getRecords(cursors[p], limit=READ_LIMIT)
                cursors[p] = r.nextPartitionCursor
                for rec in r.recordResult:
                    if done >= HALF:
                        break  # read, not processed: the checkpoint is before it
                    check_rec(p, rec, seen)
                    if int(rec["sequence_number"]) != nxt.get(p, 0):
                        raise Fail("%s: read sequence number %s, want %d (from TRIM_HORIZON, no gap)" % (p, rec["sequence_number"], nxt.get(p, 0)))
                    nxt[p] = int(rec["sequence_number"]) + 1
                    done += 1
                    progressed = True
            if not progressed:
                raise Fail("getRecords returned nothing more after %d of %d records" % (done, HALF))
        for p, sn in sorted(nxt.items()):
            cl.commitCheckpoint(stream, app, p, str(sn))
        state["first"], state["committed"] = seen, nxt
        detail = "createApp %s, getRecords processed %d records, commitCheckpoint LAST_READ %s" % (app, done, fmt(nxt))
        if args.protobuf:
            detail += "; %s" % wire(obs, "GET records", False)
        return detail

    def resume():
        c2 = client()
        seen = set(state["first"])
        starts, read = {}, 0
        for i in range(PARTITIONS):
            p = pid(i)
            cp = c2.getCheckpoint(stream, app, p).seqNumber
            if cp is None or int(cp) != state["committed"].get(p, 0):
                raise Fail("%s: getCheckpoint %r, committed %d" % (p, cp, state["committed"].get(p, 0)))
            starts[p] = int(cp)
            cur = c2.getCursor(stream, p, "AT_SEQUENCE_NUMBER", startSeq=str(cp)).cursor
            nxt = int(cp)
            while True:
                r = c2.getRecords(cur, limit=READ_LIMIT)
                if not r.recordResult:
                    break
                cur = r.nextPartitionCursor
                for rec in r.recordResult:
                    if int(rec["sequence_number"]) != nxt:
                        raise Fail("%s: read sequence number %s, want %d (from the checkpoint, no gap)" % (p, rec["sequence_number"], nxt))
                    check_rec(p, rec, seen)
                    nxt += 1
                    read += 1
            if nxt != state["ends"][p]:
                raise Fail("%s: read to %d, putRecords put %d there" % (p, nxt, state["ends"][p]))
            c2.commitCheckpoint(stream, app, p, str(nxt))
        missing = [i for i in range(N) if key(i) not in seen]
        if missing:
            raise Fail("%d of %d records read by neither client (first missing: %s)" % (len(missing), N, key(missing[0])))
        return "fresh client resumed at getCheckpoint %s and read the other %d records; committed the end" % (fmt(starts), read)

    def describe():
        d = cl.describeStream(stream)
        hi, cps = {}, {}
        for p in d.partitions:
            lo_hi = p.get("sequence_number_range", "").strip("[]").split(":")
            hi[p["partition_id"]] = int(lo_hi[-1])
            cps[p["partition_id"]] = int(cl.getCheckpoint(stream, app, p["partition_id"]).seqNumber)
        if hi != state["ends"]:
            raise Fail("describeStream sequence_number_range ends %s, putRecords put %s" % (fmt(hi), fmt(state["ends"])))
        if cps != state["ends"]:
            raise Fail("getCheckpoint %s, end %s" % (fmt(cps), fmt(state["ends"])))
        return "describeStream ranges end at %s = getCheckpoint" % fmt(hi)

    ok = run("create", create, STEP_TIMEOUT)
    ok = ok and run("produce", produce, STEP_TIMEOUT)
    if not ok:
        for s in ("consume", "resume", "describe"):
            report(s, "skip", "needs the records (create or produce failed)")
        return
    if run("consume", consume, STEP_TIMEOUT):
        run("resume", resume, STEP_TIMEOUT)
    else:
        report("resume", "skip", "needs a committed first read (consume failed)")
    if "committed" in state:
        run("describe", describe, STEP_TIMEOUT)
    else:
        report("describe", "skip", "needs the checkpoints (consume failed)")


def fmt(m):
    return " ".join("p%d=%d" % (int(p.rsplit("-", 1)[-1]), v) for p, v in sorted(m.items()))


def wire(obs, op, sent):
    """Says in which content types op went, and fails unless in protobuf
    (the request for a PutRecords, the answer for both)."""
    types = obs.types(op)
    bad = [t for t in types if (sent and t[0] != "application/x-protobuf") or t[1] != "application/x-protobuf"]
    if not types or bad:
        raise Fail("%s in protobuf mode went as (request, answer) %r, want application/x-protobuf" % (op, types))
    return "%s: %s" % (op, ", ".join("%s -> %s" % t for t in types))


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)
