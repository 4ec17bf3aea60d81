package gateway

// Produce: v3-13.
//
// Version notes:
//   - v3: record batches (magic 2) only, transactional id. Exactly one batch
//     per partition (else INVALID_RECORD, as Kafka).
//   - v5: LogStartOffset in the response. v7: zstd allowed (below v7 a zstd
//     batch gets UNSUPPORTED_COMPRESSION_TYPE). v8: ErrorMessage and
//     record_errors (KIP-467): a batch refused for some of its records (a
//     compacted topic's records without a key; on DIS, records that
//     dis.record.format native cannot store or that DIS cannot hold as one
//     record) names each of them, as Kafka's RecordValidationException.
//   - v9: flexible. v13: topics by id (UNKNOWN_TOPIC_ID when unknown).
//   - v10: KIP-951's current_leader and node_endpoints answer
//     NOT_LEADER_OR_FOLLOWER (several nodes, below).
//   - Transactions are not offered: a request with a transactional id gets
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition.
//
// Several nodes (docs/cluster.md §5, cluster.go): a partition this node
// does not lead in its current view (or while it holds no Ready view) is
// answered NOT_LEADER_OR_FOLLOWER before its batch is decoded, and so is
// one the backend refuses with disbackend.ErrNotLeader (ownership lost,
// lease lapsed); from v10 the partition's current_leader (the leader and
// epoch of the answering view) and the leaders' node_endpoints on the
// request's listener come with it, so clients move at once (KIP-951).
// Batches are stamped with the current view's cluster epoch.
//
// acks 0: no response; an error closes the connection, as Kafka does.
// acks 1 and -1: the response waits until every batch is synced by the
// backend (the high watermark covers only synced data), up to the request's
// timeout (then REQUEST_TIMED_OUT). Batches are enqueued to the backend on
// the connection's reader goroutine, so one connection's writes are applied
// in order. throttle_time_ms is the longest time any of the request's
// partitions waited for the backend's rate limits (AppendResult.Throttle):
// throttling delays the acknowledgement (KIP-219), and past the request's
// timeout the answer is REQUEST_TIMED_OUT, never THROTTLING_QUOTA_EXCEEDED.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
	"github.com/disgw/disgw/kafkawire/batch"
)

func init() { registerAPI(0, 3, 13, (*conn).handleProduce, (*conn).authorizeProduce) }

// authorizeProduce: WRITE on the transactional id, if any (else every
// topic is refused TRANSACTIONAL_ID_AUTHORIZATION_FAILED), and WRITE on
// each topic (else TOPIC_AUTHORIZATION_FAILED). Refused topics are taken
// out of the request and answered on each partition; the others are still
// written. With acks 0 a refusal closes the connection instead, as Kafka
// does.
func (c *conn) authorizeProduce(req *kafkawire.Request) (kmsg.Response, postAuth) {
	r := req.Body.(*kmsg.ProduceRequest)
	txnDenied := r.TransactionID != nil && !c.may(acl.OpWrite, acl.ResourceTransactionalID, *r.TransactionID)
	var denied []kmsg.ProduceResponseTopic
	kept := r.Topics[:0]
	for _, t := range r.Topics {
		code := int16(0)
		if txnDenied {
			code = errTxnAuth
		} else if name := c.topicName(t.Topic, t.TopicID); name != "" && !c.mayTopic(acl.OpWrite, name) {
			code = errTopicAuth
		}
		if code == 0 {
			kept = append(kept, t)
			continue
		}
		d := kmsg.NewProduceResponseTopic()
		d.Topic, d.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			dp := kmsg.NewProduceResponseTopicPartition()
			dp.Partition, dp.ErrorCode, dp.BaseOffset, dp.LogAppendTime, dp.LogStartOffset = p.Partition, code, -1, -1, -1
			d.Partitions = append(d.Partitions, dp)
		}
		denied = append(denied, d)
	}
	r.Topics = kept
	if len(denied) == 0 {
		return nil, nil
	}
	if r.Acks == 0 {
		// Kafka closes the connection on an error of an acks=0 produce; the
		// authorized topics are still written.
		return nil, func(kmsg.Response) error { return errCloseConn }
	}
	return nil, appendDenied(denied, func(r *kmsg.ProduceResponse) *[]kmsg.ProduceResponseTopic { return &r.Topics })
}

// producePart is one partition's outcome: an error known at once, or a
// pending append.
type producePart struct {
	p       *kmsg.ProduceResponseTopicPartition
	st      *disbackend.Stream
	pending *disbackend.Pending
	// records and bytes of the batch, for disgw_records_in_total and
	// disgw_bytes_in_total once it is appended
	records, bytes int
}

func (c *conn) handleProduce(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.ProduceRequest)
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	s := c.s
	var parts []producePart
	var firstErr error
	frame := &disbackend.Frame{Size: req.FrameBytes} // the frame the batches alias

	setErr := func(p *kmsg.ProduceResponseTopicPartition, code int16, err error) {
		p.ErrorCode = code
		if r.Version >= 8 && err != nil {
			p.ErrorMessage = errMessage(err)
		}
		if firstErr == nil {
			firstErr = err
			if firstErr == nil {
				firstErr = kerr.ErrorForCode(code)
			}
		}
	}

	acksOK := r.Acks == 0 || r.Acks == 1 || r.Acks == -1
	// Decoding waits for room in the decompression budget at most until
	// the request's timeout.
	decodeCtx, cancelDecode := c.requestContext(r.TimeoutMillis)
	defer cancelDecode()
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(r.Topics))
	for i := range r.Topics {
		rt := &r.Topics[i]
		t := &resp.Topics[i]
		*t = kmsg.NewProduceResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		var st *disbackend.Stream
		var topicErr *kerr.Error
		if r.Version >= 13 {
			if st = s.topics.getByID(rt.TopicID); st == nil {
				topicErr = kerr.UnknownTopicID
				if rt.TopicID == s.offsetsTopicStream().TopicID {
					topicErr = kerr.InvalidTopicException
				}
			}
		} else if rt.Topic == offsetsTopic {
			topicErr = kerr.InvalidTopicException // as Kafka: clients cannot write to it
		} else if st = s.topics.get(rt.Topic); st == nil {
			topicErr = kerr.UnknownTopicOrPartition
		}
		t.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			p := &t.Partitions[j]
			*p = kmsg.NewProduceResponseTopicPartition()
			p.Partition = rp.Partition
			p.BaseOffset = -1
			switch {
			case !acksOK:
				setErr(p, kerr.InvalidRequiredAcks.Code, nil)
			case r.TransactionID != nil && s.txn == nil:
				setErr(p, kerr.TransactionalIDAuthorizationFailed.Code, errNoTransactions)
			case topicErr != nil:
				setErr(p, topicErr.Code, nil)
			case rp.Partition < 0 || rp.Partition >= st.PartitionCount:
				setErr(p, kerr.UnknownTopicOrPartition.Code, nil)
			case !s.leads(st.Name, rp.Partition):
				// Before the batch is decoded or queued: nothing of it
				// is written (docs/cluster.md §5).
				setErr(p, kerr.NotLeaderForPartition.Code, nil)
				c.notLeader(resp, p, st)
			default:
				// Counted before the store owns (and stamps) the batch.
				records, bytes := countRecords(rp.Records), len(rp.Records)
				pending, err := c.appendBatch(decodeCtx, r.Version, frame, st, rp, r.TransactionID)
				var refused *txnRefusal
				if errors.As(err, &refused) {
					setErr(p, refused.code, nil)
					if r.Version >= 8 {
						p.ErrorMessage = refused.message()
					}
					continue
				}
				if err != nil {
					s.logDecompressRefusal("produce", st, rp.Partition, len(rp.Records), err)
					setErr(p, kafkaError(c.log, err), err)
					c.setRecordErrors(p, r.Version, st, err)
					continue
				}
				parts = append(parts, producePart{p: p, st: st, pending: pending, records: records, bytes: bytes})
			}
		}
	}

	if r.Acks == 0 {
		return reply{req: req, finish: func() (kmsg.Response, error) {
			ctx, cancel := c.requestContext(r.TimeoutMillis)
			defer cancel()
			for _, pp := range parts {
				if _, err := pp.pending.Wait(ctx); err != nil {
					if firstErr == nil {
						firstErr = err
					}
				} else {
					s.cfg.Metrics.In(pp.st.TopicName, pp.p.Partition, pp.records, pp.bytes)
				}
			}
			if firstErr != nil {
				c.log.Info("acks=0 produce failed, closing connection as Kafka does", zapErr(firstErr))
				return nil, errCloseConn
			}
			return nil, nil
		}}
	}
	return reply{req: req, finish: func() (kmsg.Response, error) {
		ctx, cancel := c.requestContext(r.TimeoutMillis)
		defer cancel()
		var throttle time.Duration
		for _, pp := range parts {
			res, err := pp.pending.Wait(ctx)
			throttle = max(throttle, res.Throttle)
			if err != nil {
				c.noteBackendErr(err)
				pp.p.ErrorCode = kafkaError(c.log, err)
				if errors.Is(err, disbackend.ErrNotLeader) {
					// The node lost the partition, or its lease lapsed,
					// after the check above: as that check answers.
					c.log.Debug("produce refused: not the leader", zapTopic(pp.st.TopicName), zapPartition(pp.p.Partition), zapErr(err))
					pp.p.ErrorCode = kerr.NotLeaderForPartition.Code
					c.notLeader(resp, pp.p, pp.st)
					continue
				}
				if producerStateError(pp.p.ErrorCode) {
					// As Kafka's ReplicaManager.appendToLocalLog: the
					// log start offset, and no error message.
					c.log.Debug("produce refused by the producer state", zap.String("topic", pp.st.Name),
						zap.Int32("partition", pp.p.Partition), zapErr(err))
					pp.p.LogStartOffset = c.logStartOffset(pp.st, pp.p.Partition)
					continue
				}
				if r.Version >= 8 {
					pp.p.ErrorMessage = errMessage(err)
				}
				c.setRecordErrors(pp.p, r.Version, pp.st, err)
				continue
			}
			s.cfg.Metrics.In(pp.st.TopicName, pp.p.Partition, pp.records, pp.bytes)
			pp.p.BaseOffset = res.BaseOffset
			pp.p.LogStartOffset = res.LogStartOffset
			pp.p.LogAppendTime = res.LogAppendTime
		}
		// KIP-219: the time the slowest partition waited for the backend's
		// rate limits (DIS pacing and DIS.4303 retries); the acknowledgement
		// was already delayed by it, and the client backs off that long.
		resp.ThrottleMillis = int32(min(throttle.Milliseconds(), math.MaxInt32))
		return resp, nil
	}}
}

// appendBatch validates one partition's records and enqueues the batch.
// The batch is decompressed and walked once: to validate it, and for a
// backend that stores records (DIS) to decode them too. Decompression
// stays within the topic's max.decompressed.message.bytes and the shared
// budget (decompress.go): the embedded store's batch is only checked, as a
// stream, and gives its charge back at once; the records handed to a DIS
// backend stay charged until its Pending completes. Errors:
// MESSAGE_TOO_LARGE, the batch package's errors (CORRUPT_MESSAGE,
// INVALID_RECORD, among them max.decompressed.message.bytes,
// UNSUPPORTED_COMPRESSION_TYPE), a disbackend.RecordsError
// (INVALID_RECORD: records without a key to a compacted topic), and, when
// the budget has no room before ctx ends, one that maps to
// REQUEST_TIMED_OUT.
func (c *conn) appendBatch(ctx context.Context, version int16, frame *disbackend.Frame, st *disbackend.Stream, rp *kmsg.ProduceRequestTopicPartition, txnID *string) (_ *disbackend.Pending, err error) {
	raw := rp.Records
	if len(raw) > int(st.Config.MaxMessageBytes) {
		return nil, kerrWrap(kerr.MessageTooLarge, fmt.Sprintf("record batch of %d bytes is larger than max.message.bytes %d", len(raw), st.Config.MaxMessageBytes))
	}
	switch {
	case c.s.keepsFrames:
		// The backend counts the frame it keeps alive (Batch.Frame): no
		// copy. (Copying each batch of a Produce request of three 1 MB
		// batches took a tenth of the process's CPU in bench's
		// BenchmarkProduce, client included.)
	case frame.Size > 2*len(raw)+64<<10:
		// The batch is a small part of its request's frame: what the
		// backend keeps of it (the DIS buffer) would keep the whole
		// frame alive, so it gets its own copy.
		raw, frame = bytes.Clone(raw), nil
	default:
		frame = nil
	}
	h, err := batch.Parse(raw)
	if err != nil {
		return nil, err
	}
	if h.Codec() == batch.CodecZstd && version < 7 {
		return nil, fmt.Errorf("%w: zstd needs Produce v7 or newer", batch.ErrUnsupportedCompression)
	}
	release, err := c.verifyTxn(txnID, st, rp.Partition, &h)
	if err != nil {
		return nil, err
	}
	if release != nil {
		defer func() {
			if err != nil {
				release()
			}
		}()
	}
	var recs []disbackend.Record
	var checked batch.Checked
	var hold batch.Hold
	lim := c.s.decompressLimits(st)
	if c.s.storesRecords {
		recs, checked, hold, err = batch.ValidateAndDecodeLimited(ctx, raw, h, lim)
	} else {
		checked, err = batch.ValidateLimited(ctx, raw, h, lim)
	}
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			hold.Release()
		}
	}()
	if checked.Keyless > 0 && st.Config.Compacted() {
		return nil, keylessRefusal(ctx, st.TopicName, rp.Partition, raw, h, recs, lim)
	}
	orig := raw
	if raw, h, err = c.s.recompress(ctx, st, raw, h, lim); err != nil {
		return nil, err
	}
	if &raw[0] != &orig[0] {
		frame = nil // recompressed: its own
	}
	// As Kafka's broker: the max timestamp is the records' (ListOffsets by
	// timestamp relies on it), not what the producer wrote.
	if checked.MaxTimestamp != h.MaxTimestamp {
		batch.SetMaxTimestamp(raw, checked.MaxTimestamp)
	}
	batch.SetPartitionLeaderEpoch(raw, c.s.writeEpoch())
	if h, err = batch.ParseHeader(raw); err != nil { // the fields just set
		return nil, err
	}
	// On a LogAppendTime topic the store stamps its append time.
	// In the dis authentication mode the batch is written with the
	// connection's own DIS credentials.
	pending := c.s.backend.Append(st.Name, rp.Partition, disbackend.Batch{Raw: raw, Header: h, Records: recs, Frame: frame, Credentials: c.disCreds.Load()})
	pending.AfterDone(hold.Release) // the backend no longer holds the records
	if release != nil {
		pending.AfterDone(release) // the transaction's markers may follow it now
	}
	return pending, nil
}

// keylessRefusal is the refusal of a batch to a compacted topic with
// records without a key, as Kafka's LogValidator.validateKey: INVALID_RECORD
// with a record error naming each of them, in Kafka's words (KIP-467).
// recs are the batch's records when the gateway decoded them (a backend
// that stores records), else the batch is walked again for their indexes.
func keylessRefusal(ctx context.Context, topic string, partition int32, raw []byte, h batch.Header, recs []disbackend.Record, lim batch.Limits) error {
	var keyless []int32
	if recs != nil {
		for i := range recs {
			if recs[i].Key == nil {
				keyless = append(keyless, int32(i))
			}
		}
	} else {
		var err error
		if keyless, err = batch.KeylessRecords(ctx, raw, h, lim); err != nil {
			return err
		}
	}
	msg := fmt.Sprintf("Compacted topic cannot accept message without key in topic partition %s-%d", topic, partition)
	re := &disbackend.RecordsError{Err: disbackend.ErrInvalidRecord, Records: make([]disbackend.RecordError, len(keyless))}
	for i, idx := range keyless {
		re.Records[i] = disbackend.RecordError{Index: idx, Message: msg}
	}
	return re
}

// setRecordErrors answers a batch refused for some of its records
// (disbackend.RecordsError in err's chain; nothing else is changed) as
// Kafka's ReplicaManager answers a RecordValidationException: the
// partition's log start offset (v5+) and, from v8 (KIP-467), record_errors
// (kmsg's ErrorRecords) naming each record at fault (batch_index,
// batch_index_error_message: RelativeOffset, ErrorMessage) and Kafka's
// error_message (LogValidator.processRecordErrors). The error code
// is the caller's, from the error table (the RecordsError's Err).
func (c *conn) setRecordErrors(p *kmsg.ProduceResponseTopicPartition, version int16, st *disbackend.Stream, err error) {
	var re *disbackend.RecordsError
	if !errors.As(err, &re) || len(re.Records) == 0 {
		return
	}
	p.LogStartOffset = c.logStartOffset(st, p.Partition)
	if version < 8 {
		return
	}
	p.ErrorRecords = make([]kmsg.ProduceResponseTopicPartitionErrorRecord, len(re.Records))
	for i, r := range re.Records {
		e := &p.ErrorRecords[i]
		*e = kmsg.NewProduceResponseTopicPartitionErrorRecord()
		e.RelativeOffset, e.ErrorMessage = r.Index, kmsg.StringPtr(r.Message)
	}
	p.ErrorMessage = kmsg.StringPtr(recordErrorsMessage(re.Records))
}

// recordErrorsMessage is Kafka's error_message for a batch refused for
// some of its records (LogValidator.processRecordErrors): their count and
// the first three, as Java prints a List of ProduceResponse.RecordError.
func recordErrorsMessage(recs []disbackend.RecordError) string {
	var b strings.Builder
	fmt.Fprintf(&b, "One or more records have been rejected due to %d record errors in total, and only showing the first three errors at most: [", len(recs))
	for i, r := range recs[:min(len(recs), 3)] {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "RecordError(batchIndex=%d, message='%s')", r.Index, r.Message)
	}
	b.WriteString("]")
	return b.String()
}

// producerStateError reports whether code is an idempotent producer's
// refusal (OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH), which
// Kafka answers with the partition's log start offset and no error message
// (ReplicaManager.appendToLocalLog, the path of exceptions without a
// custom message).
func producerStateError(code int16) bool {
	return code == kerr.OutOfOrderSequenceNumber.Code || code == kerr.InvalidProducerEpoch.Code
}

// logStartOffset is the partition's log start offset for a Produce error
// answer (v5+), -1 when the backend cannot tell.
func (c *conn) logStartOffset(st *disbackend.Stream, partition int32) int64 {
	rg, err := c.s.backend.Range(st.Name, partition)
	if err != nil {
		return -1
	}
	return rg.First
}

// recompress rewrites a batch bound for the embedded store whose codec is
// not its topic's compression.type (other than producer), as Kafka's
// LogValidator does, at the topic's compression.<codec>.level. The DIS
// backend stores records, not batches (its fetches build uncompressed
// batches), so it is left alone. A batch that grows past max.message.bytes
// is MESSAGE_TOO_LARGE, as in Kafka.
func (s *Server) recompress(ctx context.Context, st *disbackend.Stream, raw []byte, h batch.Header, lim batch.Limits) ([]byte, batch.Header, error) {
	to, ok := compressionCodecs[st.Config.CompressionType]
	if s.storesRecords || !ok || to < 0 || to == h.Codec() {
		return raw, h, nil
	}
	var level int32
	switch to {
	case batch.CodecGzip:
		level = st.Config.GzipLevel
	case batch.CodecLZ4:
		level = st.Config.LZ4Level
	case batch.CodecZstd:
		level = st.Config.ZstdLevel
	}
	out, err := batch.Recompress(ctx, raw, h, lim, to, int(level))
	if err != nil {
		return nil, h, err
	}
	if len(out) > int(st.Config.MaxMessageBytes) {
		return nil, h, kerrWrap(kerr.MessageTooLarge, fmt.Sprintf("record batch of %d bytes recompressed to %s is larger than max.message.bytes %d",
			len(out), st.Config.CompressionType, st.Config.MaxMessageBytes))
	}
	h, err = batch.Parse(out)
	return out, h, err
}

// kerrWrap returns an error that maps to the Kafka error ke with a message.
func kerrWrap(ke *kerr.Error, msg string) error { return &kafkaErr{ke: ke, msg: msg} }

type kafkaErr struct {
	ke  *kerr.Error
	msg string
}

func (e *kafkaErr) Error() string { return e.ke.Message + ": " + e.msg }
func (e *kafkaErr) Unwrap() error { return e.ke }

// notLeader completes partition p's NOT_LEADER_OR_FOLLOWER answer as
// Kafka's KafkaApis.handleProduceRequest does from v10 (KIP-951): the
// partition's current leader and epoch in the answering view, and the
// leader's address on the request's listener among the response's node
// endpoints. Nothing on one node or below v10.
func (c *conn) notLeader(resp *kmsg.ProduceResponse, p *kmsg.ProduceResponseTopicPartition, st *disbackend.Stream) {
	if resp.Version < 10 || c.s.cluster == nil {
		return
	}
	kv := c.kafkaView()
	leader := kv.v.Leader(st.Name, p.Partition)
	p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = leader, kv.epoch()
	ep, ok := kv.endpoint(leader)
	if !ok {
		return
	}
	for _, b := range resp.Brokers {
		if b.NodeID == leader {
			return
		}
	}
	b := kmsg.NewProduceResponseBroker()
	b.NodeID, b.Host, b.Port = ep.id, ep.host, ep.port
	resp.Brokers = append(resp.Brokers, b)
}
