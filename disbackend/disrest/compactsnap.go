package disrest

// Key-index snapshots (see compact.go): a partition's key index written
// to SnapshotStream, pointed at by compactApp's checkpoint on the
// partition, and read back at start.

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/disapi"
)

const (
	snapshotEvery     = 10_000 // records indexed since the last snapshot
	snapshotChunkKeys = 20_000 // keys per snapshot record (<= 36 bytes each: under DIS's 1 MB)
)

// SnapshotStream is the gateway-owned stream of key-index snapshots of
// compacted partitions (compactsnap.go); not a topic.
const SnapshotStream = "__disgw_compaction"

// snapshotPointer is the checkpoint metadata pointing at a snapshot:
// "snap=<sn>;n=<records>;id=<hex>;sid=<stream_id>".
func snapshotPointer(sn int64, n int, id uint64, sid string) string {
	return "snap=" + strconv.FormatInt(sn, 10) + ";n=" + strconv.Itoa(n) + ";id=" + strconv.FormatUint(id, 16) + ";sid=" + sid
}

func parseSnapshotPointer(meta string) (sn int64, n int, id uint64, sid string, ok bool) {
	var err error
	for _, f := range strings.Split(meta, ";") {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "snap":
			sn, err = strconv.ParseInt(v, 10, 64)
		case "n":
			n, err = strconv.Atoi(v)
		case "id":
			id, err = strconv.ParseUint(v, 16, 64)
		case "sid":
			sid = v
		}
		if err != nil {
			return 0, 0, 0, "", false
		}
	}
	return sn, n, id, sid, n > 0 && sid != ""
}

const snapshotMagic = "DGKS"

// encodeSnapshot returns the snapshot records of cp (locked).
func encodeSnapshot(cp *cpart, id uint64) [][]byte {
	hdr := func(chunk, n int) []byte {
		b := append([]byte(snapshotMagic), 1)
		b = append(b, byte(len(cp.streamID)))
		b = append(b, cp.streamID...)
		b = binary.BigEndian.AppendUint32(b, uint32(cp.k.part))
		b = binary.BigEndian.AppendUint64(b, id)
		b = binary.BigEndian.AppendUint32(b, uint32(chunk))
		b = binary.BigEndian.AppendUint32(b, uint32(n))
		return b
	}
	n := max(1, (len(cp.keys)+snapshotChunkKeys-1)/snapshotChunkKeys)
	out := make([][]byte, n)
	// Chunk 0 holds indexed and the samples.
	b := hdr(0, n)
	b = binary.AppendVarint(b, cp.indexed)
	b = binary.AppendUvarint(b, uint64(len(cp.samples)))
	for _, sm := range cp.samples {
		b = binary.AppendVarint(b, sm.next)
		b = binary.AppendVarint(b, sm.at)
	}
	chunk, inChunk := 0, 0
	count := func(c int) int { return min(snapshotChunkKeys, len(cp.keys)-c*snapshotChunkKeys) }
	b = binary.AppendUvarint(b, uint64(max(count(0), 0)))
	for h, e := range cp.keys {
		if inChunk == snapshotChunkKeys {
			out[chunk] = b
			chunk++
			inChunk = 0
			b = hdr(chunk, n)
			b = binary.AppendUvarint(b, uint64(count(chunk)))
		}
		b = append(b, h[:]...)
		b = binary.AppendVarint(b, e.off)
		b = binary.AppendVarint(b, e.since)
		inChunk++
	}
	out[chunk] = b
	return out
}

// decodeSnapshotChunk parses one snapshot record of (sid, part, id) into
// cp (locked); it returns the chunk number, the number of chunks and, in
// chunk 0, the offset the snapshot indexed up to.
func decodeSnapshotChunk(b []byte, sid string, part int32, id uint64, cp *cpart, c *compactor) (chunk, n int, indexed int64, ok bool) {
	if len(b) < 6 || string(b[:4]) != snapshotMagic || b[4] != 1 {
		return 0, 0, 0, false
	}
	l := int(b[5])
	b = b[6:]
	if len(b) < l+20 || string(b[:l]) != sid {
		return 0, 0, 0, false
	}
	b = b[l:]
	if int32(binary.BigEndian.Uint32(b)) != part || binary.BigEndian.Uint64(b[4:]) != id {
		return 0, 0, 0, false
	}
	chunk, n = int(binary.BigEndian.Uint32(b[12:])), int(binary.BigEndian.Uint32(b[16:]))
	b = b[20:]
	bad := false
	varint := func() int64 {
		v, k := binary.Varint(b)
		if k <= 0 {
			bad = true
			return 0
		}
		b = b[k:]
		return v
	}
	uvarint := func() uint64 {
		v, k := binary.Uvarint(b)
		if k <= 0 {
			bad = true
			return 0
		}
		b = b[k:]
		return v
	}
	if chunk == 0 {
		indexed = varint()
		ns := uvarint()
		for i := uint64(0); i < ns && !bad; i++ {
			next := varint()
			at := varint()
			cp.samples = append(cp.samples, sample{next, at})
		}
		slices.SortFunc(cp.samples, func(a, b sample) int { return cmp.Compare(a.next, b.next) })
		cp.samples = slices.CompactFunc(cp.samples, func(a, b sample) bool { return a.next == b.next })
	}
	keys := uvarint()
	for i := uint64(0); i < keys && !bad; i++ {
		if len(b) < 16 {
			bad = true
			break
		}
		var h keyHash
		copy(h[:], b[:16])
		b = b[16:]
		off := varint()
		since := varint()
		if bad {
			break
		}
		e, had := cp.keys[h]
		if !had || off > e.off {
			if !had {
				c.keys.Add(1)
			}
			cp.keys[h] = centry{off, since}
		}
	}
	return chunk, n, indexed, !bad
}

// ensureSnapshots creates SnapshotStream and compactApp once.
func (c *compactor) ensureSnapshots(ctx context.Context) error {
	return c.snapOnce.do(func() error {
		err := c.s.createStream(ctx, SnapshotStream, 1, disapi.MaxRetentionHours, nil)
		if err != nil && !errors.Is(err, disbackend.ErrStreamExists) {
			return err
		}
		return c.s.ensureApp(ctx, compactApp)
	})
}

// snapshot writes cp's index to SnapshotStream and points compactApp's
// checkpoint on the partition at it, both under the partition's fence key
// (the snapshot's records share SnapshotStream with other nodes').
func (c *compactor) snapshot(ctx context.Context, cp *cpart, r disbackend.PartitionRange) error {
	if err := c.ensureSnapshots(ctx); err != nil {
		return err
	}
	var idb [8]byte
	_, _ = rand.Read(idb[:])
	id := binary.BigEndian.Uint64(idb[:])
	cp.mu.Lock()
	chunks := encodeSnapshot(cp, id)
	indexed, sid := cp.indexed, cp.streamID
	cp.mu.Unlock()
	recs := make([]disbackend.Record, len(chunks))
	now := time.Now().UnixMilli()
	for i, ch := range chunks {
		recs[i] = disbackend.Record{Value: ch, Timestamp: now, OffsetDelta: int32(i)}
	}
	key := disbackend.PartitionKey(cp.k.stream, cp.k.part)
	res, err := c.s.appendFenced(partKey{SnapshotStream, 0}, recordsBatch(recs), nil, key).Wait(ctx)
	if err != nil {
		return err
	}
	sn := min(max(indexed, r.First), r.Next)
	if err := c.s.fence.mayWrite(key); err != nil {
		return err
	}
	if err := c.s.commit(ctx, compactApp, cp.k.stream, cp.k.part, sn, snapshotPointer(res.BaseOffset, len(chunks), id, sid)); err != nil {
		return err
	}
	cp.mu.Lock()
	cp.snapAt, cp.snapIdx = time.Now(), indexed
	cp.mu.Unlock()
	c.s.log.Info("compactor: key index snapshot", zap.String("stream", cp.k.stream), zap.Int32("partition", cp.k.part),
		zap.Int64("indexed", indexed), zap.Int("records", len(chunks)), zap.Int64("snapshot_sn", res.BaseOffset))
	return nil
}

// restore reads the partition's last snapshot into cp.
func (c *compactor) restore(ctx context.Context, cp *cpart) error {
	_, meta, err := c.s.checkpointOf(ctx, compactApp, cp.k.stream, cp.k.part)
	if err != nil {
		return err
	}
	sn, n, id, sid, ok := parseSnapshotPointer(meta)
	cp.mu.Lock()
	mine := cp.streamID
	cp.mu.Unlock()
	if !ok || sid != mine {
		return errors.New("no snapshot")
	}
	got := map[int]bool{}
	var indexed int64
	// Its records follow sn, others' snapshots maybe between them.
	err = c.s.scan(ctx, partKey{SnapshotStream, 0}, sn, sn+int64(n)+1000, 4<<20, false, func(recs []fetched) bool {
		cp.mu.Lock()
		defer cp.mu.Unlock()
		for i := range recs {
			if chunk, _, idx, ok := decodeSnapshotChunk(recs[i].rec.Value, sid, cp.k.part, id, cp, c); ok {
				got[chunk] = true
				if chunk == 0 {
					indexed = idx
				}
			}
		}
		return len(got) < n
	})
	if err != nil {
		return err
	}
	if len(got) < n {
		return fmt.Errorf("snapshot at %d of %s has %d of its %d records", sn, SnapshotStream, len(got), n)
	}
	// Complete: the partition is read from where the snapshot ends.
	cp.mu.Lock()
	cp.indexed = max(cp.indexed, indexed)
	cp.snapAt, cp.snapIdx = time.Now(), cp.indexed
	keys := len(cp.keys)
	cp.mu.Unlock()
	c.restored.Add(1)
	c.s.log.Info("compactor: key index restored from its snapshot", zap.String("stream", cp.k.stream),
		zap.Int32("partition", cp.k.part), zap.Int("keys", keys), zap.Int64("indexed", indexed), zap.String("snapshot", strconv.FormatUint(id, 16)))
	return nil
}
