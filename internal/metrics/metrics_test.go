package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestTopicCapFoldsIntoOther: beyond MaxTopics distinct topics, records
// are counted under "__other", so the series stay bounded.
func TestTopicCapFoldsIntoOther(t *testing.T) {
	m := New(Options{MaxTopics: 2})
	for _, topic := range []string{"a", "b", "c", "d", "a"} {
		m.In(topic, 0, 1, 10)
	}
	if got := testutil.CollectAndCount(m.recordsIn); got != 3 {
		t.Fatalf("%d series of disgw_records_in_total, want 3 (a, b, __other)", got)
	}
	want := `
# HELP disgw_records_in_total Records appended through Produce, by topic.
# TYPE disgw_records_in_total counter
disgw_records_in_total{topic="__other"} 2
disgw_records_in_total{topic="a"} 2
disgw_records_in_total{topic="b"} 1
`
	if err := testutil.CollectAndCompare(m.recordsIn, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	if tr := m.Traffic(); len(tr) != 2 || tr[PartitionKey{"a", 0}].RecordsIn != 2 {
		t.Fatalf("per-partition traffic %v: want only the capped topics", tr)
	}
}

// TestNilMetricsIsNoop: code paths without metrics call a nil *Metrics.
func TestNilMetricsIsNoop(t *testing.T) {
	var m *Metrics
	m.In("t", 0, 1, 1)
	m.Out("t", 0, 1, 1)
	m.Request("Produce", 9, "NONE", 0)
	m.ConnOpened()
	m.ConnClosed()
	m.Rebalance()
	m.BackendCall("PutRecords", "OK", 0)
	m.PutRecords(1, 1)
	m.Throttled(1)
	if m.Topic("x") != "x" || len(m.Traffic()) != 0 {
		t.Fatal("nil metrics changed a value")
	}
}

// TestRegistriesIndependent: two servers in one process have their own
// registries (no duplicate-registration panic).
func TestRegistriesIndependent(t *testing.T) {
	a, b := New(Options{}), New(Options{})
	a.Rebalance()
	if testutil.ToFloat64(a.rebalances) != 1 || testutil.ToFloat64(b.rebalances) != 0 {
		t.Fatal("registries share counters")
	}
}
