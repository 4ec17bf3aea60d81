package disrest

import (
	"context"
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2/model"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/kafkawire"
)

// cursorCache keeps next_partition_cursor values by the sequence number
// they start at, so a consumer reading on costs one GetRecords per fetch.
// Entries are used until cursorTTL after DIS gave them (DIS: 5 minutes),
// and shared by consumers at the same position.
type cursorCache struct {
	mu sync.Mutex
	m  map[cursorKey]cachedCursor
}

type cursorKey struct {
	partKey
	next int64
}

type cachedCursor struct {
	cursor string
	at     time.Time
}

// maxCursors bounds the cache; past it, expired entries go, then any.
const maxCursors = 10000

func (c *cursorCache) init() { c.m = map[cursorKey]cachedCursor{} }

func (c *cursorCache) get(k cursorKey) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cc, ok := c.m[k]
	if !ok || time.Since(cc.at) > cursorTTL {
		delete(c.m, k)
		return "", false
	}
	return cc.cursor, true
}

func (c *cursorCache) put(k cursorKey, cursor string, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxCursors {
		for key, cc := range c.m {
			if time.Since(cc.at) > cursorTTL {
				delete(c.m, key)
			}
		}
		for key := range c.m {
			if len(c.m) < maxCursors {
				break
			}
			delete(c.m, key)
		}
	}
	c.m[k] = cachedCursor{cursor: cursor, at: at}
}

func (c *cursorCache) drop(k cursorKey) {
	c.mu.Lock()
	delete(c.m, k)
	c.mu.Unlock()
}

func (c *cursorCache) dropStream(name string) {
	c.mu.Lock()
	for k := range c.m {
		if k.stream == name {
			delete(c.m, k)
		}
	}
	c.mu.Unlock()
}

// fetched is one record read from DIS, already mapped back to Kafka.
type fetched struct {
	sn  int64
	rec kmsg.Record // TimestampDelta64 holds the absolute timestamp
	n   int         // DIS data bytes
}

func (s *Store) cursor(ctx context.Context, k partKey, typ model.ShowCursorRequestCursorType, sn int64, ts int64) (string, error) {
	req := &model.ShowCursorRequest{StreamName: k.stream, PartitionId: disbackend.PartitionID(k.part), CursorType: &typ}
	if ts >= 0 {
		req.Timestamp = &ts
	} else {
		v := strconv.FormatInt(sn, 10)
		req.StartingSequenceNumber = &v
	}
	resp, err := callIdempotent(ctx, s, "get cursor", func() (*model.ShowCursorResponse, error) { return s.c.ShowCursor(req) })
	if err != nil {
		return "", err
	}
	if resp.PartitionCursor == nil {
		return "", fmt.Errorf("disrest: get cursor of %s/%d: no cursor in the answer", k.stream, k.part)
	}
	return *resp.PartitionCursor, nil
}

// consume runs GetRecords at cursor and maps the records; it returns them
// and next_partition_cursor.
func (s *Store) consume(ctx context.Context, k partKey, cursor string, maxBytes int, logAppend bool) ([]fetched, string, error) {
	mb := int32(min(max(maxBytes, 1), math.MaxInt32))
	resp, err := callIdempotent(ctx, s, "get records", func() (*model.ConsumeRecordsResponse, error) {
		return s.c.ConsumeRecords(&model.ConsumeRecordsRequest{PartitionCursor: cursor, MaxFetchBytes: &mb})
	})
	if err != nil {
		return nil, "", err
	}
	next := ""
	if resp.NextPartitionCursor != nil {
		next = *resp.NextPartitionCursor
	}
	if resp.Records == nil {
		return nil, next, nil
	}
	out := make([]fetched, 0, len(*resp.Records))
	for i, r := range *resp.Records {
		if r.SequenceNumber == nil {
			return nil, "", fmt.Errorf("disrest: get records of %s/%d: record %d has no sequence number", k.stream, k.part, i)
		}
		sn, err := strconv.ParseInt(*r.SequenceNumber, 10, 64)
		if err != nil {
			return nil, "", fmt.Errorf("disrest: get records of %s/%d: sequence number %q", k.stream, k.part, *r.SequenceNumber)
		}
		var data []byte
		if r.Data != nil {
			if data, err = base64.StdEncoding.DecodeString(*r.Data); err != nil {
				return nil, "", fmt.Errorf("disrest: get records of %s/%d: record %d: data is not Base64", k.stream, k.part, sn)
			}
		}
		var ts int64
		if r.Timestamp != nil {
			ts = *r.Timestamp
		}
		rec, ts := fromDIS(data, r.PartitionKey, ts, logAppend)
		rec.TimestampDelta64 = ts
		out = append(out, fetched{sn: sn, rec: rec, n: len(data)})
	}
	return out, next, nil
}

// readAt reads records from sn on, following and refreshing the cursor
// cache. trimmed records beyond maxBytes are dropped (at least one is
// kept) and then the next cursor is not cached.
func (s *Store) readAt(ctx context.Context, k partKey, sn int64, maxBytes int, logAppend bool) ([]fetched, error) {
	ck := cursorKey{k, sn}
	cur, cached := s.cursors.get(ck)
	for {
		if !cached {
			var err error
			if cur, err = s.cursor(ctx, k, model.GetShowCursorRequestCursorTypeEnum().AT_SEQUENCE_NUMBER, sn, -1); err != nil {
				return nil, err
			}
		}
		at := time.Now()
		recs, next, err := s.consume(ctx, k, cur, maxBytes, logAppend)
		if err == nil && len(recs) == 0 && maxBytes < maxRecordBytes+envelopeHeader {
			// DIS returns nothing when the next record is larger than
			// max_fetch_bytes; KIP-74 wants it anyway. Ask again for up to
			// one record's limit and keep only the first (next is then
			// not where the kept records end).
			recs, _, err = s.consume(ctx, k, cur, maxRecordBytes+envelopeHeader+64, logAppend)
			if err == nil && len(recs) > 0 {
				if cached {
					s.cursors.drop(ck)
				}
				return recs[:1], nil
			}
		}
		if err != nil {
			if cached && (codeOf(err) == "DIS.4225" || codeOf(err) == "DIS.4217") {
				s.cursors.drop(ck)
				cached = false
				continue // expired or unknown cursor: ask for a new one
			}
			return nil, err
		}
		if cached {
			s.cursors.drop(ck)
		}
		size, keep := 0, len(recs)
		for i, f := range recs {
			if i > 0 && size+f.n > maxBytes {
				keep = i
				break
			}
			size += f.n
		}
		switch {
		case keep < len(recs):
			recs = recs[:keep]
		case next != "" && len(recs) > 0:
			s.cursors.put(cursorKey{k, recs[len(recs)-1].sn + 1}, next, at)
		case next != "":
			s.cursors.put(ck, next, at)
		}
		return recs, nil
	}
}

// Read reads records from offset on with GetRecords and answers them as one
// Kafka record batch (magic 2, uncompressed) starting at offset.
func (s *Store) Read(ctx context.Context, stream string, part int32, offset int64, maxBytes int) (disbackend.ReadResult, error) {
	k := partKey{stream, part}
	si, err := s.streamInfo(ctx, stream, false)
	if err != nil {
		return disbackend.ReadResult{}, err
	}
	r, err := s.rangeOf(ctx, stream, part)
	if err != nil {
		return disbackend.ReadResult{}, err
	}
	if offset < r.First || offset > r.Next {
		return disbackend.ReadResult{Range: r}, fmt.Errorf("disrest: read %s/%d at %d: %w [%d : %d]",
			stream, part, offset, disbackend.ErrOffsetOutOfRange, r.First, r.Next)
	}
	if offset == r.Next {
		return disbackend.ReadResult{Range: r}, nil
	}
	logAppend := si.st.Config.TimestampType == disbackend.LogAppendTime
	recs, err := s.readAt(ctx, k, offset, maxBytes, logAppend)
	if err != nil {
		return disbackend.ReadResult{Range: r}, err
	}
	if len(recs) == 0 {
		return disbackend.ReadResult{Range: r}, nil
	}
	if last := recs[len(recs)-1].sn + 1; last > r.Next {
		r.Next = last
		s.ranges.put(k, r)
	}
	raw := buildBatch(recs, logAppend)
	return disbackend.ReadResult{Batches: [][]byte{raw}, Bytes: len(raw), Range: r}, nil
}

// buildBatch encodes records as one uncompressed Kafka record batch (magic
// 2) whose base offset is the first record's sequence number; on a
// LogAppendTime stream the batch says so and its max timestamp is the
// latest DIS timestamp.
func buildBatch(recs []fetched, logAppend bool) []byte {
	base := recs[0].sn
	krs := make([]kmsg.Record, len(recs))
	for i, f := range recs {
		krs[i] = f.rec
		krs[i].OffsetDelta = int32(f.sn - base)
	}
	var attrs int16
	if logAppend {
		attrs |= 0x08
	}
	return kafkawire.EncodeBatch(base, attrs, krs)
}

// BatchAtTimestamp asks DIS for a cursor AT_TIMESTAMP ts and answers the
// records from there as one batch; nil when there are none.
func (s *Store) BatchAtTimestamp(ctx context.Context, stream string, part int32, ts int64) ([]byte, error) {
	k := partKey{stream, part}
	si, err := s.streamInfo(ctx, stream, false)
	if err != nil {
		return nil, err
	}
	if _, err := s.rangeOf(ctx, stream, part); err != nil {
		return nil, err
	}
	cur, err := s.cursor(ctx, k, model.GetShowCursorRequestCursorTypeEnum().AT_TIMESTAMP, 0, max(ts, 0))
	if err != nil {
		return nil, err
	}
	logAppend := si.st.Config.TimestampType == disbackend.LogAppendTime
	recs, _, err := s.consume(ctx, k, cur, maxRecordBytes, logAppend)
	if err != nil || len(recs) == 0 {
		return nil, err
	}
	return buildBatch(recs, logAppend), nil
}

// BatchWithMaxTimestamp reads the whole partition (DIS has no index for
// it) and answers a batch starting at the first record with the largest
// timestamp. It costs a full scan; Kafka clients ask for it rarely
// (ListOffsets -3, KIP-734).
func (s *Store) BatchWithMaxTimestamp(ctx context.Context, stream string, part int32) ([]byte, error) {
	k := partKey{stream, part}
	si, err := s.streamInfo(ctx, stream, false)
	if err != nil {
		return nil, err
	}
	r, err := s.rangeOf(ctx, stream, part)
	if err != nil {
		return nil, err
	}
	logAppend := si.st.Config.TimestampType == disbackend.LogAppendTime
	var best *fetched
	for off := r.First; off < r.Next; {
		recs, err := s.readAt(ctx, k, off, 8<<20, logAppend)
		if err != nil {
			return nil, err
		}
		if len(recs) == 0 {
			break
		}
		for i := range recs {
			if best == nil || recs[i].rec.TimestampDelta64 > best.rec.TimestampDelta64 {
				b := recs[i]
				best = &b
			}
		}
		off = recs[len(recs)-1].sn + 1
	}
	if best == nil {
		return nil, nil
	}
	return buildBatch([]fetched{*best}, logAppend), nil
}
