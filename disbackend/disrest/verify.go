package disrest

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2/model"
	"go.uber.org/zap"
)

// putState is what a partition's writer goroutine keeps between
// PutRecords: its pacer, and the sequence number DIS will give the
// partition's next record, when known. DIS has no idempotent PutRecords, so
// a PutRecords left without an answer (a dropped connection, a timeout, a
// 5xx) may or may not have been applied; with next known, the writer looks
// before sending it again (see verifyPut) instead of writing the records
// twice.
type putState struct {
	pacer
	next  int64
	known bool // next is DIS's: this gateway was the only writer since

	// The dedupe checkpoint (idem.go): idemResolved, the window and the
	// last intent were read back from DIS since start and since the last
	// PutRecords whose outcome is unknown; idemLoaded, the window was
	// read once; idemStale, the checkpoint in DIS may hold an intent that
	// was not written, to be replaced before the next PutRecords.
	idemResolved, idemLoaded, idemStale bool
	lastWrite                           time.Time // the end of the last sendGroup
	// taken: in cluster mode, the partition was taken over (takeOver) in
	// generation gen of the membership.
	taken bool
	gen   int64
	// refusedGen is the generation whose takeover last refused batches
	// that could not wait for it (takeOver), logged once.
	refusedGen int64
	// dropped: the partition was given up (viewChanged) while its writer
	// still runs; set from another goroutine.
	dropped atomic.Bool
}

// advance notes the sequence numbers DIS gave the records it accepted from
// one PutRecords, in the call's order; anything but next, next+1, ...
// (another writer) makes next unknown.
func (ps *putState) advance(sns []int64) {
	if !ps.known {
		return
	}
	for i, sn := range sns {
		if sn != ps.next+int64(i) {
			ps.known = false
			return
		}
	}
	ps.next += int64(len(sns))
}

// learn reads the partition's next sequence number from DIS
// (DescribeStream) when it is not known.
func (s *Store) learn(ctx context.Context, k partKey, ps *putState) {
	if ps.known {
		return
	}
	if r, err := s.describeRange(ctx, k.stream, k.part); err == nil {
		ps.next, ps.known = r.Next, true
	}
}

// verifyPut finds out which of the records todo (indexes into recs) a
// PutRecords left without an answer wrote: it reads the partition's range
// (DescribeStream) and, when it grew, the records added (GetCursor
// AT_SEQUENCE_NUMBER, GetRecords), and matches them in order with the
// records sent (data and partition key). It sets sns of the records found
// and returns the indexes still to send. ok is false when DIS could not be
// asked (try again later). When the partition grew by records that are not
// ours (another writer), next becomes unknown and every record not found is
// sent again.
func (s *Store) verifyPut(ctx context.Context, k partKey, recs []disRecord, todo []int, sns []int64, ps *putState) (left []int, ok bool) {
	r, err := s.describeRange(ctx, k.stream, k.part)
	if err != nil {
		return todo, false
	}
	added := r.Next - ps.next
	if settle := s.settle(); added >= 0 && added < int64(len(todo)) && settle > 0 {
		// The request may still be on its way, as DIS applies a request
		// it received whoever waits for the answer (after an outage, DIS
		// works through the requests queued meanwhile in any order):
		// look again once it has landed, before sending it again.
		t := time.NewTimer(settle)
		select {
		case <-ctx.Done():
			t.Stop()
			return todo, false
		case <-t.C:
		}
		if r, err = s.describeRange(ctx, k.stream, k.part); err != nil {
			return todo, false
		}
		added = r.Next - ps.next
	}
	if added == 0 {
		return todo, true // not applied
	}
	if added < 0 || added > int64(len(todo)) {
		s.log.Warn("a PutRecords without an answer cannot be checked: the partition changed by other writers; sending it again",
			zap.String("stream", k.stream), zap.Int32("partition", k.part), zap.Int64("added", added), zap.Int("sent", len(todo)))
		ps.next = r.Next
		return todo, true
	}
	got, err := s.rawRecords(ctx, k, ps.next, int(added))
	if err != nil {
		return todo, false
	}
	matched := make([]bool, len(todo))
	j := 0
	for _, g := range got {
		for j < len(todo) && !sameRecord(&recs[todo[j]], g.data, g.key) {
			j++
		}
		if j == len(todo) {
			s.log.Warn("a PutRecords without an answer cannot be checked: the records added are not all ours; sending the rest again",
				zap.String("stream", k.stream), zap.Int32("partition", k.part))
			ps.known = false
			break
		}
		sns[todo[j]] = g.sn
		matched[j] = true
		j++
	}
	if ps.known {
		ps.next = r.Next
	}
	gap := false
	for i, idx := range todo {
		if !matched[i] {
			left = append(left, idx)
			gap = true
		} else if gap {
			s.log.Warn("DIS accepted a record after refusing an earlier one of the partition",
				zap.String("stream", k.stream), zap.Int32("partition", k.part),
				zap.Int("record", idx), zap.Int64("out_of_order_total", s.outOfOrder.Add(1)))
			gap = false
		}
	}
	s.log.Info("a PutRecords without an answer was checked",
		zap.String("stream", k.stream), zap.Int32("partition", k.part),
		zap.Int("written", len(todo)-len(left)), zap.Int("to_send_again", len(left)))
	return left, true
}

// settle is how long a PutRecords left without an answer, or an intent
// that looks not written, is given to land in DIS before it is taken as
// not applied (Options.idemSettle); 0: not at all.
func (s *Store) settle() time.Duration {
	switch {
	case s.opts.idemSettle < 0:
		return 0
	case s.opts.idemSettle == 0:
		return defaultIdemSettle
	}
	return s.opts.idemSettle
}

func sameRecord(r *disRecord, data []byte, key *string) bool {
	if !bytes.Equal(r.data, data) {
		return false
	}
	if r.key == nil || key == nil {
		return (r.key == nil || *r.key == "") && (key == nil || *key == "")
	}
	return *r.key == *key
}

type rawRecord struct {
	sn   int64
	data []byte
	key  *string
}

// rawRecords reads n records of partition k from sequence number from, as
// DIS holds them (GetCursor AT_SEQUENCE_NUMBER, then GetRecords following
// next_partition_cursor).
func (s *Store) rawRecords(ctx context.Context, k partKey, from int64, n int) ([]rawRecord, error) {
	cur, err := s.cursor(ctx, k, model.GetShowCursorRequestCursorTypeEnum().AT_SEQUENCE_NUMBER, from, -1)
	if err != nil {
		return nil, err
	}
	var out []rawRecord
	mb := int32(readAheadBytes)
	for len(out) < n {
		resp, err := callIdempotent(ctx, s, "get records", func() (*model.ConsumeRecordsResponse, error) {
			return s.c.ConsumeRecords(&model.ConsumeRecordsRequest{PartitionCursor: cur, MaxFetchBytes: &mb})
		})
		if err != nil {
			return nil, err
		}
		if resp.Records == nil || len(*resp.Records) == 0 {
			return nil, fmt.Errorf("disrest: get records of %s/%d at %d: %d of %d records", k.stream, k.part, from, len(out), n)
		}
		for _, r := range *resp.Records {
			if len(out) == n {
				break
			}
			if r.SequenceNumber == nil {
				return nil, fmt.Errorf("disrest: get records of %s/%d: a record without a sequence number", k.stream, k.part)
			}
			sn, err := strconv.ParseInt(*r.SequenceNumber, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("disrest: get records of %s/%d: sequence number %q", k.stream, k.part, *r.SequenceNumber)
			}
			var data []byte
			if r.Data != nil {
				if data, err = base64.StdEncoding.DecodeString(*r.Data); err != nil {
					return nil, fmt.Errorf("disrest: get records of %s/%d: record %d: data is not Base64", k.stream, k.part, sn)
				}
			}
			out = append(out, rawRecord{sn: sn, data: data, key: r.PartitionKey})
		}
		if resp.NextPartitionCursor == nil {
			break
		}
		cur = *resp.NextPartitionCursor
	}
	if len(out) < n {
		return nil, fmt.Errorf("disrest: get records of %s/%d at %d: %d of %d records", k.stream, k.part, from, len(out), n)
	}
	return out, nil
}
