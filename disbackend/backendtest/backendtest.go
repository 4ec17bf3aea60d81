// Package backendtest is the conformance suite every disbackend.Backend
// passes: Run checks behaviour through the interface alone (streams, the
// log, idempotent producers, apps and checkpoints); RunWith is Run with
// Options for a backend that differs where DIS itself differs (records kept
// one by one instead of the producer's batches, bounded retention, subtests
// skipped with a reason); RunDurable adds what needs a restart, a crash or a
// clock (restart, crash recovery, retention) through a Harness.
//
// It depends on no implementation; localstore runs Run and RunDurable, and
// disrest runs RunWith against dislocal.
package backendtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/kafkawire/batch"
)

// waitTimeout bounds every wait on a Pending or a channel in the suite.
const waitTimeout = 30 * time.Second

// Run runs one subtest per behaviour of disbackend.Backend. newBackend must
// return a new, empty, open backend on the real clock each call; Run closes
// each one at the end of its subtest (a Close error after the subtest
// already closed it is ignored). Subtests run in parallel.
func Run(t *testing.T, newBackend func(t *testing.T) disbackend.Backend) {
	RunWith(t, newBackend, Options{})
}

// Options adapt Run to a backend whose store differs from the embedded one
// where DIS itself differs. The zero value is the full suite.
type Options struct {
	// Skip maps subtest names (as Run names them) to the reason the backend
	// cannot pass them; those subtests are skipped with that reason.
	Skip map[string]string
	// RecordLevel says the backend keeps records, not the producer's
	// batches (DIS: one DIS record per Kafka record). Batches are then
	// compared by their records (offset, timestamp, key, value, headers)
	// instead of their bytes, a read starts at the requested offset rather
	// than at the start of the stored batch, and the subtests about batch
	// boundaries (recordLevelSkips) are skipped.
	RecordLevel bool
	// MaxRetention, when > 0, is used where the suite asks for
	// UnlimitedRetention, for a backend that bounds retention (DIS: at most
	// 168 hours). Refusing unlimited retention is then the backend's own
	// business.
	MaxRetention time.Duration
	// NativeCommit, when set, commits cp (leader epoch -1) to app as a DIS
	// application (the DIS Kafka Adapter, an SDK) does, past the backend's
	// own bookkeeping (disrest: one CommitCheckpoint straight to DIS); b is
	// what newBackend returned. Nil means CommitCheckpoints, for a backend
	// where the two are the same.
	NativeCommit func(ctx context.Context, b disbackend.Backend, app string, cp disbackend.Checkpoint) error
}

// recordLevelSkips are the subtests that check batch boundaries, which a
// record-level backend does not keep.
var recordLevelSkips = map[string]string{
	"ReadMaxBytes": "checks which stored batches fit maxBytes; a record-level backend keeps no producer batches",
}

// suiteBackend carries the Options to the subtests.
type suiteBackend struct {
	disbackend.Backend
	opts Options
}

func optsOf(b disbackend.Backend) Options {
	if sb, ok := b.(*suiteBackend); ok {
		return sb.opts
	}
	return Options{}
}

func (b *suiteBackend) retention(r time.Duration) time.Duration {
	if r == disbackend.UnlimitedRetention && b.opts.MaxRetention > 0 {
		return b.opts.MaxRetention
	}
	return r
}

func (b *suiteBackend) CreateStream(ctx context.Context, spec disbackend.StreamSpec) (disbackend.Stream, error) {
	spec.Config.Retention = b.retention(spec.Config.Retention)
	return b.Backend.CreateStream(ctx, spec)
}

func (b *suiteBackend) UpdateStreamConfig(ctx context.Context, name string, cfg disbackend.StreamConfig) error {
	cfg.Retention = b.retention(cfg.Retention)
	return b.Backend.UpdateStreamConfig(ctx, name, cfg)
}

// StreamNameForTopic is the wrapped backend's (disbackend.StreamNameFor).
func (b *suiteBackend) StreamNameForTopic(topic string) (string, error) {
	return disbackend.StreamNameFor(b.Backend, topic)
}

// RunWith is Run with Options.
func RunWith(t *testing.T, newBackend func(t *testing.T) disbackend.Backend, opts Options) {
	open := func(t *testing.T) disbackend.Backend {
		t.Helper()
		b := newBackend(t)
		t.Cleanup(func() { _ = b.Close() })
		return &suiteBackend{Backend: b, opts: opts}
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, b disbackend.Backend)
	}{
		{"CreateDescribeList", testCreateDescribeList},
		{"CreateErrors", testCreateErrors},
		{"NameCollision", testNameCollision},
		{"LongTopicNames", testLongTopicNames},
		{"DeleteStream", testDeleteStream},
		{"NotFound", testNotFound},
		{"AppendRead", testAppendRead},
		{"ReadMaxBytes", testReadMaxBytes},
		{"ReadEmptyAndOutOfRange", testReadEmptyAndOutOfRange},
		{"ConcurrentAppends", testConcurrentAppends},
		{"AppendOrderPerGoroutine", testAppendOrderPerGoroutine},
		{"ChangedWakes", testChangedWakes},
		{"Timestamps", testTimestamps},
		{"LogAppendTime", testLogAppendTime},
		{"UpdatePartitionCount", testUpdatePartitionCount},
		{"UpdateStreamConfig", testUpdateStreamConfig},
		{"IdempotentDuplicate", testIdempotentDuplicate},
		{"IdempotentDuplicateWhilePending", testIdempotentDuplicateWhilePending},
		{"IdempotentSequenceErrors", testIdempotentSequenceErrors},
		{"IdempotentEpochs", testIdempotentEpochs},
		{"IdempotentWrap", testIdempotentWrap},
		{"IdempotentErrorsAreIsolated", testIdempotentErrorsAreIsolated},
		{"InitProducerIDUnique", testInitProducerIDUnique},
		{"Apps", testApps},
		{"Checkpoints", testCheckpoints},
		{"CheckpointTime", testCheckpointTime},
		{"CheckpointLeaderEpoch", testCheckpointLeaderEpoch},
		{"CheckpointAnyOffset", testCheckpointAnyOffset},
		{"DeleteRecords", testDeleteRecords},
		{"Close", testClose},
	}
	for _, tc := range tests {
		reason := opts.Skip[tc.name]
		if r, ok := recordLevelSkips[tc.name]; ok && opts.RecordLevel && reason == "" {
			reason = r
		}
		t.Run(tc.name, func(t *testing.T) {
			if reason != "" {
				t.Skip(reason)
			}
			t.Parallel()
			tc.fn(t, open(t))
		})
	}
}

// --- helpers -------------------------------------------------------------

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// spec returns a stream spec for topic with n partitions and unlimited
// retention.
func spec(t *testing.T, topic string, n int32) disbackend.StreamSpec {
	t.Helper()
	name, err := disbackend.StreamNameForTopic(topic)
	if err != nil {
		t.Fatalf("StreamNameForTopic(%q): %v", topic, err)
	}
	return disbackend.StreamSpec{Name: name, TopicName: topic, PartitionCount: n,
		Config: disbackend.StreamConfig{Retention: disbackend.UnlimitedRetention, MaxMessageBytes: 1 << 20}}
}

func mustCreate(t *testing.T, b disbackend.Backend, s disbackend.StreamSpec) disbackend.Stream {
	t.Helper()
	st, err := b.CreateStream(ctxT(t), s)
	if err != nil {
		t.Fatalf("CreateStream(%q): %v", s.Name, err)
	}
	return st
}

// stored is a batch as the backend must return it: the bytes appended with
// the base offset rewritten.
type stored struct {
	base int64
	raw  []byte
}

// appendBatch appends batch and waits; it returns the result and the bytes
// the backend must now hold (a copy taken before the backend owned Raw).
func appendBatch(t *testing.T, b disbackend.Backend, stream string, part int32, bt disbackend.Batch) (disbackend.AppendResult, []byte, error) {
	t.Helper()
	want := bytes.Clone(bt.Raw)
	res, err := b.Append(stream, part, bt).Wait(ctxT(t))
	if err == nil {
		batch.SetBaseOffset(want, res.BaseOffset)
	}
	return res, want, err
}

func mustAppend(t *testing.T, b disbackend.Backend, stream string, part int32, batch disbackend.Batch) stored {
	t.Helper()
	res, want, err := appendBatch(t, b, stream, part, batch)
	if err != nil {
		t.Fatalf("Append(%q, %d): %v", stream, part, err)
	}
	if res.Duplicate {
		t.Fatalf("Append(%q, %d): unexpected Duplicate", stream, part)
	}
	return stored{base: res.BaseOffset, raw: want}
}

func mustRange(t *testing.T, b disbackend.Backend, stream string, part int32) disbackend.PartitionRange {
	t.Helper()
	r, err := b.Range(stream, part)
	if err != nil {
		t.Fatalf("Range(%q, %d): %v", stream, part, err)
	}
	return r
}

func wantRange(t *testing.T, b disbackend.Backend, stream string, part int32, first, next int64) {
	t.Helper()
	if r := mustRange(t, b, stream, part); r.First != first || r.Next != next {
		t.Fatalf("Range(%q, %d) = [%d : %d], want [%d : %d]", stream, part, r.First, r.Next, first, next)
	}
}

func wantErr(t *testing.T, what string, err, sentinel error) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("%s: error %v, want %v", what, err, sentinel)
	}
}

// readAll reads the partition from offset to next in maxBytes steps and
// returns every batch in order.
func readAll(t *testing.T, b disbackend.Backend, stream string, part int32, offset int64, maxBytes int) [][]byte {
	t.Helper()
	var out [][]byte
	for {
		res, err := b.Read(ctxT(t), stream, part, offset, maxBytes)
		if err != nil {
			t.Fatalf("Read(%q, %d, %d): %v", stream, part, offset, err)
		}
		if len(res.Batches) == 0 {
			if offset != res.Range.Next {
				t.Fatalf("Read(%q, %d, %d): no batches below next %d", stream, part, offset, res.Range.Next)
			}
			return out
		}
		out = append(out, res.Batches...)
		offset = lastOffset(res.Batches[len(res.Batches)-1]) + 1
	}
}

// checkContiguous fails unless batches follow each other without gaps or
// overlaps, starting at first.
func checkContiguous(t *testing.T, batches [][]byte, first int64) int64 {
	t.Helper()
	next := first
	for i, raw := range batches {
		if got := batch.BaseOffset(raw); got != next {
			t.Fatalf("batch %d: base offset %d, want %d (gap or overlap)", i, got, next)
		}
		if !CheckCRC(raw) {
			t.Fatalf("batch %d at %d: CRC mismatch", i, next)
		}
		next = lastOffset(raw) + 1
	}
	return next
}

// wantBatches compares batches: by bytes, or for a RecordLevel backend by
// their records, want's records below the first one read left out.
func wantBatches(t *testing.T, b disbackend.Backend, what string, got [][]byte, want ...[]byte) {
	t.Helper()
	if optsOf(b).RecordLevel {
		g, w := flatten(t, got), flatten(t, want)
		if len(g) > 0 {
			for len(w) > 0 && w[0].Offset < g[0].Offset {
				w = w[1:]
			}
		}
		wantRecords(t, what, g, w)
		return
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d batches, want %d", what, len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("%s: batch %d differs (base %d, want base %d)", what, i,
				batch.BaseOffset(got[i]), batch.BaseOffset(want[i]))
		}
	}
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitTimeout):
		t.Fatalf("%s: not woken within %v", what, waitTimeout)
	}
}

func name(prefix string, i int) string { return fmt.Sprintf("%s-%d", prefix, i) }

// wantPrefix compares the first batches of got with want: by bytes, or for
// a RecordLevel backend the first records of got with want's records.
func wantPrefix(t *testing.T, b disbackend.Backend, what string, got [][]byte, want ...[]byte) {
	t.Helper()
	if !optsOf(b).RecordLevel {
		if len(got) < len(want) {
			t.Fatalf("%s: %d batches, want at least %d", what, len(got), len(want))
		}
		wantBatches(t, b, what, got[:len(want)], want...)
		return
	}
	g, w := flatten(t, got), flatten(t, want)
	if len(g) > len(w) {
		g = g[:len(w)]
	}
	wantRecords(t, what, g, w)
}

func wantRecords(t *testing.T, what string, got, want []Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d records, want %d", what, len(got), len(want))
	}
	for i := range want {
		if !got[i].Equal(want[i]) {
			t.Fatalf("%s: record %d = %s, want %s", what, i, got[i], want[i])
		}
	}
}

// sameBatchAt reports whether got is the batch want for a lookup of
// timestamp ts: the same bytes, or for a RecordLevel backend the same first
// record with a timestamp >= ts (what the caller decodes it for). Both nil
// is the same.
func sameBatchAt(t *testing.T, b disbackend.Backend, got, want []byte, ts int64) bool {
	t.Helper()
	if !optsOf(b).RecordLevel || got == nil || want == nil {
		return bytes.Equal(got, want)
	}
	first := func(raw []byte) (Record, bool) {
		for _, r := range flatten(t, [][]byte{raw}) {
			if r.Timestamp >= ts {
				return r, true
			}
		}
		return Record{}, false
	}
	g, gok := first(got)
	w, wok := first(want)
	return gok == wok && g.Equal(w)
}

func flatten(t *testing.T, batches [][]byte) []Record {
	t.Helper()
	var out []Record
	for i, raw := range batches {
		recs, err := DecodeRecords(raw)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		out = append(out, recs...)
	}
	return out
}
