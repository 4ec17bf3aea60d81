package backendtest

import (
	"testing"

	"github.com/disgw/disgw/disbackend"
)

// deleter returns b's RecordDeleter (through the suite's wrapper), failing
// the test when b has none: every backend serves DeleteRecords.
func deleter(t *testing.T, b disbackend.Backend) disbackend.RecordDeleter {
	t.Helper()
	if sb, ok := b.(*suiteBackend); ok {
		b = sb.Backend
	}
	d, ok := b.(disbackend.RecordDeleter)
	if !ok {
		t.Fatalf("%T does not implement disbackend.RecordDeleter (Kafka DeleteRecords)", b)
	}
	return d
}

func mustDelete(t *testing.T, d disbackend.RecordDeleter, stream string, part int32, offset, want int64) {
	t.Helper()
	got, err := d.DeleteRecords(ctxT(t), stream, part, offset)
	if err != nil || got != want {
		t.Fatalf("DeleteRecords(%q, %d, %d) = %d, %v; want %d", stream, part, offset, got, err, want)
	}
}

// testDeleteRecords checks Kafka DeleteRecords' log start offset: it moves
// forward only, up to next at most, hides what is below it from Read, and
// leaves appends and the other partitions alone.
func testDeleteRecords(t *testing.T, b disbackend.Backend) {
	ctx := ctxT(t)
	d := deleter(t, b)
	mustCreate(t, b, spec(t, "del", 2))
	for i := 0; i < 3; i++ {
		mustAppend(t, b, "del", 0, MakeBatch(BatchOptions{NumRecords: 4, Seed: uint64(i)}))
	}
	wantRange(t, b, "del", 0, 0, 12)
	mustDelete(t, d, "del", 0, 6, 6) // inside the second batch
	wantRange(t, b, "del", 0, 6, 12)
	res, err := b.Read(ctx, "del", 0, 5, 1<<20)
	wantErr(t, "read below the log start offset", err, disbackend.ErrOffsetOutOfRange)
	if res.Range != (disbackend.PartitionRange{First: 6, Next: 12}) {
		t.Fatalf("Read below the log start offset: range %+v, want [6 : 12]", res.Range)
	}
	res, err = b.Read(ctx, "del", 0, 6, 1<<20)
	if err != nil {
		t.Fatalf("Read at the log start offset: %v", err)
	}
	recs := flatten(t, res.Batches)
	if len(recs) == 0 || recs[len(recs)-1].Offset != 11 {
		t.Fatalf("Read at the log start offset returned %d records, want up to offset 11", len(recs))
	}
	for _, r := range recs {
		if r.Offset < 4 {
			t.Fatalf("Read at 6 returned offset %d, of a batch wholly below the log start offset", r.Offset)
		}
	}
	mustDelete(t, d, "del", 0, 3, 6) // never back
	mustDelete(t, d, "del", 0, 6, 6)
	_, err = d.DeleteRecords(ctx, "del", 0, 13)
	wantErr(t, "DeleteRecords beyond next", err, disbackend.ErrOffsetOutOfRange)
	_, err = d.DeleteRecords(ctx, "del", 0, -1)
	wantErr(t, "DeleteRecords at -1 (the caller resolves it)", err, disbackend.ErrOffsetOutOfRange)
	wantRange(t, b, "del", 0, 6, 12)
	mustDelete(t, d, "del", 0, 12, 12) // everything
	wantRange(t, b, "del", 0, 12, 12)
	if res, err := b.Read(ctx, "del", 0, 12, 1<<20); err != nil || len(res.Batches) != 0 {
		t.Fatalf("Read at next after deleting everything = %d batches, %v; want none", len(res.Batches), err)
	}
	if s := mustAppend(t, b, "del", 0, MakeBatch(BatchOptions{NumRecords: 2, Seed: 7})); s.base != 12 {
		t.Fatalf("append after DeleteRecords: offset %d, want 12", s.base)
	}
	wantRange(t, b, "del", 0, 12, 14)
	wantRange(t, b, "del", 1, 0, 0)
	mustDelete(t, d, "del", 1, 0, 0)
	_, err = d.DeleteRecords(ctx, "nope", 0, 0)
	wantErr(t, "DeleteRecords of a missing stream", err, disbackend.ErrStreamNotFound)
	_, err = d.DeleteRecords(ctx, "del", 2, 0)
	wantErr(t, "DeleteRecords of a missing partition", err, disbackend.ErrPartitionNotFound)
}

// testRestartKeepsLogStart checks that a DeleteRecords log start offset
// survives a restart, and that retention after it does not move it back.
func testRestartKeepsLogStart(t *testing.T, h Harness) {
	ctx := ctxT(t)
	b := hopen(t, h, nil)
	mustCreate(t, b, spec(t, "dur", 1))
	for i := 0; i < 4; i++ {
		mustAppend(t, b, "dur", 0, MakeBatch(BatchOptions{NumRecords: 3, Seed: uint64(i)}))
	}
	mustDelete(t, deleter(t, b), "dur", 0, 7, 7)
	b = hreopen(t, h, b)
	wantRange(t, b, "dur", 0, 7, 12)
	_, err := b.Read(ctx, "dur", 0, 6, 1<<20)
	wantErr(t, "read below the log start offset after a restart", err, disbackend.ErrOffsetOutOfRange)
	if h.EnforceRetention != nil {
		if err := h.EnforceRetention(b); err != nil {
			t.Fatal(err)
		}
		wantRange(t, b, "dur", 0, 7, 12)
	}
	mustDelete(t, deleter(t, b), "dur", 0, 12, 12)
	b = hreopen(t, h, b)
	wantRange(t, b, "dur", 0, 12, 12)
}
