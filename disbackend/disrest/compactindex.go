package disrest

// The key index of a compacted partition (see compact.go): each key's
// latest record and the samples that date the partition's records, as
// the writer and the sweeps update them.

import (
	"cmp"
	"crypto/sha256"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/kafkawire/batch"
)

// maxSamples bounds a partition's samples of its next sequence number.
const maxSamples = 256

type keyHash [16]byte

func hashKey(k []byte) keyHash {
	sum := sha256.Sum256(k)
	return keyHash(sum[:16])
}

// centry is a key's latest record.
type centry struct {
	off   int64
	since int64 // a tombstone's first-seen time (unix ms); 0 for a value
}

// sample says that at unix ms at, the partition's next sequence number was
// next: every record at or after next arrived after at.
type sample struct{ next, at int64 }

// cpart is one compacted partition's key index.
type cpart struct {
	k        partKey
	streamID string
	created  int64 // the stream's create time, unix ms

	mu      sync.Mutex
	loaded  bool
	keys    map[keyHash]centry
	pending map[keyHash]int32 // records of the key sent or being sent, not yet applied
	// undecided is, by key, the highest offset of a transactional record
	// of the key that is not indexed yet: written, or read at or past the
	// partition's last stable offset (its transaction not ended). A copy
	// of the key waits until the sweep indexes that record, committed or
	// aborted, so that it never lands after a value the transaction may
	// commit (docs/transactions.md, "On DIS").
	undecided map[keyHash]int64
	indexed   int64    // every record before it is in keys
	samples   []sample // ascending
	// unsure counts appends that failed with an outcome DIS may not have
	// told (their records may be in the partition): copies wait until a
	// sweep has read the partition past them.
	unsure    int64
	nextSweep time.Time
	snapAt    time.Time
	snapIdx   int64 // indexed when the last snapshot was taken
}

func newCpart(k partKey, st disbackend.Stream) *cpart {
	created := st.CreatedAt.UnixMilli()
	return &cpart{k: k, created: created, keys: map[keyHash]centry{}, pending: map[keyHash]int32{},
		undecided: map[keyHash]int64{}, samples: []sample{{0, created}}}
}

// begin counts the records of a batch about to be sent as pending. It
// refuses a batch that would make the Store index more than maxKeys keys
// (ErrInvalidRecord, Kafka INVALID_RECORD). A copy job (src != nil) first
// loses every copy that is no longer its key's latest record, or whose key
// has a record pending, or any while an append's outcome is unknown; it
// returns the records to send.
func (c *compactor) begin(cp *cpart, recs []disbackend.Record, src []int64) ([]disbackend.Record, []int64, error) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if src != nil {
		if cp.unsure > 0 {
			return nil, nil, nil
		}
		var keep []disbackend.Record
		var keepSrc []int64
		for i := range recs {
			h := hashKey(recs[i].Key)
			if _, open := cp.undecided[h]; open {
				continue
			}
			if e, ok := cp.keys[h]; ok && e.off == src[i] && cp.pending[h] == 0 {
				keep = append(keep, recs[i])
				keepSrc = append(keepSrc, src[i])
			}
		}
		recs, src = keep, keepSrc
	} else {
		fresh := int64(0)
		for i := range recs {
			h := hashKey(recs[i].Key)
			if _, ok := cp.keys[h]; !ok && cp.pending[h] == 0 {
				fresh++
			}
		}
		if fresh > 0 && c.keys.Load()+fresh > c.maxKeys {
			return nil, nil, fmt.Errorf("%w: the gateway indexes at most %d keys of compacted topics (dis_compaction_max_keys), and this batch has %d new ones",
				disbackend.ErrInvalidRecord, c.maxKeys, fresh)
		}
	}
	for i := range recs {
		cp.pending[hashKey(recs[i].Key)]++
	}
	return recs, src, nil
}

// written applies records that DIS stored at sns.
func (c *compactor) written(cp *cpart, recs []disbackend.Record, sns []int64) {
	now := time.Now().UnixMilli()
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for i := range recs {
		h := hashKey(recs[i].Key)
		c.unpend(cp, h)
		c.apply(cp, h, sns[i], recs[i].Value == nil, now)
	}
}

// writtenUndecided takes records of a transaction that DIS stored at sns:
// not indexed (the sweep indexes them once their transaction has ended,
// if it committed), but holding copies of their keys back until then.
func (c *compactor) writtenUndecided(cp *cpart, recs []disbackend.Record, sns []int64) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for i := range recs {
		h := hashKey(recs[i].Key)
		c.unpend(cp, h)
		cp.undecided[h] = max(cp.undecided[h], sns[i])
	}
}

// decided notes that the sweep indexed (or, aborted, dropped) the
// transactional record of key h at off. Called with cp.mu held.
func (cp *cpart) decided(h keyHash, off int64) {
	if u, ok := cp.undecided[h]; ok && u <= off {
		delete(cp.undecided, h)
	}
}

// release gives back the pending counts of records that were not sent.
func (c *compactor) release(cp *cpart, recs []disbackend.Record) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for i := range recs {
		c.unpend(cp, hashKey(recs[i].Key))
	}
}

// failed gives back the pending counts of records whose append failed;
// their outcome is unknown, so copies wait for the next sweep.
func (c *compactor) failed(cp *cpart, recs []disbackend.Record) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for i := range recs {
		c.unpend(cp, hashKey(recs[i].Key))
	}
	cp.unsure++
}

func (c *compactor) unpend(cp *cpart, h keyHash) {
	if n := cp.pending[h]; n > 1 {
		cp.pending[h] = n - 1
	} else {
		delete(cp.pending, h)
	}
}

// apply records that key h has a record at off (a tombstone when tomb)
// unless a later one is known. A tombstone keeps the first-seen time of
// the tombstone it replaces (a copy of it).
func (c *compactor) apply(cp *cpart, h keyHash, off int64, tomb bool, now int64) {
	e, ok := cp.keys[h]
	if ok && off <= e.off {
		return
	}
	var since int64
	if tomb {
		since = now
		if ok && e.since != 0 {
			since = e.since
		}
	}
	if !ok {
		c.keys.Add(1)
	}
	cp.keys[h] = centry{off: off, since: since}
}

// arrivedAfter returns a time (unix ms) before which the record at off
// cannot have arrived, from the samples; ok is false when none says.
func (cp *cpart) arrivedAfter(off int64) (int64, bool) {
	i, _ := slices.BinarySearchFunc(cp.samples, off+1, func(s sample, t int64) int {
		switch {
		case s.next < t:
			return -1
		case s.next > t:
			return 1
		}
		return 0
	})
	// samples[:i] have next <= off.
	if i == 0 {
		return 0, false
	}
	return cp.samples[i-1].at, true
}

// arrivedBy returns a time (unix ms) by which the record at off had
// arrived: the first sample that counts it (next > off), else now.
func (cp *cpart) arrivedBy(off, now int64) int64 {
	i, _ := slices.BinarySearchFunc(cp.samples, off+1, func(s sample, t int64) int { return cmp.Compare(s.next, t) })
	// samples[i:] have next > off.
	if i == len(cp.samples) {
		return now
	}
	return cp.samples[i].at
}

func (cp *cpart) addSample(next, at int64) {
	if n := len(cp.samples); n > 0 && cp.samples[n-1].next >= next {
		if cp.samples[n-1].next == next && n > 1 {
			// Still next at a later time: a tighter bound for what follows.
			cp.samples[n-1].at = max(cp.samples[n-1].at, at)
		}
		return
	}
	cp.samples = append(cp.samples, sample{next, at})
	if len(cp.samples) > maxSamples {
		// Thin out the middle: bounds only get earlier, copies earlier.
		thin := cp.samples[:1]
		for i := 1; i < len(cp.samples)-1; i += 2 {
			thin = append(thin, cp.samples[i])
		}
		cp.samples = append(thin, cp.samples[len(cp.samples)-1])
	}
}

// pruneSamples drops samples no record at or after first needs.
func (cp *cpart) pruneSamples(first int64) {
	i := 0
	for i+1 < len(cp.samples) && cp.samples[i+1].next <= first {
		i++
	}
	cp.samples = cp.samples[i:]
}

// hook returns the keyHook of partition k of si's stream when the
// compactor indexes its keys (part), nil otherwise.
func (c *compactor) hook(k partKey, si streamInfo) keyHook {
	cp := c.part(k, si)
	if cp == nil {
		return nil
	}
	return indexHook{c, cp}
}

// indexHook is the keyHook of a compacted partition: what the writer sends
// counts as pending in its index (begin) until it is written (written) or
// has failed (failed), and a copy job is sent only with its copies that
// are still their key's latest record. Its calls take cp.mu.
type indexHook struct {
	c  *compactor
	cp *cpart
}

func (h indexHook) prepare(j *job, convert func() ([]disRecord, error)) ([]disRecord, bool, error) {
	if j.b.Attributes&batch.AttrControl != 0 {
		return h.control(convert) // a transaction marker: no key of the topic's
	}
	if j.src == nil {
		recs, err := convert()
		if err != nil {
			return nil, true, err
		}
		if _, _, err := h.c.begin(h.cp, j.b.Records, nil); err != nil {
			return nil, true, err
		}
		return recs, true, nil
	}
	// A copy: sent only if it is still its key's latest record.
	kept, src, _ := h.c.begin(h.cp, j.b.Records, j.src)
	if len(kept) == 0 {
		return nil, false, nil
	}
	j.b.Records, j.src, j.b.NumRecords = kept, src, int32(len(kept))
	recs, err := convert()
	if err != nil {
		h.c.release(h.cp, j.b.Records)
	}
	return recs, true, err
}

// control is prepare of a marker: sent as it is, never indexed.
func (h indexHook) control(convert func() ([]disRecord, error)) ([]disRecord, bool, error) {
	recs, err := convert()
	return recs, true, err
}

func (h indexHook) written(j *job, sns []int64) {
	switch {
	case j.b.Attributes&batch.AttrControl != 0:
	case j.b.Attributes&batch.AttrTransactional != 0:
		h.c.writtenUndecided(h.cp, j.b.Records, sns)
	default:
		h.c.written(h.cp, j.b.Records, sns)
	}
}

func (h indexHook) failed(j *job) {
	if j.b.Attributes&batch.AttrControl == 0 {
		h.c.failed(h.cp, j.b.Records)
	}
}
