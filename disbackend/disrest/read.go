package disrest

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2/model"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/disapi"
	"github.com/disgw/disgw/kafkawire/batch"
)

// cursorCache keeps next_partition_cursor values by the sequence number
// they start at, so the GetRecords that reads on where one ended needs no
// GetCursor. Entries are used until cursorTTL after DIS gave them (DIS: 5
// minutes), and shared by consumers at the same position.
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
	rec disbackend.Record // OffsetDelta unset: sn is its offset
	n   int               // DIS data bytes
	txn txnMeta           // its batch's producer and transaction bits (envelope version 2)
	// copyOf is the sequence number of the record this compactor's copy
	// copies (envelope version 3), else -1.
	copyOf int64
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
		rec, m, copyOf := fromDIS(data, r.PartitionKey, ts, logAppend)
		out = append(out, fetched{sn: sn, rec: rec, n: len(data), txn: m, copyOf: copyOf})
	}
	return out, next, nil
}

// fetchAt runs one GetRecords from sn on, asking for ask bytes, following
// and refreshing the cursor cache: the next cursor is kept under the
// sequence number after the last record returned (sn when none was).
func (s *Store) fetchAt(ctx context.Context, k partKey, sn int64, ask int, logAppend bool) ([]fetched, error) {
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
		recs, next, err := s.consume(ctx, k, cur, ask, logAppend)
		if err != nil {
			if cached && (codeOf(err) == disapi.CodeCursorExpired || codeOf(err) == disapi.CodeCursorInvalid) {
				s.cursors.drop(ck)
				cached = false
				continue // expired or unknown cursor: ask for a new one
			}
			return nil, err
		}
		if cached {
			s.cursors.drop(ck)
		}
		if next != "" {
			end := sn
			if len(recs) > 0 {
				end = recs[len(recs)-1].sn + 1
			}
			s.cursors.put(cursorKey{k, end}, next, at)
		}
		return recs, nil
	}
}

// Read reads records from offset on and answers them as one Kafka record
// batch (magic 2, uncompressed) starting at offset, of at most maxBytes
// unless one record is larger (then that record alone: KIP-74). Records
// come from the partition's read-ahead buffer, or the GetRecords in flight
// at offset, or a new GetRecords shared with every Read at offset
// (readahead.go); the range is DIS's as of this poll tick.
//
// A ctx carrying a principal's credentials (disbackend.WithCredentials)
// is served from those shared caches only after AuthorizeStream: a
// GetCursor signed with them succeeded within PrincipalTTL, else it is
// made first (ErrNotAuthorized when DIS refuses it).
func (s *Store) Read(ctx context.Context, stream string, part int32, offset int64, maxBytes int) (disbackend.ReadResult, error) {
	if err := s.AuthorizeStream(ctx, stream, disbackend.AccessRead); err != nil {
		return disbackend.ReadResult{}, err
	}
	k := partKey{stream, part}
	t0 := s.readStart()
	si, err := s.streamInfo(ctx, stream, false)
	if err != nil {
		return disbackend.ReadResult{}, err
	}
	if part >= si.st.PartitionCount {
		// Not readable as cached: read the stream again (it may have grown).
		if si, err = s.streamInfo(ctx, stream, true); err != nil {
			return disbackend.ReadResult{}, err
		}
		if part < 0 || part >= si.st.PartitionCount {
			return disbackend.ReadResult{}, fmt.Errorf("disrest: read %s/%d: %w (%d readable partitions)",
				stream, part, disbackend.ErrPartitionNotFound, si.st.PartitionCount)
		}
	}
	logAppend := si.st.Config.TimestampType == disbackend.LogAppendTime
	p := s.reads.part(k, si.id, logAppend)
	if si.writable > 0 && part >= si.writable {
		// DELETED by a scale-down (readable until it expires): read from
		// DIS, never from the buffer, so nothing is served once DIS no
		// longer serves it.
		p.mu.Lock()
		p.dropSegs(&s.reads)
		p.mu.Unlock()
	}
	r, err := s.readRange(ctx, p, k, offset, t0)
	if err != nil {
		return disbackend.ReadResult{}, readErr(stream, part, err)
	}
	if offset < r.First || offset > r.Next {
		return disbackend.ReadResult{Range: r}, fmt.Errorf("disrest: read %s/%d at %d: %w [%d : %d]",
			stream, part, offset, disbackend.ErrOffsetOutOfRange, r.First, r.Next)
	}
	if offset == r.Next {
		return disbackend.ReadResult{Range: r}, nil
	}
	recs, err := s.records(ctx, p, k, offset, maxBytes, r, t0)
	if err != nil {
		if errors.Is(err, disbackend.ErrOffsetOutOfRange) {
			// Retention moved the start past offset since the range was
			// read: answer the current one.
			if nr, rerr := s.rangeOf(ctx, stream, part); rerr == nil {
				r = nr
			}
		}
		return disbackend.ReadResult{Range: r}, readErr(stream, part, err)
	}
	if len(recs) == 0 {
		return disbackend.ReadResult{Range: r}, nil
	}
	if last := recs[len(recs)-1].sn + 1; last > r.Next {
		r.Next = last
		s.ranges.put(k, r)
	}
	bs, n := buildBatches(recs, logAppend, r.First)
	return disbackend.ReadResult{Batches: bs, Bytes: n, Range: r}, nil
}

// readErr names the partition in a context error (DIS errors already say
// what they were doing).
func readErr(stream string, part int32, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("disrest: read %s/%d: %w", stream, part, err)
	}
	return err
}

// fitting returns how many of recs, from the first, buildBatches encodes
// in at most maxBytes; at least one when recs is not empty.
func fitting(recs []fetched, maxBytes int) int {
	if len(recs) == 0 {
		return 0
	}
	size := 0
	var base, ts0 int64
	for i := range recs {
		if i == 0 || !sameBatch(&recs[i-1].txn, &recs[i].txn) {
			base, ts0 = recs[i].sn, recs[i].rec.Timestamp
			size += batch.HeaderLen
		}
		size += batch.RecordLen(&recs[i].rec, recs[i].rec.Timestamp-ts0, recs[i].sn-base)
		if i > 0 && size > maxBytes {
			return i
		}
	}
	return len(recs)
}

// sameBatch reports whether records of txnMeta a and then b go in one
// batch: both of no transaction, or both of the same producer's
// transaction and neither a marker (a marker is a batch of its own).
func sameBatch(a, b *txnMeta) bool {
	if a.flags != b.flags {
		return false
	}
	return a.flags == 0 || (a.flags == txnFlagTransactional && a.pid == b.pid && a.epoch == b.epoch)
}

// buildBatches encodes records as uncompressed Kafka record batches
// (buildBatch), one for each run of records of the same batch (sameBatch),
// so that a transaction's records and markers read back as the batches a
// read_committed consumer filters. It returns them and their bytes. A
// compactor's copy of a record at or past logStart (the partition's log
// start offset: the record copied is still there) is left out, its offset
// a gap of its batch (hidden).
func buildBatches(recs []fetched, logAppend bool, logStart int64) (out [][]byte, n int) {
	for i := 0; i < len(recs); {
		j := i + 1
		for j < len(recs) && sameBatch(&recs[i].txn, &recs[j].txn) {
			j++
		}
		b := buildBatch(recs[i:j], logAppend, logStart)
		out = append(out, b)
		n += len(b)
		i = j
	}
	return out, n
}

// hidden reports whether a Kafka read of a partition whose log start
// offset is logStart leaves f out: f is a compactor's copy of a record
// still in the partition, which a reader from the start reads in its
// place and a reader that follows the partition has read already
// (docs/compaction.md).
func (f *fetched) hidden(logStart int64) bool { return f.copyOf >= 0 && f.copyOf >= logStart }

// buildBatch encodes records as one uncompressed Kafka record batch (magic
// 2) whose base offset is the first record's sequence number and whose
// partition leader epoch is disbackend.LeaderEpoch (the gateway's); on a
// LogAppendTime stream the batch says so and its max timestamp is the
// latest DIS timestamp. The first record's txnMeta, when transactional,
// gives the batch its producer and its transactional and control bits.
// Records hidden at logStart (fetched.hidden; math.MaxInt64: none) are
// left out as Kafka's log cleaner leaves out what it removed: the batch
// keeps its last offset delta, so a consumer's next fetch starts past
// them, and a batch of hidden records alone is a header without records
// (KAFKA-5443).
func buildBatch(recs []fetched, logAppend bool, logStart int64) []byte {
	h := batch.NewHeader(recs[0].sn)
	h.PartitionLeaderEpoch = disbackend.LeaderEpoch
	if logAppend {
		h.Attributes |= batch.AttrLogAppendTime
	}
	if m := recs[0].txn; m.transactional() {
		h.Attributes |= batch.AttrTransactional
		if m.flags&txnFlagControl != 0 {
			h.Attributes |= batch.AttrControl
		}
		h.ProducerID, h.ProducerEpoch = m.pid, m.epoch
	}
	rs := make([]disbackend.Record, 0, len(recs))
	for i := range recs {
		if f := &recs[i]; !f.hidden(logStart) {
			r := f.rec
			r.OffsetDelta = int32(f.sn - h.BaseOffset)
			rs = append(rs, r)
		}
	}
	if len(rs) == len(recs) {
		return batch.Encode(h, rs)
	}
	// Some hidden: the header spans them all, as the cleaner's rewrite.
	h.FirstTimestamp, h.MaxTimestamp = recs[0].rec.Timestamp, recs[0].rec.Timestamp
	for i := range recs {
		h.MaxTimestamp = max(h.MaxTimestamp, recs[i].rec.Timestamp)
	}
	h.LastOffsetDelta = int32(recs[len(recs)-1].sn - h.BaseOffset)
	raw, err := batch.Rewrite(h, rs, -1)
	if err != nil { // no codec: cannot fail
		panic("disrest: " + err.Error())
	}
	return raw
}

// BatchAtTimestamp asks DIS for a cursor AT_TIMESTAMP ts and answers the
// records from there as one batch; nil when there are none. A ctx with a
// principal's credentials is checked as Read checks it.
func (s *Store) BatchAtTimestamp(ctx context.Context, stream string, part int32, ts int64) ([]byte, error) {
	if err := s.AuthorizeStream(ctx, stream, disbackend.AccessRead); err != nil {
		return nil, err
	}
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
	return buildBatch(recs, logAppend, math.MaxInt64), nil
}

// BatchWithMaxTimestamp reads the whole partition (DIS has no index for
// it) and answers a batch starting at the first record with the largest
// timestamp. It costs a full scan; Kafka clients ask for it rarely
// (ListOffsets -3, KIP-734).
func (s *Store) BatchWithMaxTimestamp(ctx context.Context, stream string, part int32) ([]byte, error) {
	if err := s.AuthorizeStream(ctx, stream, disbackend.AccessRead); err != nil {
		return nil, err
	}
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
		recs, err := s.fetchAt(ctx, k, off, 8<<20, logAppend)
		if err != nil {
			return nil, err
		}
		if len(recs) == 0 {
			break
		}
		for i := range recs {
			if best == nil || recs[i].rec.Timestamp > best.rec.Timestamp {
				b := recs[i]
				best = &b
			}
		}
		off = recs[len(recs)-1].sn + 1
	}
	if best == nil {
		return nil, nil
	}
	return buildBatch([]fetched{*best}, logAppend, math.MaxInt64), nil
}
