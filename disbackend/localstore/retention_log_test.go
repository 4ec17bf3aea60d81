package localstore

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/backendtest"
)

// TestRetentionLogsWhatItDeleted: a retention pass that deletes data logs
// one info line with the streams, partitions, records, segments and bytes
// it deleted; a pass that deletes nothing logs nothing.
func TestRetentionLogsWhatItDeleted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	core, logs := observer.New(zapcore.InfoLevel)
	opts := Options{FS: vfs.NewMem(), Now: clock, SegmentBytes: 2048, CacheBytesPerPartition: -1, Logger: zap.New(core)}
	s := openT(t, "db", opts)
	defer func() { _ = s.Close() }()
	for _, name := range []string{"kept", "expiring"} {
		retention := time.Hour
		if name == "kept" {
			retention = 48 * time.Hour
		}
		if _, err := s.CreateStream(ctx, disbackend.StreamSpec{Name: name, TopicName: name, PartitionCount: 2,
			Config: disbackend.StreamConfig{Retention: retention}}); err != nil {
			t.Fatal(err)
		}
	}
	appendN := func(stream string, n int) {
		for i := range n {
			b := backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 2, RecordBytes: 300, Seed: uint64(i)})
			if _, err := s.Append(stream, int32(i%2), b).Wait(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	lines := func() []observer.LoggedEntry { return logs.FilterMessage("retention deleted data").All() }

	appendN("expiring", 20) // 10 batches of 2 records a partition, ~700 bytes a frame
	appendN("kept", 4)
	if err := s.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	if l := lines(); len(l) != 0 {
		t.Fatalf("a pass that deleted nothing logged %v", l)
	}

	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	appendN("expiring", 4) // after the cutoff: kept, and a new active segment
	if err := s.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	l := lines()
	if len(l) != 1 {
		t.Fatalf("%d retention lines after a pass that deleted data, want 1: %v", len(l), l)
	}
	e := l[0]
	f := e.ContextMap()
	streams, _ := f["streams"].([]any)
	if e.Level != zapcore.InfoLevel || len(streams) != 1 || streams[0] != "expiring" ||
		f["partitions"] != int64(2) || f["records"] != int64(40) {
		t.Errorf("retention line %s %v, want info, streams [expiring], partitions 2, records 40", e.Level, f)
	}
	if segs, _ := f["segments"].(int64); segs < 1 {
		t.Errorf("retention line: segments %v, want at least 1", f["segments"])
	}
	if b, _ := f["bytes"].(int64); b < 2048 {
		t.Errorf("retention line: bytes %v, want at least a segment's 2048", f["bytes"])
	}

	// Nothing more to delete: no line.
	if err := s.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	if l := lines(); len(l) != 1 {
		t.Fatalf("a second pass that deleted nothing logged: %v", l[1:])
	}
}
