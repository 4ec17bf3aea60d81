package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/localstore"
)

// recordingBackend is a localstore that says it stores records
// (disbackend.RecordLog) when stores is set, and keeps what Append got.
type recordingBackend struct {
	*localstore.Store
	stores bool
	mu     sync.Mutex
	got    []disbackend.Batch
}

func (b *recordingBackend) StoresRecords() bool { return b.stores }

func (b *recordingBackend) Append(stream string, part int32, bt disbackend.Batch) *disbackend.Pending {
	b.mu.Lock()
	b.got = append(b.got, bt)
	b.mu.Unlock()
	return b.Store.Append(stream, part, bt)
}

// value is compressible: kgo sends a batch uncompressed when compression
// would not make it smaller.
func value(i int) []byte { return bytes.Repeat([]byte(fmt.Sprint("value ", i, " ")), 50) }

// TestProduceHandsRecordsToRecordLog: the gateway decodes a produced batch
// once, while validating it, and hands the records to a backend that
// stores records (DIS); a backend that stores batches gets none.
func TestProduceHandsRecordsToRecordLog(t *testing.T) {
	for _, stores := range []bool{true, false} {
		t.Run(fmt.Sprintf("stores_records=%v", stores), func(t *testing.T) {
			var b *recordingBackend
			g := startGatewayWrapped(t, t.TempDir(), func(s *localstore.Store) disbackend.Backend {
				b = &recordingBackend{Store: s, stores: stores}
				return b
			})
			cl, err := kgo.NewClient(kgo.SeedBrokers(g.addr), kgo.AllowAutoTopicCreation(),
				kgo.ProducerBatchCompression(kgo.GzipCompression()), kgo.ProducerLinger(0))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			for i := range 3 {
				rec := &kgo.Record{Topic: "decoded", Key: []byte(fmt.Sprint("k", i)), Value: value(i),
					Headers: []kgo.RecordHeader{{Key: "h", Value: []byte{byte(i)}}}}
				if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			b.mu.Lock()
			defer b.mu.Unlock()
			if len(b.got) != 3 {
				t.Fatalf("%d appends, want 3", len(b.got))
			}
			for i, bt := range b.got {
				if bt.NumRecords != 1 || bt.ProducerID < 0 || bt.BaseSequence != int32(i) || bt.Codec() == 0 {
					t.Fatalf("append %d: header %+v", i, bt.Header)
				}
				if !stores {
					if bt.Records != nil {
						t.Fatalf("append %d: %d records handed to a backend that stores batches", i, len(bt.Records))
					}
					continue
				}
				if len(bt.Records) != 1 {
					t.Fatalf("append %d: %d records, want 1", i, len(bt.Records))
				}
				r := bt.Records[0]
				if string(r.Key) != fmt.Sprint("k", i) || !bytes.Equal(r.Value, value(i)) ||
					len(r.Headers) != 1 || r.Headers[0].Key != "h" || r.Headers[0].Value[0] != byte(i) || r.Timestamp <= 0 {
					t.Fatalf("append %d: record %+v", i, r)
				}
			}
		})
	}
}
