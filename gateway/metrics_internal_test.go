package gateway

import (
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
