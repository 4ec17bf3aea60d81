package disrest

import (
	"testing"
	"time"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/backendtest"
	"github.com/disgw/disgw/disbackend/dislocal"
)

// TestKeptCommits: offsets DIS cannot hold (below the log start after
// retention, on a partition whose records all expired, on an empty
// partition) are taken and read back exactly by this node and another;
// DIS applications read the app's checkpoint at the nearest sequence number
// DIS takes, with the commit's metadata; a native commit moving it wins,
// and one of exactly that sequence number and metadata is the ambiguous
// case docs/dis-backend.md names (the kept offset stays).
func TestKeptCommits(t *testing.T) {
	t.Parallel()
	clk := backendtest.NewFakeClock(time.Now())
	_, st, url := startDISStore(t, dislocal.Options{Now: clk.Now, RetentionUnit: time.Second})
	s := newStore(t, url, nil)
	ctx := ctxT(t)
	stream := mkStream(t, s, "kept", 3) // 24 "hours" of one second
	appendN := func(p, n int32) {
		t.Helper()
		if _, err := s.Append(stream, p, backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: n})).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	appendN(1, 5)
	appendN(2, 4)
	clk.Advance(25 * time.Second)
	appendN(1, 3)
	if err := st.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	for p, want := range []disbackend.PartitionRange{{First: 0, Next: 0}, {First: 5, Next: 8}, {First: 4, Next: 4}} {
		if r, err := s.describeRange(ctx, stream, int32(p)); err != nil || r != want {
			t.Fatalf("partition %d: range %+v, %v; want %+v", p, r, err, want)
		}
	}
	const app = "kept_2Egroup"
	if _, err := s.CreateApp(ctx, disbackend.App{Name: app, GroupID: "kept.group"}); err != nil {
		t.Fatal(err)
	}
	cps := []disbackend.Checkpoint{
		{Stream: stream, Partition: 0, SequenceNumber: 10, Metadata: "empty", LeaderEpoch: 1},
		{Stream: stream, Partition: 1, SequenceNumber: 2, Metadata: "expired", LeaderEpoch: 2},
		{Stream: stream, Partition: 2, SequenceNumber: 1, Metadata: "all expired", LeaderEpoch: -1},
	}
	if err := s.CommitCheckpoints(ctx, app, cps); err != nil {
		t.Fatalf("commit outside the ranges: %v", err)
	}
	exactly := func(what string, st *Store, want ...disbackend.Checkpoint) {
		t.Helper()
		got, err := st.Checkpoints(ctx, app, stream)
		if err != nil || len(got) != len(want) {
			t.Fatalf("%s: Checkpoints = %+v, %v; want %+v", what, got, err, want)
		}
		for i, w := range want {
			g := got[i]
			if g.Partition != w.Partition || g.SequenceNumber != w.SequenceNumber || g.Metadata != w.Metadata || g.LeaderEpoch != w.LeaderEpoch {
				t.Fatalf("%s: checkpoint %d = %+v, want %+v", what, i, g, w)
			}
		}
	}
	exactly("this node", s, cps...)
	exactly("another node", newStore(t, url, nil), cps...)

	// What a DIS application reads: the nearest sequence number DIS takes
	// (the log start, the end, 0 on the empty partition), the metadata as
	// committed.
	for i, want := range []int64{0, 5, 4} {
		sn, meta, err := s.checkpointOf(ctx, app, stream, int32(i))
		if err != nil || sn != want || meta != cps[i].Metadata {
			t.Fatalf("partition %d as DIS holds it: %d %q, %v; want %d %q", i, sn, meta, err, want, cps[i].Metadata)
		}
	}

	// Native commits: other metadata at the same sequence number wins;
	// exactly the same sequence number and metadata does not (ambiguous).
	native := disbackend.Checkpoint{Stream: stream, Partition: 1, SequenceNumber: 5, Metadata: "adapter", LeaderEpoch: -1}
	if err := sdkCommit(ctx, s, app, native); err != nil {
		t.Fatal(err)
	}
	same := disbackend.Checkpoint{Stream: stream, Partition: 0, SequenceNumber: 0, Metadata: "empty", LeaderEpoch: -1}
	if err := sdkCommit(ctx, s, app, same); err != nil {
		t.Fatal(err)
	}
	exactly("after native commits", s, cps[0], native, cps[2])
}

// TestKeptCommitsParallel: with side records, a commit of 24 partitions
// still has at most commitParallelism DIS calls in flight, and two per
// partition.
func TestKeptCommitsParallel(t *testing.T) {
	t.Parallel()
	srv, url := startDIS(t, dislocal.Options{Faults: dislocal.Faults{Latency: 20 * time.Millisecond}})
	s := newStore(t, url, nil)
	ctx := ctxT(t)
	const parts = 24
	stream := mkStream(t, s, "kept.par", parts)
	var cps []disbackend.Checkpoint
	for p := int32(0); p < parts; p++ {
		cps = append(cps, disbackend.Checkpoint{Stream: stream, Partition: p, SequenceNumber: 0, LeaderEpoch: p})
	}
	if _, err := s.CreateApp(ctx, disbackend.App{Name: "par", GroupID: "par"}); err != nil {
		t.Fatal(err)
	}
	before := srv.Stats()
	if err := s.CommitCheckpoints(ctx, "par", cps); err != nil {
		t.Fatal(err)
	}
	after := srv.Stats()
	if n := after.Requests["CommitCheckpoint"] - before.Requests["CommitCheckpoint"]; n != 2*parts {
		t.Fatalf("%d CommitCheckpoint calls for %d partitions with epochs, want %d", n, parts, 2*parts)
	}
	if after.MaxInFlight < 2 || after.MaxInFlight > commitParallelism {
		t.Fatalf("at most %d DIS calls in flight at once; want 2 to %d", after.MaxInFlight, commitParallelism)
	}
	got, err := s.Checkpoints(ctx, "par", stream)
	if err != nil || len(got) != parts {
		t.Fatalf("Checkpoints = %d, %v", len(got), err)
	}
	for i, cp := range got {
		if cp.SequenceNumber != 0 || cp.LeaderEpoch != int32(i) {
			t.Fatalf("checkpoint %d = %+v", i, cp)
		}
	}
}

// TestKeptRecordFormat: side records read back as written, epoch records in
// the form gateways before kept commits wrote, and unreadable ones not at
// all.
func TestKeptRecordFormat(t *testing.T) {
	cp := disbackend.Checkpoint{SequenceNumber: 10, Metadata: "m", LeaderEpoch: 4}
	for _, k := range []keptCommit{keptFor(cp, 10), keptFor(cp, 0), keptFor(disbackend.Checkpoint{SequenceNumber: -7, LeaderEpoch: -1}, 3)} {
		got, ok := decodeKept(k.Base, k.encode())
		if !ok || got != k {
			t.Fatalf("decodeKept(%q) = %+v, %v; want %+v", k.encode(), got, ok, k)
		}
	}
	if e := keptFor(cp, 10).encode(); e != "4" {
		t.Fatalf("epoch record %q, want the epoch alone", e)
	}
	for _, bad := range []string{"", "x", "kept;", "kept;offset=1;epoch=2", "kept;offset=a;epoch=2;meta=0123456789abcdef",
		"kept;offset=1;epoch=2;meta=short", "99999999999"} {
		if k, ok := decodeKept(0, bad); ok {
			t.Fatalf("decodeKept(%q) = %+v, want unreadable", bad, k)
		}
	}
	k, ok := decodeKept(0, "kept;offset=1;epoch=2;meta=0123456789abcdef;later=x")
	if !ok || k.Offset != 1 || k.LeaderEpoch != 2 {
		t.Fatalf("a record with a later field: %+v, %v", k, ok)
	}
	// The rule: current only at its base with its metadata.
	kept := keptFor(disbackend.Checkpoint{SequenceNumber: 50, Metadata: "m", LeaderEpoch: 3}, 8)
	for _, tc := range []struct {
		sn   int64
		meta string
		want int64
	}{{8, "m", 50}, {8, "other", 8}, {9, "m", 9}} {
		got := kept.over(disbackend.Checkpoint{SequenceNumber: tc.sn, Metadata: tc.meta, LeaderEpoch: -1})
		if got.SequenceNumber != tc.want || (tc.want == 50) != (got.LeaderEpoch == 3) {
			t.Fatalf("over(%d %q) = %+v, want %d", tc.sn, tc.meta, got, tc.want)
		}
	}
}
