package localstore

import (
	"encoding/binary"
	"io"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/kafkawire/batch"
)

// The journal: what bounds a restart after a crash (docs/architecture.md
// §4).
//
// An active segment's index lives in memory (its segParts' chunks) until
// the segment is sealed, when it is written as the segment's .index. So
// that a restart after a crash (kill -9, power loss) need not scan every
// frame of the active segments, the syncer appends the chunks made or
// grown since the last time to the segment's <name>.journal, as one block,
// each time the bytes published and not yet journaled, summed over every
// active segment, pass Options.MaxUnindexedBytes (the max_unindexed_bytes
// setting). A block also carries the producer states that the idempotent
// batches published since the last block left (the segment's delta), so
// that the producer snapshot taken when the previous segment was sealed
// plus the blocks give the states without reading the batches.
//
// Open reads the blocks up to the first torn or corrupt one and scans the
// .log from the end the last good block covers: at most
// max_unindexed_bytes, plus the batches written but not yet synced at the
// crash (a few write groups of at most 16 MiB). A block covers only frames
// already synced (published), so a block that reached the disk never
// names a torn frame; it is synced too, so that a power loss loses none.
//
// A block, big-endian: magic uint32 (journalMagic), body length uint32,
// CRC-32C of the body uint32, 0 uint32; then the body: covered int64 (the
// .log bytes the journal covers once this block is applied), chunk
// entries uint32, producer states uint32, 0 uint32, 0 uint32, the chunk
// entries (index.go's layout; an entry at the position of a chunk an
// earlier block named replaces it: the chunk grew), the producer states
// (snapshot.go's layout).
const (
	journalMagic     = 0x44474a31 // "DGJ1"
	journalHeaderLen = 16
	journalBodyHead  = 24
	journalEntryLen  = 4 + chunkEntryLen
)

// noteJournal records, on the syncer, that sp's segment published a frame
// of sp (ending at end) and, for an idempotent batch, the producer state
// it leaves.
func (sg *segment) noteJournal(sp *segPart, f *frameInfo, end int64) {
	if !sp.jTouched {
		sp.jTouched = true
		sg.jparts = append(sg.jparts, sp)
	}
	sg.published = max(sg.published, end)
	if f.pid >= 0 {
		sg.delta.Rebuild(producerKey{sid: sg.sid, part: f.part, pid: f.pid}, f.epoch, f.seq, f.base, f.last, f.maxTS, f.appendMS)
	}
}

// unjournaled is how many published bytes of the segment no block covers
// yet. The syncer's.
func (sg *segment) unjournaled() int64 { return sg.published - sg.journaled }

// writeJournalBlock appends one block to the segment's journal with what
// was published since the last one, and syncs it. On the syncer (or the
// writer after quiesce). A failure leaves the journal as it was (a torn
// block is ignored at Open) and stops journaling the segment: Open then
// scans more of it.
func (s *Store) writeJournalBlock(sg *segment) {
	if sg.jfailed || sg.unjournaled() <= 0 {
		return
	}
	body := make([]byte, journalBodyHead, journalBodyHead+64*journalEntryLen)
	be := binary.BigEndian
	chunks := 0
	for _, sp := range sg.jparts {
		for i := sp.jFrom; i < len(sp.chunks); i++ {
			body = be.AppendUint32(body, uint32(sp.part))
			body = appendChunkEntry(body, &sp.chunks[i])
			chunks++
		}
		sp.jFrom, sp.jTouched = len(sp.chunks), false
	}
	clear(sg.jparts)
	sg.jparts = sg.jparts[:0]
	states := 0
	sg.delta.Each(func(k producerKey, ps *disbackend.ProducerState) {
		body = appendProducerState(body, k, ps)
		states++
	})
	sg.delta = disbackend.ProducerStates[producerKey]{}
	be.PutUint64(body[0:], uint64(sg.published))
	be.PutUint32(body[8:], uint32(chunks))
	be.PutUint32(body[12:], uint32(states))
	block := make([]byte, journalHeaderLen, journalHeaderLen+len(body))
	be.PutUint32(block[0:], journalMagic)
	be.PutUint32(block[4:], uint32(len(body)))
	be.PutUint32(block[8:], batch.Checksum(body))
	block = append(block, body...)
	if err := s.appendJournal(sg, block); err != nil {
		s.log.Warn("writing a segment's journal failed; a restart after a crash scans the segment",
			zap.String("segment", sg.path), zap.Error(err))
		s.unindexed.Add(-sg.unjournaled())
		sg.jfailed = true
		return
	}
	s.unindexed.Add(-sg.unjournaled())
	sg.journaled = sg.published
}

func (s *Store) appendJournal(sg *segment, block []byte) error {
	if sg.jf == nil {
		f, err := s.fs.Create(sg.path+"."+extJournal, vfs.WriteCategoryUnspecified)
		if err != nil {
			return err
		}
		if err := syncDir(s.fs, s.segDir); err != nil {
			_ = f.Close()
			return err
		}
		sg.mu.Lock()
		sg.jf = f
		sg.mu.Unlock()
	}
	if _, err := sg.jf.Write(block); err != nil {
		return err
	}
	s.hook("journal: written")
	if err := sg.jf.SyncData(); err != nil {
		return err
	}
	s.hook("journal: synced")
	return nil
}

// journalState is what Open reads back from a journal.
type journalState struct {
	covered int64 // .log bytes its good blocks cover
	blocks  int
	// chunks by partition, as the blocks left them
	parts map[int32]*segPart
	// deltas, one per block, in order
	deltas [][]snapshotEntry
}

// readJournal reads sg's journal up to its first torn or corrupt block,
// given the .log's valid size. A missing journal is an empty one.
func readJournal(fs vfs.FS, sg *segment, logSize int64) (*journalState, error) {
	js := &journalState{parts: make(map[int32]*segPart)}
	f, err := fs.Open(sg.path + "." + extJournal)
	if err != nil {
		return js, nil // no journal: the whole segment is scanned
	}
	defer f.Close()
	buf, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	be := binary.BigEndian
	for len(buf) >= journalHeaderLen {
		n := int(be.Uint32(buf[4:]))
		if be.Uint32(buf) != journalMagic || n < journalBodyHead || n > len(buf)-journalHeaderLen {
			break
		}
		body := buf[journalHeaderLen : journalHeaderLen+n]
		if be.Uint32(buf[8:]) != batch.Checksum(body) {
			break
		}
		next, ok := js.apply(sg, body, logSize)
		if !ok {
			break
		}
		js.covered = next
		js.blocks++
		buf = buf[journalHeaderLen+n:]
	}
	return js, nil
}

// apply applies one block's body; ok is false when it does not fit the
// segment (then it and what follows are ignored).
func (js *journalState) apply(sg *segment, body []byte, logSize int64) (int64, bool) {
	be := binary.BigEndian
	covered := int64(be.Uint64(body))
	nChunks, nStates := int(be.Uint32(body[8:])), int(be.Uint32(body[12:]))
	if covered < js.covered || covered > logSize || nChunks*journalEntryLen > len(body)-journalBodyHead {
		return 0, false
	}
	rest := body[journalBodyHead:]
	type entry struct {
		part int32
		c    chunk
	}
	entries := make([]entry, 0, nChunks)
	for i := 0; i < nChunks; i++ {
		e := rest[i*journalEntryLen:]
		part := int32(be.Uint32(e))
		c, err := decodeChunkEntry(e[4:])
		if err != nil || part < 0 || c.end() > covered {
			return 0, false
		}
		entries = append(entries, entry{part, c})
	}
	rest = rest[nChunks*journalEntryLen:]
	delta := make([]snapshotEntry, 0, nStates)
	for i := 0; i < nStates; i++ {
		e, n, ok := decodeProducerState(rest, sg.sid)
		if !ok {
			return 0, false
		}
		delta = append(delta, e)
		rest = rest[n:]
	}
	if len(rest) != 0 {
		return 0, false
	}
	for _, e := range entries {
		sp := js.parts[e.part]
		if sp == nil {
			sp = newSegPart(sg, e.part, e.c.base)
			js.parts[e.part] = sp
		}
		sp.applyChunk(e.c)
	}
	js.deltas = append(js.deltas, delta)
	return covered, true
}

// applyChunk adds c, read back from a journal, to the part's chunks: in
// place of its last chunk when c is that chunk grown.
func (sp *segPart) applyChunk(c chunk) {
	if n := len(sp.chunks); n > 0 && sp.chunks[n-1].pos == c.pos {
		sp.chunks[n-1] = c
	} else {
		sp.chunks = append(sp.chunks, c)
		sp.nchunks++
	}
	sp.last, sp.bytes = c.last, c.bytesThru
	sp.maxTS = max(sp.maxTS, c.runMaxTS)
	sp.minAppend, sp.maxAppend = min(sp.minAppend, c.firstApp), max(sp.maxAppend, c.runMaxApp)
}
