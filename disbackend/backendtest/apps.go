package backendtest

import (
	"strings"
	"testing"
	"time"

	"github.com/disgw/disgw/disbackend"
)

func mustCreateApp(t *testing.T, b disbackend.Backend, group string) disbackend.App {
	t.Helper()
	name, err := disbackend.AppNameForGroup(group)
	if err != nil {
		t.Fatalf("AppNameForGroup(%q): %v", group, err)
	}
	app, err := b.CreateApp(ctxT(t), disbackend.App{Name: name, GroupID: group})
	if err != nil {
		t.Fatalf("CreateApp(%q): %v", name, err)
	}
	if app.Name != name || app.GroupID != group || app.CreatedAt.IsZero() {
		t.Fatalf("CreateApp(%q) = %+v, want name, group id and a creation time", name, app)
	}
	return app
}

func mustCommit(t *testing.T, b disbackend.Backend, app string, cps ...disbackend.Checkpoint) {
	t.Helper()
	if err := b.CommitCheckpoints(ctxT(t), app, cps); err != nil {
		t.Fatalf("CommitCheckpoints(%q): %v", app, err)
	}
}

func mustCheckpoints(t *testing.T, b disbackend.Backend, app, stream string) []disbackend.Checkpoint {
	t.Helper()
	cps, err := b.Checkpoints(ctxT(t), app, stream)
	if err != nil {
		t.Fatalf("Checkpoints(%q, %q): %v", app, stream, err)
	}
	return cps
}

// cp is a checkpoint for comparisons: stream, partition, offset, metadata.
type cp struct {
	stream string
	part   int32
	seq    int64
	meta   string
}

func wantCheckpoints(t *testing.T, what string, got []disbackend.Checkpoint, want ...cp) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d checkpoints %+v, want %d %+v", what, len(got), got, len(want), want)
	}
	for i, w := range want {
		g := got[i]
		if g.Stream != w.stream || g.Partition != w.part || g.SequenceNumber != w.seq || g.Metadata != w.meta {
			t.Fatalf("%s: checkpoint %d = %s/%d at %d %q, want %s/%d at %d %q", what, i,
				g.Stream, g.Partition, g.SequenceNumber, g.Metadata, w.stream, w.part, w.seq, w.meta)
		}
		if g.CommittedAt.IsZero() {
			t.Fatalf("%s: checkpoint %d has no CommittedAt", what, i)
		}
	}
}

func checkpoint(stream string, part int32, seq int64, meta string) disbackend.Checkpoint {
	return disbackend.Checkpoint{Stream: stream, Partition: part, SequenceNumber: seq, Metadata: meta, LeaderEpoch: -1}
}

func testApps(t *testing.T, b disbackend.Backend) {
	ctx := ctxT(t)
	list, err := b.ListApps(ctx)
	if err != nil || len(list) != 0 {
		t.Fatalf("ListApps of a new backend = %v, %v; want none", list, err)
	}
	created := map[string]disbackend.App{}
	for _, g := range []string{"zeta", "group.one", "a_b", strings.Repeat("g", 300)} {
		app := mustCreateApp(t, b, g)
		created[app.Name] = app
	}
	list, err = b.ListApps(ctx)
	if err != nil || len(list) != len(created) {
		t.Fatalf("ListApps = %d apps, %v; want %d", len(list), err, len(created))
	}
	for i, app := range list {
		if i > 0 && list[i-1].Name >= app.Name {
			t.Fatalf("ListApps not sorted by name: %q before %q", list[i-1].Name, app.Name)
		}
		want := created[app.Name]
		if app.GroupID != want.GroupID || !app.CreatedAt.Equal(want.CreatedAt) {
			t.Fatalf("ListApps: %+v, want %+v", app, want)
		}
	}
	got, err := b.DescribeApp(ctx, "group_2Eone")
	if err != nil || got.GroupID != "group.one" {
		t.Fatalf("DescribeApp(group_2Eone) = %+v, %v; want group id group.one", got, err)
	}
	_, err = b.CreateApp(ctx, disbackend.App{Name: "zeta", GroupID: "zeta"})
	wantErr(t, "create existing app", err, disbackend.ErrAppExists)
	_, err = b.CreateApp(ctx, disbackend.App{Name: "zeta", GroupID: "other"})
	wantErr(t, "create app for another group", err, disbackend.ErrNameCollision)
	for _, bad := range []string{"", "a.b", "sp ace", strings.Repeat("x", disbackend.MaxAppNameLen+1)} {
		_, err = b.CreateApp(ctx, disbackend.App{Name: bad, GroupID: bad})
		wantErr(t, "create app "+bad, err, disbackend.ErrInvalidName)
	}
	if err := b.DeleteApp(ctx, "zeta"); err != nil {
		t.Fatalf("DeleteApp: %v", err)
	}
	_, err = b.DescribeApp(ctx, "zeta")
	wantErr(t, "describe deleted app", err, disbackend.ErrAppNotFound)
	wantErr(t, "delete app again", b.DeleteApp(ctx, "zeta"), disbackend.ErrAppNotFound)
	list, _ = b.ListApps(ctx)
	if len(list) != len(created)-1 {
		t.Fatalf("ListApps after delete: %d apps, want %d", len(list), len(created)-1)
	}
	// The name is free again, for any group.
	if _, err := b.CreateApp(ctx, disbackend.App{Name: "zeta", GroupID: "other"}); err != nil {
		t.Fatalf("CreateApp after delete: %v", err)
	}
}

func testCheckpoints(t *testing.T, b disbackend.Backend) {
	ctx := ctxT(t)
	mustCreate(t, b, spec(t, "cp.a", 3))
	mustCreate(t, b, spec(t, "cp-b", 2))
	app := mustCreateApp(t, b, "grp").Name
	other := mustCreateApp(t, b, "other").Name
	wantCheckpoints(t, "no checkpoints yet", mustCheckpoints(t, b, app, ""))

	mustCommit(t, b, app, checkpoint("cp_a", 2, 7, "m2"), checkpoint("cp-b", 1, 0, ""), checkpoint("cp_a", 0, 100, "m0"))
	mustCommit(t, b, other, checkpoint("cp_a", 0, 5, "o"))
	wantCheckpoints(t, "all streams", mustCheckpoints(t, b, app, ""),
		cp{"cp-b", 1, 0, ""}, cp{"cp_a", 0, 100, "m0"}, cp{"cp_a", 2, 7, "m2"})
	wantCheckpoints(t, "one stream", mustCheckpoints(t, b, app, "cp_a"),
		cp{"cp_a", 0, 100, "m0"}, cp{"cp_a", 2, 7, "m2"})
	wantCheckpoints(t, "other app", mustCheckpoints(t, b, other, ""), cp{"cp_a", 0, 5, "o"})

	// A commit replaces the partition's checkpoint, also with a lower offset
	// (Kafka lets a group rewind).
	mustCommit(t, b, app, checkpoint("cp_a", 0, 3, "back"))
	wantCheckpoints(t, "rewound", mustCheckpoints(t, b, app, "cp_a"), cp{"cp_a", 0, 3, "back"}, cp{"cp_a", 2, 7, "m2"})

	// All or nothing: one bad checkpoint refuses the whole commit.
	long := strings.Repeat("é", disbackend.MaxCheckpointMetadataLen+1)
	for _, tc := range []struct {
		name string
		bad  disbackend.Checkpoint
		err  error
	}{
		{"metadata too long", checkpoint("cp_a", 1, 1, long), disbackend.ErrInvalidConfig},
		{"missing stream", checkpoint("nope", 0, 1, ""), disbackend.ErrStreamNotFound},
		{"missing partition", checkpoint("cp-b", 2, 1, ""), disbackend.ErrPartitionNotFound},
	} {
		err := b.CommitCheckpoints(ctx, app, []disbackend.Checkpoint{checkpoint("cp_a", 1, 50, "x"), tc.bad})
		wantErr(t, tc.name, err, tc.err)
		wantCheckpoints(t, tc.name+": nothing written", mustCheckpoints(t, b, app, "cp_a"),
			cp{"cp_a", 0, 3, "back"}, cp{"cp_a", 2, 7, "m2"})
	}
	atLimit := strings.Repeat("é", disbackend.MaxCheckpointMetadataLen)
	mustCommit(t, b, app, checkpoint("cp_a", 1, 9, atLimit))

	err := b.CommitCheckpoints(ctx, "nope", []disbackend.Checkpoint{checkpoint("cp_a", 0, 1, "")})
	wantErr(t, "commit for a missing app", err, disbackend.ErrAppNotFound)
	_, err = b.Checkpoints(ctx, "nope", "")
	wantErr(t, "checkpoints of a missing app", err, disbackend.ErrAppNotFound)
	wantErr(t, "delete checkpoints of a missing app", b.DeleteCheckpoints(ctx, "nope", "cp_a", nil), disbackend.ErrAppNotFound)

	// DeleteCheckpoints: some partitions, then the whole stream.
	if err := b.DeleteCheckpoints(ctx, app, "cp_a", []int32{2, 1}); err != nil {
		t.Fatalf("DeleteCheckpoints(partitions): %v", err)
	}
	wantCheckpoints(t, "after deleting two partitions", mustCheckpoints(t, b, app, ""),
		cp{"cp-b", 1, 0, ""}, cp{"cp_a", 0, 3, "back"})
	if err := b.DeleteCheckpoints(ctx, app, "cp_a", nil); err != nil {
		t.Fatalf("DeleteCheckpoints(stream): %v", err)
	}
	wantCheckpoints(t, "after deleting the stream's", mustCheckpoints(t, b, app, ""), cp{"cp-b", 1, 0, ""})
	wantCheckpoints(t, "other app untouched", mustCheckpoints(t, b, other, ""), cp{"cp_a", 0, 5, "o"})

	// DeleteStream removes every app's checkpoints of it, and only those.
	mustCommit(t, b, app, checkpoint("cp_a", 1, 11, ""))
	if err := b.DeleteStream(ctx, "cp_a"); err != nil {
		t.Fatal(err)
	}
	wantCheckpoints(t, "app after DeleteStream", mustCheckpoints(t, b, app, ""), cp{"cp-b", 1, 0, ""})
	wantCheckpoints(t, "other app after DeleteStream", mustCheckpoints(t, b, other, ""))
	mustCreate(t, b, spec(t, "cp.a", 3))
	wantCheckpoints(t, "re-created stream", mustCheckpoints(t, b, app, "cp_a"))

	// DeleteApp removes its checkpoints; a new app of that name has none.
	if err := b.DeleteApp(ctx, app); err != nil {
		t.Fatal(err)
	}
	mustCreateApp(t, b, "grp")
	wantCheckpoints(t, "re-created app", mustCheckpoints(t, b, app, ""))
}

// testCheckpointTime checks CommittedAt: kept when given, now otherwise.
func testCheckpointTime(t *testing.T, b disbackend.Backend) {
	mustCreate(t, b, spec(t, "cpt", 1))
	app := mustCreateApp(t, b, "timed").Name
	at := time.Date(2031, 5, 6, 7, 8, 9, 123456789, time.UTC)
	c := checkpoint("cpt", 0, 1, "")
	c.CommittedAt = at
	mustCommit(t, b, app, c)
	if got := mustCheckpoints(t, b, app, ""); !got[0].CommittedAt.Equal(at) {
		t.Fatalf("CommittedAt = %v, want the given %v", got[0].CommittedAt, at)
	}
	before := time.Now()
	mustCommit(t, b, app, checkpoint("cpt", 0, 2, ""))
	if got := mustCheckpoints(t, b, app, "")[0].CommittedAt; got.Before(before.Add(-time.Second)) || got.After(time.Now().Add(time.Second)) {
		t.Fatalf("CommittedAt = %v, want about now (%v)", got, before)
	}
}

// testCheckpointLeaderEpoch checks Checkpoint.LeaderEpoch: kept with the
// checkpoint and read back (-1 when the commit had none, also over an
// earlier epoch at the same offset), gone with the checkpoint, and no app
// of its own in ListApps.
func testCheckpointLeaderEpoch(t *testing.T, b disbackend.Backend) {
	mustCreate(t, b, spec(t, "cpe", 2))
	for p := range int32(2) { // DIS takes checkpoints only within the partition's range
		mustAppend(t, b, "cpe", p, MakeBatch(BatchOptions{NumRecords: 3, Seed: uint64(p)}))
	}
	app := mustCreateApp(t, b, "epochs").Name
	epochs := func(what string, want ...int32) {
		t.Helper()
		got := mustCheckpoints(t, b, app, "cpe")
		if len(got) != len(want) {
			t.Fatalf("%s: %d checkpoints %+v, want %d", what, len(got), got, len(want))
		}
		for i, w := range want {
			if got[i].LeaderEpoch != w {
				t.Fatalf("%s: checkpoint %s/%d at %d has leader epoch %d, want %d", what,
					got[i].Stream, got[i].Partition, got[i].SequenceNumber, got[i].LeaderEpoch, w)
			}
		}
	}
	c0, c1 := checkpoint("cpe", 0, 1, "m"), checkpoint("cpe", 1, 1, "")
	c0.LeaderEpoch, c1.LeaderEpoch = 5, 0
	mustCommit(t, b, app, c0, c1)
	epochs("committed with epochs", 5, 0)
	wantCheckpoints(t, "committed with epochs", mustCheckpoints(t, b, app, ""), cp{"cpe", 0, 1, "m"}, cp{"cpe", 1, 1, ""})
	c0.LeaderEpoch = -1
	mustCommit(t, b, app, c0)
	epochs("same offset without an epoch", -1, 0)
	c0.SequenceNumber, c0.LeaderEpoch = 2, 7
	mustCommit(t, b, app, c0)
	epochs("a new offset and epoch", 7, 0)
	if err := b.DeleteCheckpoints(ctxT(t), app, "cpe", []int32{0}); err != nil {
		t.Fatal(err)
	}
	epochs("after DeleteCheckpoints", 0)
	c0.SequenceNumber, c0.LeaderEpoch = 1, -1
	mustCommit(t, b, app, c0)
	epochs("committed again without an epoch", -1, 0)
	list, err := b.ListApps(ctxT(t))
	if err != nil || len(list) != 1 || list[0].Name != app {
		t.Fatalf("ListApps = %+v, %v; want only %q", list, err, app)
	}
}

// testRestartApps checks that apps and checkpoints survive a restart.
func testRestartApps(t *testing.T, h Harness) {
	b := hopen(t, h, nil)
	mustCreate(t, b, spec(t, "ra", 2))
	app := mustCreateApp(t, b, "restart.group")
	mustCreateApp(t, b, "gone")
	withEpoch := checkpoint("ra", 0, 42, "meta")
	withEpoch.LeaderEpoch = 3
	mustCommit(t, b, app.Name, withEpoch, checkpoint("ra", 1, 7, ""))
	mustCommit(t, b, "gone", checkpoint("ra", 0, 1, ""))
	if err := b.DeleteApp(ctxT(t), "gone"); err != nil {
		t.Fatal(err)
	}
	b = hreopen(t, h, b)
	got, err := b.DescribeApp(ctxT(t), app.Name)
	if err != nil || got.GroupID != app.GroupID || !got.CreatedAt.Equal(app.CreatedAt) {
		t.Fatalf("DescribeApp after restart = %+v, %v; want %+v", got, err, app)
	}
	_, err = b.DescribeApp(ctxT(t), "gone")
	wantErr(t, "deleted app after restart", err, disbackend.ErrAppNotFound)
	got2 := mustCheckpoints(t, b, app.Name, "")
	wantCheckpoints(t, "after restart", got2, cp{"ra", 0, 42, "meta"}, cp{"ra", 1, 7, ""})
	if got2[0].LeaderEpoch != 3 || got2[1].LeaderEpoch != -1 {
		t.Fatalf("leader epochs after restart: %d, %d; want 3, -1", got2[0].LeaderEpoch, got2[1].LeaderEpoch)
	}
}

// nativeCommit commits cp as a DIS application does (Options.NativeCommit).
func nativeCommit(t *testing.T, b disbackend.Backend, app string, cp disbackend.Checkpoint) {
	t.Helper()
	cp.LeaderEpoch = -1
	var err error
	if sb, ok := b.(*suiteBackend); ok && sb.opts.NativeCommit != nil {
		err = sb.opts.NativeCommit(ctxT(t), sb.Backend, app, cp)
	} else {
		err = b.CommitCheckpoints(ctxT(t), app, []disbackend.Checkpoint{cp})
	}
	if err != nil {
		t.Fatalf("native commit of %s/%d at %d: %v", cp.Stream, cp.Partition, cp.SequenceNumber, err)
	}
}

// wantExactly checks got against want: stream, partition, offset,
// metadata and leader epoch.
func wantExactly(t *testing.T, what string, got []disbackend.Checkpoint, want ...disbackend.Checkpoint) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d checkpoints %+v, want %d %+v", what, len(got), got, len(want), want)
	}
	for i, w := range want {
		g := got[i]
		if g.Stream != w.Stream || g.Partition != w.Partition || g.SequenceNumber != w.SequenceNumber ||
			g.Metadata != w.Metadata || g.LeaderEpoch != w.LeaderEpoch {
			t.Fatalf("%s: checkpoint %d = %s/%d at %d %q epoch %d, want %s/%d at %d %q epoch %d", what, i,
				g.Stream, g.Partition, g.SequenceNumber, g.Metadata, g.LeaderEpoch,
				w.Stream, w.Partition, w.SequenceNumber, w.Metadata, w.LeaderEpoch)
		}
	}
}

// testCheckpointAnyOffset checks that a checkpoint takes any offset, as
// Kafka's OffsetCommit does (librdkafka's 0099 and 0140 commit 10 on an
// empty partition; a slow consumer commits below a log start that just
// moved), and reads it back exactly (offset, metadata, leader epoch): on an
// empty partition, past the end, below the log start, negative. Whichever
// of the backend's commit and a DIS application's (NativeCommit) came
// later wins, also when the native one has the sequence number a kept
// offset stands on.
func testCheckpointAnyOffset(t *testing.T, b disbackend.Backend) {
	ctx := ctxT(t)
	mustCreate(t, b, spec(t, "any", 3))
	mustAppend(t, b, "any", 1, MakeBatch(BatchOptions{NumRecords: 5, Seed: 1}))
	mustAppend(t, b, "any", 2, MakeBatch(BatchOptions{NumRecords: 6, Seed: 2}))
	mustDelete(t, deleter(t, b), "any", 2, 4, 4)
	app := mustCreateApp(t, b, "any.offset").Name
	c := func(p int32, off int64, meta string, epoch int32) disbackend.Checkpoint {
		return disbackend.Checkpoint{Stream: "any", Partition: p, SequenceNumber: off, Metadata: meta, LeaderEpoch: epoch}
	}
	read := func(what string, want ...disbackend.Checkpoint) {
		t.Helper()
		wantExactly(t, what, mustCheckpoints(t, b, app, "any"), want...)
		wantExactly(t, what+" (all streams)", mustCheckpoints(t, b, app, ""), want...)
	}

	empty := c(0, 10, "librdkafka 0099", 3)
	past := c(1, 50, "past the end", -1)
	below := c(2, 1, "below the log start", 7)
	mustCommit(t, b, app, empty, past, below)
	read("committed outside the ranges", empty, past, below)

	// A native commit after a kept offset wins: on the empty partition at
	// 0, the only sequence number DIS takes there, with other metadata.
	n0, n1 := c(0, 0, "adapter", -1), c(1, 3, "", -1)
	nativeCommit(t, b, app, n0)
	nativeCommit(t, b, app, n1)
	read("native commits after kept offsets", n0, n1, below)

	// A kept offset after a native commit wins.
	mustCommit(t, b, app, empty, past)
	read("kept offsets after native commits", empty, past, below)

	// Records arriving under a kept offset leave it; an offset inside the
	// range replaces it, and a kept one replaces that again.
	mustAppend(t, b, "any", 0, MakeBatch(BatchOptions{NumRecords: 4, Seed: 3}))
	read("after records arrived", empty, past, below)
	in := c(1, 5, "", 2)
	mustCommit(t, b, app, in)
	read("inside the range", empty, in, below)
	neg := c(1, -3, "negative", 4)
	mustCommit(t, b, app, neg)
	read("negative", empty, neg, below)

	// DeleteCheckpoints removes a kept offset with its checkpoint: a native
	// commit of the sequence number it stood on, with its metadata, is then
	// the native one.
	if err := b.DeleteCheckpoints(ctx, app, "any", []int32{0}); err != nil {
		t.Fatal(err)
	}
	read("after DeleteCheckpoints", neg, below)
	wantRange(t, b, "any", 0, 0, 4)
	again := c(0, 0, empty.Metadata, -1)
	nativeCommit(t, b, app, again)
	read("native commit after DeleteCheckpoints", again, neg, below)
}
