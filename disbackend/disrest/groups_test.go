package disrest

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/dislocal"
)

// TestGroupStatesSurviveRestart: group states saved through one Store are
// read back by another over the same DIS (a gateway restart): the latest
// state of each group, none for a group whose state was deleted; the
// stream is compacted and not listed as a topic.
func TestGroupStatesSurviveRestart(t *testing.T) {
	_, url := startDIS(t, dislocal.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := newStore(t, url, func(o *Options) { o.Linger = time.Millisecond })
	if got, err := s.GroupStates(ctx); err != nil || len(got) != 0 {
		t.Fatalf("states of a new project: %v, %v", got, err)
	}
	for _, st := range []struct{ group, state string }{{"g1", "a"}, {"g2", "b"}, {"g1", "c"}, {"g3", "d"}} {
		if err := s.SaveGroupState(ctx, st.group, []byte(st.state)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SaveGroupState(ctx, "g2", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := newStore(t, url, nil)
	got, err := s2.GroupStates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || string(got["g1"]) != "c" || string(got["g3"]) != "d" {
		t.Fatalf("after a restart: %q, want g1=c g3=d", got)
	}
	st, err := s2.DescribeStream(ctx, GroupStream)
	if err != nil || st.Config.CleanupPolicy != "compact" {
		t.Fatalf("%s: %+v, %v; want a compacted stream", GroupStream, st.Config, err)
	}
	sts, err := s2.ListStreams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range sts {
		if st.Name == GroupStream {
			t.Fatalf("%s is listed as a topic", GroupStream)
		}
	}
}

// groupRecords reads GroupStream's records of group, in stream order, as
// "version:value" ("version:-" for a tombstone).
func groupRecords(t *testing.T, s *Store, group string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := s.describeRange(ctx, GroupStream, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	err = s.scan(ctx, partKey{GroupStream, 0}, r.First, r.Next, copyReadBytes, false, func(recs []fetched) bool {
		for i := range recs {
			if string(recs[i].rec.Key) != group {
				continue
			}
			v := "-"
			if recs[i].rec.Value != nil {
				v = string(recs[i].rec.Value)
			}
			out = append(out, strconv.FormatUint(groupVersion(&recs[i].rec), 10)+":"+v)
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// appendRaw appends records to GroupStream as another writer would (the
// compactor's copies, a gateway from before versions).
func appendRaw(t *testing.T, s *Store, recs ...disbackend.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.ensureTable(ctx, &s.groups); err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		recs[i].OffsetDelta = int32(i)
	}
	if _, err := s.appendJob(partKey{GroupStream, 0}, recordsBatch(recs), nil).Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestGroupStateVersions: a reader keeps the highest version of a group,
// not the last record: an older record (a compaction copy) landing after
// a newer save does not roll the group back, and the reader re-appends
// the newer record so the compactor keeps it; records written before
// versions read as version 0; saves number their versions on from the
// highest read.
func TestGroupStateVersions(t *testing.T) {
	_, url := startDIS(t, dislocal.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := newStore(t, url, func(o *Options) { o.Linger = time.Millisecond })
	// Written before versions: no header.
	appendRaw(t, s, disbackend.Record{Key: []byte("old"), Value: []byte("o1")},
		disbackend.Record{Key: []byte("old"), Value: []byte("o2")})
	if got, err := s.GroupStates(ctx); err != nil || string(got["old"]) != "o2" {
		t.Fatalf("states of records without versions: %q, %v; want old=o2", got, err)
	}
	for _, v := range []string{"a", "b"} {
		if err := s.SaveGroupState(ctx, "g", []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SaveGroupState(ctx, "old", []byte("o3")); err != nil {
		t.Fatal(err)
	}
	if got := groupRecords(t, s, "g"); len(got) != 2 || got[0] != "1:a" || got[1] != "2:b" {
		t.Fatalf("records of g: %v, want [1:a 2:b]", got)
	}
	// Late copies of older records: g's version 1, old's version 0.
	appendRaw(t, s, groupRecord("g", []byte("a"), 1), disbackend.Record{Key: []byte("old"), Value: []byte("o2")})

	s2 := newStore(t, url, nil) // another node, or a restart
	got, err := s2.GroupStates(ctx)
	if err != nil || string(got["g"]) != "b" || string(got["old"]) != "o3" {
		t.Fatalf("states after late copies: %q, %v; want g=b old=o3", got, err)
	}
	if st, err := s2.GroupState(ctx, "g"); err != nil || string(st) != "b" {
		t.Fatalf("state of g after a late copy: %q, %v; want b", st, err)
	}
	// The reader re-appended the newest records over the late copies.
	if got := groupRecords(t, s2, "g"); got[len(got)-1] != "2:b" {
		t.Fatalf("records of g: %v; want 2:b last", got)
	}
	if got := groupRecords(t, s2, "old"); got[len(got)-1] != "1:o3" {
		t.Fatalf("records of old: %v; want 1:o3 last", got)
	}
	// The next save numbers on from the highest version read.
	if err := s2.SaveGroupState(ctx, "g", nil); err != nil {
		t.Fatal(err)
	}
	if got := groupRecords(t, s2, "g"); got[len(got)-1] != "3:-" {
		t.Fatalf("records of g: %v; want the tombstone 3:- last", got)
	}
	appendRaw(t, s, groupRecord("g", []byte("b"), 2)) // a late copy after the tombstone
	if st, err := s2.GroupState(ctx, "g"); err != nil || st != nil {
		t.Fatalf("state of a deleted group after a late copy: %q, %v; want none", st, err)
	}
}

// TestGroupStateOfAnotherNode: GroupState sees every save another Store
// (another node) made before the call, tombstones included.
func TestGroupStateOfAnotherNode(t *testing.T) {
	_, url := startDIS(t, dislocal.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := newStore(t, url, func(o *Options) { o.Linger = time.Millisecond })
	b := newStore(t, url, func(o *Options) { o.Linger = time.Millisecond })
	if st, err := a.GroupState(ctx, "g"); err != nil || st != nil {
		t.Fatalf("state of a new group: %q, %v", st, err)
	}
	for _, v := range []string{"x", "y"} {
		if err := b.SaveGroupState(ctx, "g", []byte(v)); err != nil {
			t.Fatal(err)
		}
		if st, err := a.GroupState(ctx, "g"); err != nil || string(st) != v {
			t.Fatalf("state saved by another node: %q, %v; want %s", st, err, v)
		}
	}
	// a takes the group over: its save numbers on from b's.
	if err := a.SaveGroupState(ctx, "g", []byte("z")); err != nil {
		t.Fatal(err)
	}
	if got := groupRecords(t, a, "g"); len(got) != 3 || got[2] != "3:z" {
		t.Fatalf("records of g: %v, want version 3 last", got)
	}
	if st, err := b.GroupState(ctx, "g"); err != nil || string(st) != "z" {
		t.Fatalf("state saved by the new coordinator: %q, %v; want z", st, err)
	}
	if err := b.SaveGroupState(ctx, "g", nil); err != nil {
		t.Fatal(err)
	}
	if st, err := a.GroupState(ctx, "g"); err != nil || st != nil {
		t.Fatalf("state deleted by another node: %q, %v; want none", st, err)
	}
}

// clusterFence is a node's fence that owns the groups in its set.
type clusterFence struct {
	mu   sync.Mutex
	owns map[string]bool
}

func (f *clusterFence) mayWrite(key string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.owns[key] {
		return disbackend.ErrNotCoordinator
	}
	return nil
}
func (f *clusterFence) takeover(context.Context, string) error { return nil }
func (f *clusterFence) takeoverWait(string) time.Duration      { return 0 }
func (f *clusterFence) member() (string, int64, bool)          { return "node", 1, true }

// TestGroupStateTail: in cluster mode a Store tails GroupStream, so its
// table follows another node's saves without a call, and it re-appends
// the newest record over a late older copy of a group it coordinates
// only; SaveGroupState of a group another node coordinates is refused.
func TestGroupStateTail(t *testing.T) {
	_, url := startDIS(t, dislocal.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fa := &clusterFence{owns: map[string]bool{disbackend.GroupKey("mine"): true}}
	a := newStore(t, url, func(o *Options) { o.Linger = time.Millisecond })
	a.fence = fa
	b := newStore(t, url, func(o *Options) { o.Linger = time.Millisecond })
	if _, err := a.GroupState(ctx, "mine"); err != nil { // starts the tail
		t.Fatal(err)
	}
	if err := a.SaveGroupState(ctx, "theirs", []byte("t")); !errors.Is(err, disbackend.ErrNotCoordinator) {
		t.Fatalf("save of a group elsewhere: %v, want ErrNotCoordinator", err)
	}
	if err := a.SaveGroupState(ctx, "mine", []byte("m1")); err != nil {
		t.Fatal(err)
	}
	if err := a.SaveGroupState(ctx, "mine", []byte("m2")); err != nil {
		t.Fatal(err)
	}
	if err := b.SaveGroupState(ctx, "theirs", []byte("t1")); err != nil {
		t.Fatal(err)
	}
	if err := b.SaveGroupState(ctx, "theirs", []byte("t2")); err != nil {
		t.Fatal(err)
	}
	// Late copies of both groups' first records.
	appendRaw(t, b, groupRecord("mine", []byte("m1"), 1), groupRecord("theirs", []byte("t1"), 1))
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := groupRecords(t, b, "mine")
		a.groups.mu.Lock()
		e := a.groups.m["theirs"]
		followed := e != nil && string(e.state) == "t2" && a.groups.next > 0
		a.groups.mu.Unlock()
		if followed && got[len(got)-1] == "2:m2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tail did not follow or repair: records of mine %v, followed %v", got, followed)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := groupRecords(t, b, "theirs"); got[len(got)-1] != "1:t1" {
		t.Fatalf("records of theirs: %v; a group of another node is not repaired here", got)
	}
}

// TestGroupStatesNativeFormat: with record format native for topics, group
// states (a header) and their tombstones (a null value) are still saved:
// the gateway's own streams wrap what needs it.
func TestGroupStatesNativeFormat(t *testing.T) {
	_, url := startDIS(t, dislocal.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := newStore(t, url, func(o *Options) { o.Linger, o.RecordFormat = time.Millisecond, FormatNative })
	for _, st := range [][]byte{[]byte("a"), nil, []byte("b")} {
		if err := s.SaveGroupState(ctx, "g", st); err != nil {
			t.Fatalf("save %q: %v", st, err)
		}
	}
	if got := groupRecords(t, s, "g"); len(got) != 3 || got[1] != "2:-" || got[2] != "3:b" {
		t.Fatalf("records of g: %v, want [1:a 2:- 3:b]", got)
	}
}
