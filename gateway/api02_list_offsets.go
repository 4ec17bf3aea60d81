package gateway

// ListOffsets: v1-11.
//
// Version notes:
//   - v1: one offset per partition, by record timestamp: the first offset
//     whose record timestamp (per record, not per batch) is >= the one asked;
//     -1/-1 when no record is that late. -1 is the high watermark, -2 the log
//     start offset.
//   - v2: isolation level (no transactions: both levels read the high
//     watermark). v4: current leader epoch fencing, leader epoch in the
//     response: 0 on one node, the answering view's cluster epoch with
//     several (cluster.go), whose every node answers every partition
//     (DIS holds the records). v6: flexible.
//   - v7: -3, the offset and timestamp of the record with the largest
//     timestamp (KIP-734). v8: -4, the local log start (= log start; no
//     tiered storage). v9: -5, the latest tiered offset: -1, nothing is
//     tiered. v10: timeout (nothing here is remote). v11: -6, the earliest
//     pending upload: -1.
//   - A special timestamp below the version that defines it, or any other
//     negative timestamp, gets UNSUPPORTED_VERSION for that partition; a
//     partition listed twice gets INVALID_REQUEST for both (as Kafka).
//   - By timestamp, the answer is never below the log start offset (Kafka
//     searches from it): after a DeleteRecords inside a batch, or on DIS
//     where the records below it are still stored, the first record from
//     the log start offset on whose timestamp is late enough.
//   - Partitions past Limits.MaxPartitions, and every partition of a
//     topic past Limits.MaxTopics, get INVALID_REQUEST (limits.go).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
	"github.com/disgw/disgw/kafkawire/batch"
)

func init() {
	registerAPI(2, 1, 11, (*conn).handleListOffsets, filterTopics(acl.OpDescribe,
		func(r *kmsg.ListOffsetsResponse) []kmsg.ListOffsetsResponseTopic { return r.Topics },
		func(t *kmsg.ListOffsetsResponseTopic) string { return t.Topic },
		refuseListOffsetsTopic))
}

// refuseListOffsetsTopic answers each partition of a topic the principal
// may not DESCRIBE with TOPIC_AUTHORIZATION_FAILED and no offset.
func refuseListOffsetsTopic(t *kmsg.ListOffsetsResponseTopic) {
	for j := range t.Partitions {
		p := &t.Partitions[j]
		p.ErrorCode, p.Timestamp, p.Offset, p.LeaderEpoch, p.OldStyleOffsets = errTopicAuth, -1, -1, -1, nil
	}
}

func (c *conn) handleListOffsets(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.ListOffsetsRequest)
	return reply{req: req, finish: func() (kmsg.Response, error) {
		ctx, cancel := c.requestContext(0)
		defer cancel()
		resp, lim := c.s.listOffsets(ctx, r)
		lim.report(c, "ListOffsets")
		return resp, nil
	}}
}

func (s *Server) listOffsets(ctx context.Context, r *kmsg.ListOffsetsRequest) (*kmsg.ListOffsetsResponse, *partitionQuota) {
	resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
	type tp struct {
		t string
		p int32
	}
	// Only served partitions are counted (the same quota, run twice).
	seen := make(map[tp]int)
	pre := s.newPartitionQuota()
	for _, rt := range r.Topics {
		pre.topic()
		for _, rp := range rt.Partitions {
			if pre.partition() {
				seen[tp{rt.Topic, rp.Partition}]++
			}
		}
	}
	lim := s.newPartitionQuota()
	epoch := s.currentEpoch()
	resp.Topics = make([]kmsg.ListOffsetsResponseTopic, 0, len(r.Topics))
	for _, rt := range r.Topics {
		t := kmsg.NewListOffsetsResponseTopic()
		t.Topic = rt.Topic
		lim.topic()
		st := s.topics.get(rt.Topic)
		// The dis authentication mode: offsets come from the gateway's
		// view, so the principal's key must be let read the stream first
		// (a GetCursor signed with it, remembered dis_principal_ttl).
		var authErr error
		if st != nil && s.disAuth != nil && disbackend.CredentialsFrom(ctx) != nil {
			authErr = s.disAuth.AuthorizeStream(ctx, st.Name, disbackend.AccessRead)
		}
		t.Partitions = make([]kmsg.ListOffsetsResponseTopicPartition, 0, len(rt.Partitions))
		for _, rp := range rt.Partitions {
			p := kmsg.NewListOffsetsResponseTopicPartition()
			p.Partition = rp.Partition
			switch {
			case !lim.partition():
				p.ErrorCode = errCodeOverCap
			case seen[tp{rt.Topic, rp.Partition}] > 1:
				p.ErrorCode = kerr.InvalidRequest.Code
			case st == nil || rp.Partition < 0 || rp.Partition >= st.PartitionCount:
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case authErr != nil:
				p.ErrorCode = kafkaError(s.log, authErr)
			case r.Version >= 4 && rp.CurrentLeaderEpoch >= 0 && rp.CurrentLeaderEpoch < epoch:
				p.ErrorCode = kerr.FencedLeaderEpoch.Code
			case r.Version >= 4 && rp.CurrentLeaderEpoch > epoch:
				p.ErrorCode = kerr.UnknownLeaderEpoch.Code
			case rp.Timestamp == -1 && r.IsolationLevel == 1 && !s.committedReadable(ctx, st.Name, rp.Partition):
				p.ErrorCode = kerr.NotLeaderForPartition.Code
			default:
				off, ts, err := s.offsetFor(ctx, r.Version, st, rp.Partition, rp.Timestamp)
				if err == nil && rp.Timestamp == -1 && r.IsolationLevel == 1 {
					off = s.lastStable(st, rp.Partition, off) // read_committed: the last stable offset, as Kafka
					s.answeredStable(st, rp.Partition, off)
				}
				if err != nil {
					p.ErrorCode = kafkaError(s.log, err)
					break
				}
				p.Offset, p.Timestamp = off, ts
				if off >= 0 {
					p.LeaderEpoch = epoch
				}
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, lim
}

// offsetFor answers one partition of ListOffsets: (offset, timestamp).
func (s *Server) offsetFor(ctx context.Context, version int16, st *disbackend.Stream, partition int32, ts int64) (int64, int64, error) {
	rng := func() (disbackend.PartitionRange, error) { return s.backend.Range(st.Name, partition) }
	switch {
	case ts == -1:
		pr, err := rng()
		return pr.Next, -1, err
	case ts == -2, ts == -4 && version >= 8:
		pr, err := rng()
		return pr.First, -1, err
	case ts == -3 && version >= 7:
		raw, err := s.backend.BatchWithMaxTimestamp(ctx, st.Name, partition)
		if err != nil || raw == nil {
			return -1, -1, err
		}
		return s.recordAtTimestamp(ctx, st, partition, raw, func(rec, batchMax int64) bool { return rec == batchMax })
	case ts == -5 && version >= 9, ts == -6 && version >= 11:
		return -1, -1, nil
	case ts < 0:
		return 0, 0, kerr.UnsupportedVersion
	}
	// The backend finds the batch from batch max timestamps alone (the
	// gateway recomputes them at produce); only that batch is decoded.
	raw, err := s.backend.BatchAtTimestamp(ctx, st.Name, partition, ts)
	if err != nil || raw == nil {
		return -1, -1, err
	}
	match := func(rec, _ int64) bool { return rec >= ts }
	off, at, err := s.recordAtTimestamp(ctx, st, partition, raw, match)
	if err != nil {
		return off, at, err
	}
	pr, err := rng()
	if err != nil || off < 0 || off >= pr.First {
		return off, at, err
	}
	// The record found lies below the log start offset
	// (DeleteRecords inside a batch; on DIS, records it hides): Kafka
	// answers the first record from the log start offset on.
	return s.recordFrom(ctx, st, partition, pr, match)
}

// recordFrom scans the partition from its log start offset for the first
// record match accepts; (-1, -1) when none.
func (s *Server) recordFrom(ctx context.Context, st *disbackend.Stream, partition int32, pr disbackend.PartitionRange, match func(rec, batchMax int64) bool) (int64, int64, error) {
	for at := pr.First; at < pr.Next; {
		res, err := s.backend.Read(ctx, st.Name, partition, at, 1<<20)
		if err != nil || len(res.Batches) == 0 {
			return -1, -1, err
		}
		for _, raw := range res.Batches {
			off, ts, err := batch.FindRecordFrom(ctx, raw, s.decompressLimits(st), pr.First, match)
			if err != nil {
				s.logDecompressRefusal("list_offsets", st, partition, len(raw), err)
				return off, ts, err
			}
			if off >= 0 {
				return off, ts, nil
			}
			at = max(at, batch.LastOffset(raw)+1)
		}
	}
	return -1, -1, nil
}

// recordAtTimestamp walks a stored batch and returns the offset and
// timestamp of its first record that match accepts; (-1, -1) when none.
// It decompresses within the topic's limits and the shared budget,
// holding one record at a time.
func (s *Server) recordAtTimestamp(ctx context.Context, st *disbackend.Stream, partition int32, raw []byte, match func(rec, batchMax int64) bool) (int64, int64, error) {
	off, ts, err := batch.FindRecord(ctx, raw, s.decompressLimits(st), match)
	if err != nil {
		s.logDecompressRefusal("list_offsets", st, partition, len(raw), err)
	}
	return off, ts, err
}
