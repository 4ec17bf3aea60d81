package localstore

import (
	"context"
	"errors"
	"testing"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/backendtest"
	"github.com/disgw/disgw/kafkawire/batch"
)

// TestActiveProducers: the idempotent producer states of a partition, by
// producer id, with the last sequence of each producer's last batch; the
// same after a restart (rebuilt from the stored batches); unknown streams
// and partitions are errors.
func TestActiveProducers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	if _, err := s.CreateStream(ctx, disbackend.StreamSpec{Name: "ap", TopicName: "ap", PartitionCount: 2,
		Config: disbackend.StreamConfig{Retention: disbackend.UnlimitedRetention}}); err != nil {
		t.Fatal(err)
	}
	idem := func(pid int64, epoch int16, seq int32, n int) disbackend.Batch {
		rs := make([]disbackend.Record, n)
		for i := range rs {
			rs[i] = disbackend.Record{OffsetDelta: int32(i), Timestamp: 1_700_000_000_000, Value: []byte{byte(i)}}
		}
		h := batch.NewHeader(0)
		h.ProducerID, h.ProducerEpoch, h.BaseSequence = pid, epoch, seq
		return backendtest.FromRaw(batch.Encode(h, rs))
	}
	for _, b := range []disbackend.Batch{idem(9, 1, 0, 3), idem(4, 0, 0, 2), idem(4, 0, 2, 4)} {
		if _, err := s.Append("ap", 0, b).Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	check := func(s *Store) {
		t.Helper()
		got, err := s.ActiveProducers(ctx, "ap", 0)
		if err != nil || len(got) != 2 {
			t.Fatalf("partition 0: %v %+v", err, got)
		}
		if got[0].ProducerID != 4 || got[0].Epoch != 0 || got[0].LastSequence != 5 || got[0].LastAppendMS <= 0 ||
			got[1].ProducerID != 9 || got[1].Epoch != 1 || got[1].LastSequence != 2 {
			t.Errorf("partition 0: %+v", got)
		}
		if got, err := s.ActiveProducers(ctx, "ap", 1); err != nil || got == nil || len(got) != 0 {
			t.Errorf("partition 1: %v %+v", err, got)
		}
		if _, err := s.ActiveProducers(ctx, "ap", 2); !errors.Is(err, disbackend.ErrPartitionNotFound) {
			t.Errorf("partition 2: %v", err)
		}
		if _, err := s.ActiveProducers(ctx, "nosuch", 0); !errors.Is(err, disbackend.ErrStreamNotFound) {
			t.Errorf("unknown stream: %v", err)
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ActiveProducers(ctx, "ap", 0); !errors.Is(err, disbackend.ErrClosed) {
		t.Errorf("closed: %v", err)
	}
	s = openT(t, dir, Options{})
	defer s.Close()
	check(s)
}
