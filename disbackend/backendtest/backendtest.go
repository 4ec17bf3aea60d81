// Package backendtest is the conformance suite every disbackend.Backend
// passes: Run checks behaviour through the interface alone (streams, the
// log, idempotent producers, apps and checkpoints), RunDurable adds what needs a restart, a crash
// or a clock (restart, crash recovery, retention) through a Harness.
//
// It depends on no implementation; localstore runs it on Pebble, and disrest
// will run it against dislocal.
package backendtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/disgw/disgw/disbackend"
)

// waitTimeout bounds every wait on a Pending or a channel in the suite.
const waitTimeout = 30 * time.Second

// Run runs one subtest per behaviour of disbackend.Backend. newBackend must
// return a new, empty, open backend on the real clock each call; Run closes
// each one at the end of its subtest (a Close error after the subtest
// already closed it is ignored). Subtests run in parallel.
func Run(t *testing.T, newBackend func(t *testing.T) disbackend.Backend) {
	open := func(t *testing.T) disbackend.Backend {
		t.Helper()
		b := newBackend(t)
		t.Cleanup(func() { _ = b.Close() })
		return b
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, b disbackend.Backend)
	}{
		{"CreateDescribeList", testCreateDescribeList},
		{"CreateErrors", testCreateErrors},
		{"NameCollision", testNameCollision},
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
		{"Close", testClose},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
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
func appendBatch(t *testing.T, b disbackend.Backend, stream string, part int32, batch disbackend.Batch) (disbackend.AppendResult, error, []byte) {
	t.Helper()
	want := bytes.Clone(batch.Raw)
	res, err := b.Append(stream, part, batch).Wait(ctxT(t))
	if err == nil {
		disbackend.SetBaseOffset(want, res.BaseOffset)
	}
	return res, err, want
}

func mustAppend(t *testing.T, b disbackend.Backend, stream string, part int32, batch disbackend.Batch) stored {
	t.Helper()
	res, err, want := appendBatch(t, b, stream, part, batch)
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
		if got := disbackend.BaseOffset(raw); got != next {
			t.Fatalf("batch %d: base offset %d, want %d (gap or overlap)", i, got, next)
		}
		if !CheckCRC(raw) {
			t.Fatalf("batch %d at %d: CRC mismatch", i, next)
		}
		next = lastOffset(raw) + 1
	}
	return next
}

func wantBatches(t *testing.T, what string, got [][]byte, want ...[]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d batches, want %d", what, len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("%s: batch %d differs (base %d, want base %d)", what, i,
				disbackend.BaseOffset(got[i]), disbackend.BaseOffset(want[i]))
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

func seedOf(t *testing.T, i int) uint64 {
	return uint64(len(t.Name()))<<32 | uint64(i)
}

func name(prefix string, i int) string { return fmt.Sprintf("%s-%d", prefix, i) }
