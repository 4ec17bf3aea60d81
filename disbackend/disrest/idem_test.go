package disrest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/backendtest"
	"github.com/disgw/disgw/disbackend/dislocal"
	"github.com/disgw/disgw/kafkawire/batch"
)

func winBatch(pid int64, epoch int16, seq int32, n int32, base, ts int64) idemBatch {
	return idemBatch{pid: pid, epoch: epoch, b: disbackend.ProducerBatch{
		FirstSeq: seq, LastSeq: disbackend.IncSequence(seq, n-1), BaseOffset: base, LastOffset: base + int64(n) - 1, MaxTimestamp: ts}}
}

// TestIdemMetaRoundTrip: a checkpoint's intent and window come back as
// encoded, within DIS's 1000 characters.
func TestIdemMetaRoundTrip(t *testing.T) {
	const t0 = 1764700000000
	cp := &idemCheckpoint{sid: "Gx3kTR8b2Qm1yUiRFEr", end: 123456789,
		intent: []idemEntry{
			{pid: 42, epoch: 3, seq: 2147483600, n: 10, maxTS: t0 - 5},
			{pid: -1, n: 7},
			{pid: 1 << 40, epoch: 0, seq: 0, n: 1, maxTS: t0 + 1},
			{pid: 5, epoch: 1, seq: 70, n: 3000, maxTS: t0, done: 2000, base: 123450000},
		},
		// newest first
		window: []idemBatch{
			winBatch(42, 3, 2147483590, 10, 123456779, t0-10),
			winBatch(7, 1, 100, 5, 123456770, -1),
			winBatch(42, 3, 2147483580, 10, 123456760, t0-20),
		},
	}
	cp.partial = &idemPartial{pid: 8, epoch: 1, seq: 40, n: 5000, base: 123400000, done: 1234}
	meta, kept, ok := encodeIdem(cp, t0, disbackend.MaxCheckpointMetadataLen)
	if !ok || kept != 3 {
		t.Fatalf("encode: ok %v, kept %d", ok, kept)
	}
	if len(meta) > 250 {
		t.Errorf("%d characters: %s", len(meta), meta)
	}
	got, err := decodeIdem(meta)
	if err != nil {
		t.Fatalf("decode %q: %v", meta, err)
	}
	if got.sid != cp.sid || got.end != cp.end || !reflect.DeepEqual(got.intent, cp.intent) || got.partial == nil || *got.partial != *cp.partial {
		t.Fatalf("decoded %+v, want %+v", got, cp)
	}
	// The window by producer, each oldest first.
	want := []idemBatch{cp.window[2], cp.window[0], cp.window[1]}
	if !reflect.DeepEqual(got.window, want) {
		t.Fatalf("window %+v, want %+v", got.window, want)
	}
}

// TestIdemMetaTrim: a window that does not fit keeps its newest batches,
// within the limit.
func TestIdemMetaTrim(t *testing.T) {
	const t0 = 1764700000000
	cp := &idemCheckpoint{sid: "s1", end: 1 << 40, intent: []idemEntry{{pid: 1, epoch: 0, seq: 500, n: 20, maxTS: t0}}}
	off := int64(1 << 40)
	for i := range 200 { // newest first
		off -= 20
		cp.window = append(cp.window, winBatch(int64(1000+i%40), 0, int32(100000-20*i), 20, off, t0-int64(i)))
	}
	meta, kept, ok := encodeIdem(cp, t0, disbackend.MaxCheckpointMetadataLen)
	if !ok || kept == 0 || kept == len(cp.window) {
		t.Fatalf("ok %v, kept %d of %d", ok, kept, len(cp.window))
	}
	if len(meta) > disbackend.MaxCheckpointMetadataLen {
		t.Fatalf("%d characters", len(meta))
	}
	got, err := decodeIdem(meta)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.window) != kept {
		t.Fatalf("decoded %d batches, kept %d", len(got.window), kept)
	}
	oldest := cp.window[kept-1].b.BaseOffset
	for _, b := range got.window {
		if b.b.BaseOffset < oldest {
			t.Fatalf("batch at %d kept, older than the newest %d (oldest kept %d)", b.b.BaseOffset, kept, oldest)
		}
	}
	// An intent alone too long does not fit.
	cp.intent = make([]idemEntry, 200)
	for i := range cp.intent {
		cp.intent[i] = idemEntry{pid: 1 << 50, epoch: 1000, seq: 1 << 30, n: 1000, maxTS: 1}
	}
	if _, _, ok := encodeIdem(cp, t0, disbackend.MaxCheckpointMetadataLen); ok {
		t.Fatal("an intent of 200 batches fits")
	}
}

func TestIdemMetaRefused(t *testing.T) {
	for _, meta := range []string{"", "sid=abc", "i1|s|10|0||", "i2|s|a|0||", "i1||a|0||",
		"i1|s|a|0|1.0.0.0.0|", "i1|s|a|0||1.0:0.1.0.0", "i1|s|a|0||1.0:0.2.b.0", "i1|s|-1|0||",
		"i1|s|a|0||1.0:", "i1|s|a|0|1.2.3|", "i1|s|a|0||1.0.0:0.1.1.0", "i1|s|a|0||1.zzzzzz:0.1.1.0"} {
		if cp, err := decodeIdem(meta); err == nil && meta != "i1|s|10|0||" {
			t.Errorf("%q decoded: %+v", meta, cp)
		}
	}
	if cp, err := decodeIdem("i1|s|10|0||"); err != nil || cp.end != 36 {
		t.Errorf("empty intent and window: %+v, %v", cp, err)
	}
}

func FuzzDecodeIdem(f *testing.F) {
	f.Add("i1|Gx3k|2n9c|mi5r3k8w|16.3.zzzzt4.a.-5,7,v.0.0.1.1|16.3:zzzzsq.a.j.-a/zzzzsg.a.1d.-k,7.1:2s.5.s.-mi5r3k8x")
	f.Add("i1|s|0|0||")
	f.Add("sid=abc")
	f.Fuzz(func(t *testing.T, meta string) {
		cp, err := decodeIdem(meta)
		if err != nil {
			if !errors.Is(err, errIdemMeta) {
				t.Fatalf("error %v", err)
			}
			return
		}
		for _, e := range cp.intent {
			if e.n < 1 {
				t.Fatalf("intent entry of %d records", e.n)
			}
		}
		for _, b := range cp.window {
			if b.b.BaseOffset < 0 || b.b.LastOffset < b.b.BaseOffset || b.b.LastOffset >= cp.end {
				t.Fatalf("window batch %+v outside [0, %d)", b, cp.end)
			}
		}
		written, _ := resolveIntent(cp, cp.end+1<<20)
		for _, w := range written {
			if w.b.BaseOffset < cp.end {
				t.Fatalf("written at %d before the intent's %d", w.b.BaseOffset, cp.end)
			}
		}
	})
}

func TestResolveIntent(t *testing.T) {
	cp := &idemCheckpoint{end: 100, intent: []idemEntry{
		{pid: 1, epoch: 0, seq: 10, n: 5, maxTS: 7},
		{pid: -1, n: 3},
		{pid: 2, epoch: 1, seq: 0, n: 2, maxTS: 8},
	}}
	for _, tc := range []struct {
		end  int64
		want []idemBatch
		all  bool
	}{
		{end: 100}, // not written
		{end: 104}, // a batch only partly: not written
		{end: 105, want: []idemBatch{winBatch(1, 0, 10, 5, 100, 7)}},
		{end: 109, want: []idemBatch{winBatch(1, 0, 10, 5, 100, 7)}},
		{end: 110, want: []idemBatch{winBatch(1, 0, 10, 5, 100, 7), winBatch(2, 1, 0, 2, 108, 8)}, all: true},
		{end: 500, want: []idemBatch{winBatch(1, 0, 10, 5, 100, 7), winBatch(2, 1, 0, 2, 108, 8)}, all: true}, // more written after it
	} {
		got, all := resolveIntent(cp, tc.end)
		if all != tc.all || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("end %d: %+v, %v; want %+v, %v", tc.end, got, all, tc.want, tc.all)
		}
	}
	if _, _, p := resolveIntentPartial(cp, 104); p == nil || *p != (idemPartial{pid: 1, epoch: 0, seq: 10, n: 5, base: 100, done: 4}) {
		t.Errorf("partial at 104: %+v", p)
	}
	// The completion of a batch of 10 cut short after 4 (at 50), cut
	// short again after 3 more.
	again := &idemCheckpoint{end: 100, intent: []idemEntry{{pid: 3, epoch: 0, seq: 20, n: 10, maxTS: 1, done: 4, base: 50}}}
	if _, _, p := resolveIntentPartial(again, 103); p == nil || *p != (idemPartial{pid: 3, seq: 20, n: 10, base: 50, done: 7}) {
		t.Errorf("completion cut again: %+v", p)
	}
	if _, _, p := resolveIntentPartial(again, 100); p == nil || p.done != 4 || p.base != 50 {
		t.Errorf("completion not written: %+v", p)
	}
	if got, all, _ := resolveIntentPartial(again, 106); !all || len(got) != 1 || got[0] != winBatch(3, 0, 20, 10, 50, 1) {
		t.Errorf("completion written: %+v, %v", got, all)
	}
	if _, _, p := resolveIntentPartial(cp, 106); p != nil {
		t.Errorf("records of others partly written: %+v", p)
	}
	if got, all := resolveIntent(&idemCheckpoint{end: 5}, 5); len(got) != 0 || !all {
		t.Errorf("empty intent: %+v, %v", got, all)
	}
}

// TestIdemAcrossRestart: a new Store (a restarted gateway) answers the
// retry of a batch written by an earlier one, whose answer was lost, with
// its original offset and does not write it again; a batch whose intent
// was kept but which was not written is written; identical batches of
// different sequences are both written.
func TestIdemAcrossRestart(t *testing.T) {
	t.Parallel()
	_, url := startDIS(t, dislocal.Options{})
	mod := func(o *Options) { o.Linger = -1; o.idemSettle = -1 }
	a := newStore(t, url, mod)
	if _, err := a.CreateStream(ctxT(t), disbackend.StreamSpec{Name: "idem", TopicName: "idem", PartitionCount: 1,
		Config: disbackend.StreamConfig{Retention: 24 * time.Hour, MaxMessageBytes: 1 << 20}}); err != nil {
		t.Fatal(err)
	}
	batch := func(seq int32) disbackend.Batch {
		// The same records at every sequence: only the sequence tells them apart.
		return backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 3, Idempotent: true, ProducerID: 9, ProducerEpoch: 2, BaseSequence: seq, Seed: 1})
	}
	appendTo := func(s *Store, seq int32) disbackend.AppendResult {
		t.Helper()
		res, err := s.Append("idem", 0, batch(seq)).Wait(ctxT(t))
		if err != nil {
			t.Fatalf("append seq %d: %v", seq, err)
		}
		return res
	}
	if res := appendTo(a, 0); res.BaseOffset != 0 || res.Duplicate {
		t.Fatalf("first: %+v", res)
	}
	if res := appendTo(a, 3); res.BaseOffset != 3 || res.Duplicate {
		t.Fatalf("identical records at the next sequence: %+v", res)
	}
	// A written batch whose answer was lost: its intent, then its records.
	k := partKey{"idem", 0}
	si, err := a.streamInfo(ctxT(t), "idem", true)
	if err != nil {
		t.Fatal(err)
	}
	b := batch(6)
	lost := &putState{}
	a.learn(ctxT(t), k, lost)
	if lost.next != 6 {
		t.Fatalf("end offset %d", lost.next)
	}
	if err := a.commitIntent(ctxT(t), k, si.id, lost, []idemEntry{{pid: 9, epoch: 2, seq: 6, n: 3, maxTS: b.MaxTimestamp}}); err != nil {
		t.Fatal(err)
	}
	recs, err := a.toDISRecords(&b, nil, false, FormatEnvelope)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.putRecords(ctxT(t), k, recs, lost, si.advanced, nil); err != nil {
		t.Fatal(err)
	}
	_ = a.Close()

	bs := newStore(t, url, mod)
	if res := appendTo(bs, 0); res.BaseOffset != 0 || !res.Duplicate {
		t.Fatalf("retry of the first after a restart: %+v", res)
	}
	if res := appendTo(bs, 6); res.BaseOffset != 6 || !res.Duplicate {
		t.Fatalf("retry of the lost answer after a restart: %+v", res)
	}
	if _, err := bs.Append("idem", 0, batch(12)).Wait(ctxT(t)); !errors.Is(err, disbackend.ErrOutOfOrderSequence) {
		t.Fatalf("a gap after a restart: %v", err)
	}
	// An intent kept, its records never sent (the process died between).
	si, _ = bs.streamInfo(ctxT(t), "idem", true)
	notSent := &putState{}
	bs.learn(ctxT(t), k, notSent)
	if err := bs.commitIntent(ctxT(t), k, si.id, notSent, []idemEntry{{pid: 9, epoch: 2, seq: 9, n: 3}}); err != nil {
		t.Fatal(err)
	}
	_ = bs.Close()
	c := newStore(t, url, mod)
	if res := appendTo(c, 9); res.BaseOffset != 9 || res.Duplicate {
		t.Fatalf("the batch of an intent not written: %+v", res)
	}
	if r, err := c.describeRange(ctxT(t), "idem", 0); err != nil || r.Next != 12 {
		t.Fatalf("partition range %+v, %v: want 12 records", r, err)
	}
	// A batch of 6 records cut short after its first 2 (a batch larger
	// than one PutRecords, the process killed between two): its retry
	// writes the other 4 and is answered with the first one's offset.
	si, _ = c.streamInfo(ctxT(t), "idem", true)
	cut := &putState{}
	c.learn(ctxT(t), k, cut)
	big := backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 6, Idempotent: true, ProducerID: 9, ProducerEpoch: 2, BaseSequence: 12, Seed: 1})
	if err := c.commitIntent(ctxT(t), k, si.id, cut, []idemEntry{{pid: 9, epoch: 2, seq: 12, n: 6, maxTS: big.MaxTimestamp}}); err != nil {
		t.Fatal(err)
	}
	recs, err = c.toDISRecords(&big, nil, false, FormatEnvelope)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.putRecords(ctxT(t), k, recs[:2], cut, si.advanced, nil); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	// Another producer's batch first, through a gateway that closes
	// before the retry comes: it waits for the retry, which must follow
	// the first records directly, and fails at the close unwritten.
	d0 := newStore(t, url, mod)
	other := backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 2, Idempotent: true, ProducerID: 10, Seed: 2})
	po := d0.Append("idem", 0, other)
	_ = d0.Close()
	if res, err := po.Wait(ctxT(t)); !errors.Is(err, disbackend.ErrUnavailable) {
		t.Fatalf("another producer's batch while the retry is awaited, then closed: %+v, %v", res, err)
	}
	if r, err := c.describeRange(ctxT(t), "idem", 0); err != nil || r.Next != 14 {
		t.Fatalf("partition range %+v, %v: want 14 records", r, err)
	}
	// Again, the retry coming after the other batch: the retry goes
	// first, its records at 12 to 17, the other batch's after them.
	d := newStore(t, url, mod)
	po = d.Append("idem", 0, other)
	res, err := d.Append("idem", 0, big).Wait(ctxT(t))
	if err != nil || res.BaseOffset != 12 || res.Duplicate {
		t.Fatalf("the retry of a batch cut short: %+v, %v", res, err)
	}
	if res, err := po.Wait(ctxT(t)); err != nil || res.BaseOffset != 18 {
		t.Fatalf("another producer's batch, after the retry: %+v, %v", res, err)
	}
	if r, err := d.describeRange(ctxT(t), "idem", 0); err != nil || r.Next != 20 {
		t.Fatalf("partition range %+v, %v: want 20 records", r, err)
	}
	got, err := d.rawRecords(ctxT(t), k, 12, 6)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range got {
		// The first 2 as written above, the others as the Store writes.
		want := recs[i]
		if i >= 2 {
			rest, err := d.toDISRecords(&big, nil, false, d.opts.RecordFormat)
			if err != nil {
				t.Fatal(err)
			}
			want = rest[i]
		}
		if !sameRecord(&want, g.data, g.key) {
			t.Errorf("offset %d: not record %d of the batch cut short: %q, want %q", g.sn, i, g.data, want.data)
		}
	}
	if res, err := d.Append("idem", 0, big).Wait(ctxT(t)); err != nil || res.BaseOffset != 12 || !res.Duplicate {
		t.Fatalf("a second retry of it: %+v, %v", res, err)
	}
	_ = d.Close()

	// A batch cut short whose retry does not come within the hold: the
	// other batches go after its first records; its retry, later, is
	// written whole.
	e0 := newStore(t, url, mod)
	si, _ = e0.streamInfo(ctxT(t), "idem", true)
	cut = &putState{}
	e0.learn(ctxT(t), k, cut)
	big2 := backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 4, Idempotent: true, ProducerID: 9, ProducerEpoch: 2, BaseSequence: 18, Seed: 3})
	if err := e0.commitIntent(ctxT(t), k, si.id, cut, []idemEntry{{pid: 9, epoch: 2, seq: 18, n: 4, maxTS: big2.MaxTimestamp}}); err != nil {
		t.Fatal(err)
	}
	recs, err = e0.toDISRecords(&big2, nil, false, FormatEnvelope)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e0.putRecords(ctxT(t), k, recs[:1], cut, si.advanced, nil); err != nil {
		t.Fatal(err)
	}
	_ = e0.Close()
	e := newStore(t, url, func(o *Options) { mod(o); o.idemHold = time.Millisecond })
	other2 := backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 2, Idempotent: true, ProducerID: 10, BaseSequence: 2, Seed: 2})
	if res, err := e.Append("idem", 0, other2).Wait(ctxT(t)); err != nil || res.BaseOffset != 21 {
		t.Fatalf("another producer's batch after the hold: %+v, %v", res, err)
	}
	if res, err := e.Append("idem", 0, big2).Wait(ctxT(t)); err != nil || res.BaseOffset != 23 || res.Duplicate {
		t.Fatalf("the retry of a batch cut short after the hold: %+v, %v", res, err)
	}
	_ = e.Close()

	// Other records where an intent expected its batch (another node's
	// late write): the end offset says its batch was cut short after 2,
	// but those are not its records. Its retry is written whole after
	// them, not completed: its first 2 records would be lost.
	f0 := newStore(t, url, mod)
	si, _ = f0.streamInfo(ctxT(t), "idem", true)
	cut = &putState{}
	f0.learn(ctxT(t), k, cut)
	big3 := backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 4, Idempotent: true, ProducerID: 9, ProducerEpoch: 2, BaseSequence: 22, Seed: 4})
	if err := f0.commitIntent(ctxT(t), k, si.id, cut, []idemEntry{{pid: 9, epoch: 2, seq: 22, n: 4, maxTS: big3.MaxTimestamp}}); err != nil {
		t.Fatal(err)
	}
	late := backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 2, Idempotent: true, ProducerID: 9, ProducerEpoch: 2, BaseSequence: 0, Seed: 5})
	if recs, err = f0.toDISRecords(&late, nil, false, FormatEnvelope); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f0.putRecords(ctxT(t), k, recs, cut, si.advanced, nil); err != nil {
		t.Fatal(err)
	}
	_ = f0.Close()
	f := newStore(t, url, mod)
	defer f.Close()
	res, err = f.Append("idem", 0, big3).Wait(ctxT(t))
	if err != nil || res.BaseOffset != 29 || res.Duplicate {
		t.Fatalf("the retry of a batch whose first records are not its own: %+v, %v (want it whole at 29)", res, err)
	}
	got, err = f.rawRecords(ctxT(t), k, 29, 4)
	if err != nil {
		t.Fatal(err)
	}
	if !headOf(got, big3.Records) {
		t.Errorf("offsets 29 to 32 do not hold the batch's records")
	}
	if r, err := f.describeRange(ctxT(t), "idem", 0); err != nil || r.Next != 33 {
		t.Fatalf("partition range %+v, %v: want 33 records", r, err)
	}
}

// TestIdemMetaSum: an intent's checksums (cluster mode) come back as
// encoded, an intent without them reads as before, and a run of other
// records cannot carry one.
func TestIdemMetaSum(t *testing.T) {
	const t0 = 1764700000000
	cp := &idemCheckpoint{sid: "Gx3kTR8b2Qm1yUiRFEr", end: 1000,
		intent: []idemEntry{
			{pid: 1 << 40, epoch: 0, seq: 7, n: 10, maxTS: t0, sum: 1<<32 - 1},
			{pid: -1, n: 3},
			{pid: 5, epoch: 1, seq: 70, n: 3000, maxTS: t0, done: 2000, base: 900, sum: 1},
			{pid: 6, epoch: 1, seq: 0, n: 1, maxTS: t0},
		}}
	meta, _, ok := encodeIdem(cp, t0, disbackend.MaxCheckpointMetadataLen)
	if !ok {
		t.Fatal("encode")
	}
	got, err := decodeIdem(meta)
	if err != nil || !reflect.DeepEqual(got.intent, cp.intent) {
		t.Fatalf("decode %q: %+v, %v; want %+v", meta, got, err, cp.intent)
	}
	for _, bad := range []string{"i1|s|rs|0|3~1||", "i1|s|rs|0|1.0.0.1.0~0||", "i1|s|rs|0|1.0.0.1.0~1zzzzzzz||"} {
		if _, err := decodeIdem(bad); err == nil {
			t.Errorf("decoded %q", bad)
		}
	}
}

// TestRecreatedStreamWrites: a stream deleted and created again at once
// through the same Store takes writes, idempotent ones included, from
// offset 0. The partition's writer once kept the old stream's end offset
// and refused every write (a commit of the dedupe checkpoint at that
// offset got DIS.4224) until 5 s without writes had passed.
func TestRecreatedStreamWrites(t *testing.T) {
	t.Parallel()
	_, url := startDIS(t, dislocal.Options{})
	s := newStore(t, url, nil)
	ctx := ctxT(t)
	const stream = "recreated"
	mk := func() {
		t.Helper()
		if _, err := s.CreateStream(ctx, disbackend.StreamSpec{Name: stream, TopicName: stream, PartitionCount: 1,
			Config: disbackend.StreamConfig{Retention: 24 * time.Hour, MaxMessageBytes: 1 << 20}}); err != nil {
			t.Fatal(err)
		}
	}
	mk()
	b := backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 3, Idempotent: true, ProducerID: 9, Seed: 1})
	if res, err := s.Append(stream, 0, b).Wait(ctx); err != nil || res.BaseOffset != 0 {
		t.Fatalf("first append: %+v, %v", res, err)
	}
	if err := s.DeleteStream(ctx, stream); err != nil {
		t.Fatal(err)
	}
	mk()
	short, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	b = backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 1, Idempotent: true, ProducerID: 10, Seed: 2})
	if res, err := s.Append(stream, 0, b).Wait(short); err != nil || res.BaseOffset != 0 {
		t.Fatalf("idempotent append to the stream made again: %+v, %v; want offset 0", res, err)
	}
	plain := backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 2, Seed: 3})
	if res, err := s.Append(stream, 0, plain).Wait(short); err != nil || res.BaseOffset != 1 {
		t.Fatalf("append after it: %+v, %v; want offset 1", res, err)
	}
}

// TestIdemPartialEndedByMarker: a transactional batch cut short (its
// process killed between two PutRecords) holds the partition's other
// writes for its retry; a marker of its producer ends the transaction, so
// no retry can come: the marker and the writes after it go at once, not
// after the hold (an hour here).
func TestIdemPartialEndedByMarker(t *testing.T) {
	t.Parallel()
	_, url := startDIS(t, dislocal.Options{})
	mod := func(o *Options) { o.Linger = -1; o.idemSettle = -1 }
	a := newStore(t, url, mod)
	if _, err := a.CreateStream(ctxT(t), disbackend.StreamSpec{Name: "cut", TopicName: "cut", PartitionCount: 1,
		Config: disbackend.StreamConfig{Retention: 24 * time.Hour, MaxMessageBytes: 1 << 20}}); err != nil {
		t.Fatal(err)
	}
	k := partKey{"cut", 0}
	si, err := a.streamInfo(ctxT(t), "cut", true)
	if err != nil {
		t.Fatal(err)
	}
	cut := &putState{}
	a.learn(ctxT(t), k, cut)
	big := backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 4, Idempotent: true, ProducerID: 9, ProducerEpoch: 2, Seed: 3})
	big.Attributes |= batch.AttrTransactional
	if err := a.commitIntent(ctxT(t), k, si.id, cut, []idemEntry{{pid: 9, epoch: 2, seq: 0, n: 4, maxTS: big.MaxTimestamp}}); err != nil {
		t.Fatal(err)
	}
	recs, err := a.toDISRecords(&big, nil, false, FormatEnvelope)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.putRecords(ctxT(t), k, recs[:1], cut, si.advanced, nil); err != nil {
		t.Fatal(err)
	}
	_ = a.Close()
	b := newStore(t, url, func(o *Options) { mod(o); o.idemHold = time.Hour })
	if res, err := b.Append("cut", 0, markerBatch(t, 9, 3, false)).Wait(ctxT(t)); err != nil || res.BaseOffset != 1 {
		t.Fatalf("the ABORT marker of the producer whose batch was cut short: %+v, %v", res, err)
	}
	other := backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 2, Idempotent: true, ProducerID: 10, Seed: 2})
	if res, err := b.Append("cut", 0, other).Wait(ctxT(t)); err != nil || res.BaseOffset != 2 {
		t.Fatalf("another producer's batch after the marker: %+v, %v", res, err)
	}
}
