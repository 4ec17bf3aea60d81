package disrest

import (
	"errors"
	"testing"
	"time"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/backendtest"
	"github.com/disgw/disgw/disbackend/dislocal"
)

// TestDeleteRecordsAcrossNodes checks that a DeleteRecords log start
// offset is kept in DIS: the node that served it sees it at once, another
// node within its LogStartRefresh, a new Store (a restarted gateway) at
// its first range, and a stream recreated under the same name starts
// without it.
func TestDeleteRecordsAcrossNodes(t *testing.T) {
	t.Parallel()
	_, url := startDIS(t, dislocal.Options{})
	a := newStore(t, url, nil)
	b := newStore(t, url, func(o *Options) { o.LogStartRefresh = 20 * time.Millisecond })
	ctx := ctxT(t)
	stream := mkStream(t, a, "dr.nodes", 2)
	if _, err := a.Append(stream, 0, backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 10})).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if r, err := b.Range(stream, 0); err != nil || r.First != 0 || r.Next != 10 {
		t.Fatalf("node b: Range = %+v, %v; want [0 : 10]", r, err)
	}
	if lw, err := a.DeleteRecords(ctx, stream, 0, 5); err != nil || lw != 5 {
		t.Fatalf("DeleteRecords(5) = %d, %v; want 5", lw, err)
	}
	if r, err := a.Range(stream, 0); err != nil || r.First != 5 || r.Next != 10 {
		t.Fatalf("node a after DeleteRecords: Range = %+v, %v; want [5 : 10]", r, err)
	}
	if _, err := a.Read(ctx, stream, 0, 4, 1<<20); !errors.Is(err, disbackend.ErrOffsetOutOfRange) {
		t.Fatalf("node a: Read(4) error %v, want ErrOffsetOutOfRange", err)
	}
	// Node b sees it once it reads the floors again (every 20 ms here).
	for deadline := time.Now().Add(10 * time.Second); ; {
		r, err := b.Range(stream, 0)
		if err != nil {
			t.Fatal(err)
		}
		if r.First == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node b: Range = %+v long after node a's DeleteRecords(5)", r)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := b.Read(ctx, stream, 0, 4, 1<<20); !errors.Is(err, disbackend.ErrOffsetOutOfRange) {
		t.Fatalf("node b: Read(4) error %v, want ErrOffsetOutOfRange", err)
	}
	// Node b's DeleteRecords below it reads node a's floor first.
	if lw, err := b.DeleteRecords(ctx, stream, 0, 3); err != nil || lw != 5 {
		t.Fatalf("node b: DeleteRecords(3) = %d, %v; want 5", lw, err)
	}
	// A restarted gateway (a new Store) knows it at once.
	c := newStore(t, url, nil)
	if r, err := c.Range(stream, 0); err != nil || r.First != 5 || r.Next != 10 {
		t.Fatalf("new store: Range = %+v, %v; want [5 : 10]", r, err)
	}
	if r, err := c.Range(stream, 1); err != nil || r.First != 0 {
		t.Fatalf("new store: Range of partition 1 = %+v, %v; want first 0", r, err)
	}
	// A stream recreated under the same name has its own log start.
	if err := a.DeleteStream(ctx, stream); err != nil {
		t.Fatal(err)
	}
	stream = mkStream(t, a, "dr.nodes", 2)
	if _, err := a.Append(stream, 0, backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 10})).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	d := newStore(t, url, nil)
	if r, err := d.Range(stream, 0); err != nil || r.First != 0 || r.Next != 10 {
		t.Fatalf("recreated stream: Range = %+v, %v; want [0 : 10]", r, err)
	}
}
