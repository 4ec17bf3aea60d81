package localstore

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/backendtest"
	"github.com/disgw/disgw/kafkawire/batch"
)

const recordBytes = 1024

// benchStore opens a store on disk (real fsyncs) or in memory.
func benchStore(b *testing.B, disk bool, opts Options) *Store {
	b.Helper()
	dir := "db"
	if disk {
		dir = b.TempDir()
	} else {
		opts.FS = vfs.NewMem()
	}
	opts.Logger = zap.NewNop()
	opts.RetentionCheckInterval = -1
	s, err := Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

func benchCreate(b *testing.B, s *Store, parts int32) {
	b.Helper()
	_, err := s.CreateStream(context.Background(), disbackend.StreamSpec{Name: "bench", TopicName: "bench", PartitionCount: parts,
		Config: disbackend.StreamConfig{Retention: disbackend.UnlimitedRetention}})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAppend measures synced append throughput: 4 producers, one per
// partition, each with up to 8 batches in flight (as a Kafka producer with
// max.in.flight 5 plus the gateway's queue), batches of 1 KiB records.
// Each op is one batch; every append is acknowledged only after its fsync.
func BenchmarkAppend(b *testing.B) {
	for _, disk := range []bool{true, false} {
		for _, size := range []struct {
			name    string
			records int32
		}{{"16KiB", 16}, {"1MiB", 1024}} {
			where := map[bool]string{true: "disk", false: "mem"}[disk]
			b.Run(fmt.Sprintf("%s/batch=%s", where, size.name), func(b *testing.B) {
				s := benchStore(b, disk, Options{})
				const producers, inflight = 4, 8
				benchCreate(b, s, producers)
				tmpl := backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: size.records, RecordBytes: recordBytes})
				b.SetBytes(int64(len(tmpl.Raw)))
				b.ReportAllocs()
				b.ResetTimer()
				var wg sync.WaitGroup
				for w := 0; w < producers; w++ {
					n := b.N / producers
					if w < b.N%producers {
						n++
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						q := make([]*disbackend.Pending, 0, inflight)
						for i := 0; i < n; i++ {
							batch := tmpl
							batch.Raw = append([]byte(nil), tmpl.Raw...) // the store owns Raw
							q = append(q, s.Append("bench", int32(w), batch))
							if len(q) == inflight {
								if _, err := q[0].Wait(context.Background()); err != nil {
									b.Error(err)
									return
								}
								q = append(q[:0], q[1:]...)
							}
						}
						for _, p := range q {
							if _, err := p.Wait(context.Background()); err != nil {
								b.Error(err)
							}
						}
					}()
				}
				wg.Wait()
			})
		}
	}
}

// BenchmarkRead measures sequential reads of 16 KiB batches of 1 KiB
// records with 1 MiB per read (franz-go's default fetch.max.partition.bytes),
// from the tail cache and, with the cache off, from the segment files. Each op is one
// Read.
func BenchmarkRead(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"cache", Options{CacheBytesPerPartition: 256 << 20, CacheBytes: 1 << 30}},
		{"segments", Options{CacheBytesPerPartition: -1}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := benchStore(b, true, tc.opts)
			benchCreate(b, s, 1)
			tmpl := backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 16, RecordBytes: recordBytes})
			const total = 64 << 20
			var pend []*disbackend.Pending
			for n := 0; n < total; n += len(tmpl.Raw) {
				batch := tmpl
				batch.Raw = append([]byte(nil), tmpl.Raw...)
				pend = append(pend, s.Append("bench", 0, batch))
			}
			for _, p := range pend {
				if _, err := p.Wait(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			ctx := context.Background()
			res, err := s.Read(ctx, "bench", 0, 0, 1<<20)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(res.Bytes))
			b.ReportAllocs()
			b.ResetTimer()
			var off int64
			for i := 0; i < b.N; i++ {
				res, err := s.Read(ctx, "bench", 0, off, 1<<20)
				if err != nil {
					b.Fatal(err)
				}
				if len(res.Batches) == 0 {
					off = 0
					continue
				}
				last := res.Batches[len(res.Batches)-1]
				off = batch.LastOffset(last) + 1
			}
		})
	}
}
