package gateway

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzCountRecords: countRecords reads client bytes (a Produce's records)
// and must never panic or count more records than there are header
// bytes to hold them.
func FuzzCountRecords(f *testing.F) {
	f.Add([]byte{})
	f.Add(make([]byte, 61))
	b := make([]byte, 70)
	b[11] = 58 // length: the rest
	b[16] = 2  // magic
	b[60] = 3  // 3 records
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		n := countRecords(b)
		if n != 0 && len(b) < 61 {
			t.Fatalf("%d records in %d bytes", n, len(b))
		}
	})
}

// TestFirstErrorCode: the request metric's error is the first non-zero
// code, top level first, then topics and partitions.
func TestFirstErrorCode(t *testing.T) {
	resp := kmsg.NewPtrProduceResponse()
	if got := errorNameOf(resp); got != "NONE" {
		t.Fatalf("no error: %q", got)
	}
	tp := kmsg.NewProduceResponseTopic()
	p0, p1 := kmsg.NewProduceResponseTopicPartition(), kmsg.NewProduceResponseTopicPartition()
	p1.ErrorCode = kerr.NotLeaderForPartition.Code
	tp.Partitions = []kmsg.ProduceResponseTopicPartition{p0, p1}
	resp.Topics = append(resp.Topics, tp)
	if got := errorNameOf(resp); got != "NOT_LEADER_FOR_PARTITION" {
		t.Fatalf("partition error: %q", got)
	}
	g := kmsg.NewPtrFindCoordinatorResponse()
	g.ErrorCode = kerr.CoordinatorNotAvailable.Code
	if got := errorNameOf(g); got != "COORDINATOR_NOT_AVAILABLE" {
		t.Fatalf("top-level error: %q", got)
	}
}

// TestFastErrorCodes: the Produce and Fetch paths without reflection find
// the same first code as the reflective walk, wherever it is.
func TestFastErrorCodes(t *testing.T) {
	codes := [][]int16{{0, 0}, {0, 6}, {3, 0}, {0, 0, 0, 1}}
	for _, cs := range codes {
		pr := kmsg.NewPtrProduceResponse()
		fr := kmsg.NewPtrFetchResponse()
		for i, c := range cs {
			if i%2 == 0 {
				pr.Topics = append(pr.Topics, kmsg.NewProduceResponseTopic())
				fr.Topics = append(fr.Topics, kmsg.NewFetchResponseTopic())
			}
			pp := kmsg.NewProduceResponseTopicPartition()
			pp.ErrorCode = c
			pt := &pr.Topics[len(pr.Topics)-1]
			pt.Partitions = append(pt.Partitions, pp)
			fp := kmsg.NewFetchResponseTopicPartition()
			fp.ErrorCode = c
			ft := &fr.Topics[len(fr.Topics)-1]
			ft.Partitions = append(ft.Partitions, fp)
		}
		if got, want := produceErrorCode(pr), firstErrorCode(reflect.ValueOf(pr), 0); got != want {
			t.Errorf("Produce %v: %d, reflection %d", cs, got, want)
		}
		if got, want := fetchErrorCode(fr), firstErrorCode(reflect.ValueOf(fr), 0); got != want {
			t.Errorf("Fetch %v: %d, reflection %d", cs, got, want)
		}
		fr.ErrorCode = kerr.UnknownServerError.Code
		if got, want := fetchErrorCode(fr), firstErrorCode(reflect.ValueOf(fr), 0); got != want || got != fr.ErrorCode {
			t.Errorf("Fetch %v with a top-level error: %d, reflection %d", cs, got, want)
		}
	}
}

// BenchmarkErrorNameOfFetch: the request metric's error name of a Fetch
// response of 100 partitions without errors, the hot path.
func BenchmarkErrorNameOfFetch(b *testing.B) {
	fr := kmsg.NewPtrFetchResponse()
	ft := kmsg.NewFetchResponseTopic()
	for range 100 {
		ft.Partitions = append(ft.Partitions, kmsg.NewFetchResponseTopicPartition())
	}
	fr.Topics = append(fr.Topics, ft)
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			_ = errorNameOf(fr)
		}
	})
	b.Run("reflection", func(b *testing.B) {
		for b.Loop() {
			_ = firstErrorCode(reflect.ValueOf(fr), 0)
		}
	})
}
