package gateway

// Fetch: v4-18.
//
// Version notes:
//   - v4: record batches, isolation level, last stable offset (= high
//     watermark: no transactions, and librdkafka reads read_committed by
//     default). v5: log start offset.
//   - v7: fetch sessions (KIP-227). We decline every session by answering
//     session id 0 (full responses); a non-zero session id, or an
//     incremental epoch without one, gets FETCH_SESSION_ID_NOT_FOUND.
//   - v9: current leader epoch (KIP-320): older than ours gets
//     FENCED_LEADER_EPOCH, newer gets UNKNOWN_LEADER_EPOCH. Ours is 0 on
//     one node, the answering view's cluster epoch with several
//     (cluster.go); any node serves every partition's fetches, as DIS
//     holds every record (docs/cluster.md §5), so NOT_LEADER_OR_FOLLOWER
//     is never answered.
//   - v10: zstd; a zstd batch fetched below v10 gets
//     UNSUPPORTED_COMPRESSION_TYPE.
//   - v11: rack (ignored; no preferred read replica). v12: flexible, last
//     fetched epoch (no divergence: every epoch ends at the high
//     watermark, docs/cluster.md §5); with several nodes a
//     FENCED_LEADER_EPOCH partition carries its current leader and epoch.
//     v13: topics by id (UNKNOWN_TOPIC_ID). v15, v18: broker-only fields,
//     ignored. v16: the node endpoints of those leaders (KIP-951).
//
// Long poll: with fewer than min_bytes ready, the fetch waits up to
// max_wait_ms and is woken at once when the backend syncs new data. Only
// synced data is returned. KIP-74: only the first non-empty partition may
// exceed the size limits, and then by whole batches; a batch is never cut.
// An offset inside a stored batch returns the whole batch. Offsets below
// the log start or above the high watermark get OFFSET_OUT_OF_RANGE. As
// Kafka, a partition answered with an error has high watermark, last
// stable offset and log start offset -1; its aborted transactions are []
// for an unknown topic or partition, null for an error of the read.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
	"github.com/disgw/disgw/kafkawire/batch"
)

func init() { registerAPI(1, 4, 18, (*conn).handleFetch, (*conn).authorizeFetch) }

// authorizeFetch: a replica's fetch needs CLUSTER_ACTION, a consumer's
// READ on each topic. Refused topics are taken out of the request and
// answered TOPIC_AUTHORIZATION_FAILED on each partition; with one refused,
// the fetch does not wait (Kafka answers at once when a partition has an
// error).
func (c *conn) authorizeFetch(req *kafkawire.Request) (kmsg.Response, postAuth) {
	r := req.Body.(*kmsg.FetchRequest)
	replica := r.ReplicaID >= 0 || r.Version >= 15 && r.ReplicaState.ID >= 0
	replicaOK := replica && c.mayCluster(acl.OpClusterAction)
	var denied []kmsg.FetchResponseTopic
	kept := r.Topics[:0]
	for _, t := range r.Topics {
		name := c.topicName(t.Topic, t.TopicID)
		ok := name == "" || c.mayTopic(acl.OpRead, name)
		if replica {
			ok = replicaOK
		}
		if ok {
			kept = append(kept, t)
			continue
		}
		d := kmsg.NewFetchResponseTopic()
		d.Topic, d.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			dp := kmsg.NewFetchResponseTopicPartition()
			dp.Partition, dp.ErrorCode, dp.HighWatermark, dp.LastStableOffset, dp.LogStartOffset = p.Partition, errTopicAuth, -1, -1, -1
			dp.PreferredReadReplica = -1
			dp.RecordBatches = noRecords // empty, not null: librdkafka reads a null as MessageSetSize -1 and retries at once, forever
			dp.AbortedTransactions = noAborted
			d.Partitions = append(d.Partitions, dp)
		}
		denied = append(denied, d)
	}
	r.Topics = kept
	if len(denied) > 0 {
		r.MaxWaitMillis = 0
	}
	return nil, appendDenied(denied, func(r *kmsg.FetchResponse) *[]kmsg.FetchResponseTopic { return &r.Topics })
}

func (c *conn) handleFetch(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.FetchRequest)
	return reply{req: req, finish: func() (kmsg.Response, error) {
		resp := c.fetch(r)
		c.s.countFetched(r, resp)
		return resp, nil
	}}
}

var noRecords = []byte{}

// noAborted is an empty AbortedTransactions (v4+), not null: what Kafka
// sends on a read_committed fetch and on the partitions that KafkaApis
// refuses before reading (unknown topic or partition,
// FetchResponse.partitionResponse).
var noAborted = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}

func (c *conn) fetch(r *kmsg.FetchRequest) *kmsg.FetchResponse {
	resp := r.ResponseKind().(*kmsg.FetchResponse)
	if r.Version >= 7 && (r.SessionID != 0 || r.SessionEpoch != 0 && r.SessionEpoch != -1) {
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return resp
	}
	maxWait := time.Duration(max(r.MaxWaitMillis, 0)) * time.Millisecond
	deadline := time.Now().Add(maxWait)
	var timer *time.Timer
	// The response is capped by the broker's fetch.max.bytes whatever the
	// client asks; max_bytes 0 (or less) still gets the first batch
	// (KIP-74), as from Kafka.
	maxBytes := min(max(int(r.MaxBytes), 0), int(c.s.cfg.FetchMaxBytes))
	for {
		changed := c.s.backend.Changed()
		var lsoChanged <-chan struct{} // nil: never
		if r.IsolationLevel == 1 && c.s.txn != nil {
			lsoChanged = c.s.txn.Changed()
		}
		n, done := c.fillFetch(r, resp, c.takeFetchBudget(maxBytes))
		c.keepFetchBudget(n)
		if done || n >= int(r.MinBytes) || !time.Now().Before(deadline) {
			return resp
		}
		if timer == nil {
			timer = time.NewTimer(time.Until(deadline))
			defer timer.Stop()
		}
		select {
		case <-changed:
		case <-lsoChanged:
		case <-timer.C:
		case <-c.ctx.Done():
			return resp
		case <-c.s.closing:
			return resp
		}
	}
}

// fetchCostFactor is what a fetched record byte costs until its response
// is written: the store's read buffer, the response's copy of several
// batches, and the encoded response.
const fetchCostFactor = 3

// fetchReserveMaxBytes bounds the record bytes one Fetch round reserves
// before it reads: a read from DIS is an HTTP call, and a fetch holding
// much more through it (up to 112 MiB at first) left the other fetches and
// produces little; with this, about four large fetches read at once.
const fetchReserveMaxBytes = 8 << 20

// takeFetchBudget gives back what the previous round of this response
// held and takes, without waiting, fetchCostFactor times the record bytes
// the round may read: up to maxBytes, at most fetchReserveMaxBytes, at most
// what the request budget has free. It returns those record bytes. Under
// memory pressure a Fetch so returns less (down to the first batch,
// KIP-74) instead of waiting: the connection's pipelined requests may hold
// the budget it would wait for. Runs on the writer goroutine.
func (c *conn) takeFetchBudget(maxBytes int) int {
	c.s.budget.release(c.fetchCost)
	want := int64(min(maxBytes, fetchReserveMaxBytes))
	c.fetchCost = c.s.budget.takeUpTo(fetchCostFactor * want)
	grant := c.fetchCost / fetchCostFactor
	if grant < want {
		c.s.limitLog.hit("queued_max_request_bytes_fetch", "fetch response reduced: the request budget is full",
			zap.Int("fetch_max_bytes", maxBytes), zap.Int64("granted_bytes", grant))
	}
	return int(grant)
}

// keepFetchBudget keeps of the round's reservation what its n record bytes
// hold; a first batch larger than the grant (KIP-74) is charged as far as
// there is room. The writer gives it back once the response is written.
func (c *conn) keepFetchBudget(n int) {
	switch keep := fetchCostFactor * int64(n); {
	case keep < c.fetchCost:
		c.s.budget.release(c.fetchCost - keep)
		c.fetchCost = keep
	case keep > c.fetchCost:
		c.fetchCost += c.s.budget.takeUpTo(keep - c.fetchCost)
	}
}

// fillFetch (re)builds resp's topics from the backend, reading at most
// maxBytes record bytes (but the first batch, KIP-74). It returns the
// record bytes found and done=true when a partition has an error that
// should be returned at once.
func (c *conn) fillFetch(r *kmsg.FetchRequest, resp *kmsg.FetchResponse, maxBytes int) (total int, done bool) {
	s := c.s
	c.fetchBuf = c.fetchBuf[:0]
	resp.Topics = resp.Topics[:0]
	resp.Brokers = resp.Brokers[:0]
	epoch := s.currentEpoch()
	for i := range r.Topics {
		rt := &r.Topics[i]
		t := kmsg.NewFetchResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		var st *disbackend.Stream
		topicErr := int16(0)
		if r.Version >= 13 {
			if st = s.topics.getByID(rt.TopicID); st == nil {
				topicErr = kerr.UnknownTopicID.Code
			}
		} else if st = s.topics.get(rt.Topic); st == nil {
			topicErr = kerr.UnknownTopicOrPartition.Code
		}
		t.Partitions = make([]kmsg.FetchResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			p := &t.Partitions[j]
			*p = kmsg.NewFetchResponseTopicPartition()
			p.Partition = rp.Partition
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = -1, -1, -1
			p.RecordBatches = noRecords // empty, not null: kafka-python cannot read a null
			switch {
			case topicErr != 0:
				p.ErrorCode, done = topicErr, true
				p.AbortedTransactions = noAborted
				continue
			case rp.Partition < 0 || rp.Partition >= st.PartitionCount:
				p.ErrorCode, done = kerr.UnknownTopicOrPartition.Code, true
				p.AbortedTransactions = noAborted
				continue
			case r.Version >= 9 && rp.CurrentLeaderEpoch >= 0 && rp.CurrentLeaderEpoch < epoch:
				p.ErrorCode, done = kerr.FencedLeaderEpoch.Code, true
				c.fencedFetch(r, resp, p, st)
				continue
			case r.Version >= 9 && rp.CurrentLeaderEpoch > epoch:
				p.ErrorCode, done = kerr.UnknownLeaderEpoch.Code, true
				continue
			case r.IsolationLevel == 1 && !s.committedReadable(c.backendCtx(), st.Name, rp.Partition):
				p.ErrorCode, done = kerr.NotLeaderForPartition.Code, true
				continue
			}
			limit := min(int(rp.PartitionMaxBytes), maxBytes-total)
			first := total == 0 // KIP-74: the first non-empty partition may exceed
			var res disbackend.ReadResult
			var err error
			if limit <= 0 && !first {
				// No room left: report the partition's state without
				// reading any batch (in the dis authentication mode once
				// the principal's key may read the stream, as Read checks).
				if s.disAuth != nil && c.disCreds.Load() != nil {
					err = s.disAuth.AuthorizeStream(c.backendCtx(), st.Name, disbackend.AccessRead)
				}
				if err == nil {
					res.Range, err = s.backend.Range(st.Name, rp.Partition)
				}
				if err == nil && (rp.FetchOffset < res.Range.First || rp.FetchOffset > res.Range.Next) {
					err = disbackend.ErrOffsetOutOfRange
				}
			} else {
				res, err = s.backend.Read(c.backendCtx(), st.Name, rp.Partition, rp.FetchOffset, max(limit, 1))
			}
			if err != nil {
				c.noteBackendErr(err)
				// As Kafka's failed LogReadResult: offsets -1 (also on
				// OFFSET_OUT_OF_RANGE), aborted transactions null.
				p.ErrorCode, done = kafkaError(c.log, err), true
				continue
			}
			lso := s.lastStable(st, rp.Partition, res.Range.Next)
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = res.Range.Next, lso, res.Range.First
			if r.IsolationLevel == 1 {
				// read_committed: nothing at or past the last stable
				// offset, and the aborted transactions of what is sent.
				s.answeredStable(st, rp.Partition, lso)
				res.Batches = belowOffset(res.Batches, lso)
				p.AbortedTransactions = c.abortedIn(st, rp.Partition, rp.FetchOffset, res.Batches)
			}
			// Take the batches that fit; check codecs before copying.
			keep, n := 0, 0
			for k, b := range res.Batches {
				if n+len(b) > limit && !(first && k == 0) {
					break
				}
				if r.Version < 10 && batch.CodecOf(b) == batch.CodecZstd {
					p.ErrorCode, done = kerr.UnsupportedCompressionType.Code, true
					keep, n = 0, 0
					break
				}
				keep++
				n += len(b)
			}
			switch {
			case keep == 1:
				// One batch: reference the store's bytes (read-only); kmsg
				// copies them into the response.
				p.RecordBatches = res.Batches[0]
			case keep > 1:
				start := len(c.fetchBuf)
				for _, b := range res.Batches[:keep] {
					c.fetchBuf = append(c.fetchBuf, b...)
				}
				p.RecordBatches = c.fetchBuf[start:len(c.fetchBuf):len(c.fetchBuf)]
			}
			total += n
		}
		resp.Topics = append(resp.Topics, t)
	}
	return total, done
}

// belowOffset returns the leading batches of bs whose base offset is below
// lso (Kafka's read_committed fetch stops at the last stable offset; a
// batch never straddles it: it is a batch boundary).
func belowOffset(bs [][]byte, lso int64) [][]byte {
	for i, b := range bs {
		if h, err := batch.ParseHeader(b); err != nil || h.BaseOffset >= lso {
			return bs[:i]
		}
	}
	return bs
}

// abortedIn is a read_committed Fetch's aborted_transactions for the
// batches bs read from offset from: those whose range meets what is sent
// ([] when none, not null, as Kafka).
func (c *conn) abortedIn(st *disbackend.Stream, part int32, from int64, bs [][]byte) []kmsg.FetchResponseTopicPartitionAbortedTransaction {
	if c.s.txn == nil || len(bs) == 0 {
		return noAborted
	}
	h, err := batch.ParseHeader(bs[len(bs)-1])
	if err != nil {
		return noAborted
	}
	l := c.s.txn.AbortedIn(st.TopicID, part, from, h.BaseOffset+int64(h.LastOffsetDelta))
	if len(l) == 0 {
		return noAborted
	}
	out := make([]kmsg.FetchResponseTopicPartitionAbortedTransaction, len(l))
	for i, a := range l {
		out[i] = kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
		out[i].ProducerID, out[i].FirstOffset = a.ProducerID, a.FirstOffset
	}
	return out
}

// fencedFetch completes partition p's FENCED_LEADER_EPOCH answer with
// several nodes: from v12 its current leader and epoch in the answering
// view, from v16 that leader's address on the request's listener among
// the response's node endpoints (KIP-951, as KafkaApis.handleFetchRequest
// fills them), so the client takes the new epoch without another
// Metadata. Nothing on one node.
func (c *conn) fencedFetch(r *kmsg.FetchRequest, resp *kmsg.FetchResponse, p *kmsg.FetchResponseTopicPartition, st *disbackend.Stream) {
	if r.Version < 12 || c.s.cluster == nil {
		return
	}
	kv := c.kafkaView()
	leader := kv.v.Leader(st.Name, p.Partition)
	p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = leader, kv.epoch()
	ep, ok := kv.endpoint(leader)
	if r.Version < 16 || !ok {
		return
	}
	for _, b := range resp.Brokers {
		if b.NodeID == leader {
			return
		}
	}
	b := kmsg.NewFetchResponseBroker()
	b.NodeID, b.Host, b.Port = ep.id, ep.host, ep.port
	resp.Brokers = append(resp.Brokers, b)
}
