package localstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/kafkawire/batch"
)

// Producer snapshots: Kafka's <offset>.snapshot files (ProducerStateManager),
// one per stream.
//
// <sid>-<n>.snapshot holds the idempotent producer states of every
// partition of stream sid as the batches of its segments numbered n and
// below left them (those expired or dropped before it was taken
// excluded). A log cleaner's segment keeps the number of the first
// segment it replaced and holds batches up to the last one (its index's
// covers), so Open replays the segments whose covers is above n. It is taken when segment n is sealed, with every batch of n
// synced and none of a later segment accepted yet (the writer rolls a
// segment before it accepts the group that goes to the next one; a
// segment sealed otherwise gets none, and Close and Open take one then),
// and at Close; the stream's older snapshots are then removed. Open loads
// the newest one that reads back whole and replays only the segments
// after it: the journal's producer deltas and the frames scanned after a
// crash, or, when a snapshot is missing or torn, the segments' batches.
// Replaying skips a batch a state already holds (rebuildProducer), so a
// segment replayed that the snapshot covered changes nothing.
//
// The file, big-endian: magic uint32 (snapshotMagic), version uint32,
// states uint32, 0 uint32; the states; CRC-32C of everything before it
// uint32. A state:
//
//	part              int32
//	epoch             int16
//	batches           uint8   1 to MaxProducerBatches
//	0                 uint8
//	producer id       int64
//	last append time  int64   ms
//	txn first offset  int64   first offset of the producer's open transaction
//	                          (Kafka currentTxnFirstOffset); -1: none, always today
//	batches, oldest first, each: first sequence int32, last sequence int32,
//	base offset int64, last offset int64, max timestamp int64 (ms)
//
// The same layout carries a journal block's producer deltas (journal.go).
const (
	snapshotMagic     = 0x44475031 // "DGP1"
	snapshotVersion   = 1
	snapshotHeaderLen = 16
	stateHeadLen      = 32
	stateBatchLen     = 32
)

// snapshotEntry is one producer state read back.
type snapshotEntry struct {
	key     producerKey
	epoch   int16
	lastApp int64
	batches []disbackend.ProducerBatch
}

func appendProducerState(dst []byte, k producerKey, ps *disbackend.ProducerState) []byte {
	be := binary.BigEndian
	dst = be.AppendUint32(dst, uint32(k.part))
	dst = be.AppendUint16(dst, uint16(ps.Epoch))
	dst = append(dst, byte(len(ps.Batches)), 0)
	dst = be.AppendUint64(dst, uint64(k.pid))
	dst = be.AppendUint64(dst, uint64(ps.LastAppendMS))
	dst = be.AppendUint64(dst, ^uint64(0)) // no open transaction
	for _, b := range ps.Batches {
		dst = be.AppendUint32(dst, uint32(b.FirstSeq))
		dst = be.AppendUint32(dst, uint32(b.LastSeq))
		dst = be.AppendUint64(dst, uint64(b.BaseOffset))
		dst = be.AppendUint64(dst, uint64(b.LastOffset))
		dst = be.AppendUint64(dst, uint64(b.MaxTimestamp))
	}
	return dst
}

// decodeProducerState decodes one state of stream sid from the front of
// b and returns it and its length; ok is false when it is malformed.
func decodeProducerState(b []byte, sid uint64) (snapshotEntry, int, bool) {
	if len(b) < stateHeadLen {
		return snapshotEntry{}, 0, false
	}
	be := binary.BigEndian
	n := int(b[6])
	size := stateHeadLen + n*stateBatchLen
	if n == 0 || n > disbackend.MaxProducerBatches || len(b) < size {
		return snapshotEntry{}, 0, false
	}
	e := snapshotEntry{
		key:     producerKey{sid: sid, part: int32(be.Uint32(b)), pid: int64(be.Uint64(b[8:]))},
		epoch:   int16(be.Uint16(b[4:])),
		lastApp: int64(be.Uint64(b[16:])),
	}
	if e.key.part < 0 || e.key.pid < 0 {
		return snapshotEntry{}, 0, false
	}
	for i := 0; i < n; i++ {
		r := b[stateHeadLen+i*stateBatchLen:]
		e.batches = append(e.batches, disbackend.ProducerBatch{
			FirstSeq: int32(be.Uint32(r)), LastSeq: int32(be.Uint32(r[4:])),
			BaseOffset: int64(be.Uint64(r[8:])), LastOffset: int64(be.Uint64(r[16:])), MaxTimestamp: int64(be.Uint64(r[24:])),
		})
	}
	return e, size, true
}

// restoreProducer replays a state read back into the producer states:
// its batches in order, as they were appended (those the state already
// holds skipped, as rebuildProducer does).
func (s *Store) restoreProducer(e *snapshotEntry) {
	for _, b := range e.batches {
		if !s.holdsBatch(e.key, b.BaseOffset) {
			s.producers.Rebuild(e.key, e.epoch, b.FirstSeq, b.BaseOffset, b.LastOffset, b.MaxTimestamp, e.lastApp)
		}
	}
}

// writeSnapshot writes stream st's producer states as its snapshot after
// segment n, then removes its older snapshots. Requires wmu, with every
// batch of segment n and below synced and none after accepted.
func (s *Store) writeSnapshot(st *stream, n uint64) error {
	be := binary.BigEndian
	buf := make([]byte, snapshotHeaderLen)
	be.PutUint32(buf[0:], snapshotMagic)
	be.PutUint32(buf[4:], snapshotVersion)
	count := 0
	s.producers.Each(func(k producerKey, ps *disbackend.ProducerState) {
		if k.sid == st.sid && len(ps.Batches) > 0 {
			buf = appendProducerState(buf, k, ps)
			count++
		}
	})
	be.PutUint32(buf[8:], uint32(count))
	buf = be.AppendUint32(buf, batch.Checksum(buf))
	path := s.fs.PathJoin(s.segDir, segmentName(st.sid, n)+"."+extSnapshot)
	if err := writeFileAtomic(s.fs, s.segDir, path, buf, s.hook, "snapshot"); err != nil {
		return fmt.Errorf("producer snapshot %s: %w", path, err)
	}
	s.hook("snapshot: written")
	old := st.snapshots
	st.snapshots = []uint64{n}
	for _, m := range old {
		if m != n {
			if err := s.fs.Remove(s.fs.PathJoin(s.segDir, segmentName(st.sid, m)+"."+extSnapshot)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("producer snapshot %d of stream %d: remove: %w", m, st.sid, err)
			}
		}
	}
	s.hook("snapshot: older removed")
	return nil
}

var errBadSnapshot = errors.New("producer snapshot incomplete or corrupt")

// readSnapshot reads stream sid's snapshot after segment n.
func readSnapshot(fs vfs.FS, dir string, sid, n uint64) ([]snapshotEntry, error) {
	f, err := fs.Open(fs.PathJoin(dir, segmentName(sid, n)+"."+extSnapshot))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	be := binary.BigEndian
	if len(buf) < snapshotHeaderLen+4 || be.Uint32(buf) != snapshotMagic || be.Uint32(buf[4:]) != snapshotVersion ||
		be.Uint32(buf[len(buf)-4:]) != batch.Checksum(buf[:len(buf)-4]) {
		return nil, errBadSnapshot
	}
	count := int(be.Uint32(buf[8:]))
	rest := buf[snapshotHeaderLen : len(buf)-4]
	out := make([]snapshotEntry, 0, count)
	for i := 0; i < count; i++ {
		e, n, ok := decodeProducerState(rest, sid)
		if !ok {
			return nil, errBadSnapshot
		}
		out = append(out, e)
		rest = rest[n:]
	}
	if len(rest) != 0 {
		return nil, errBadSnapshot
	}
	return out, nil
}
