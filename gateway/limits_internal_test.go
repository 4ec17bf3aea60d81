package gateway

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestLimitLogThrottled: a limit hit logs at once, then at most once per
// limitLogEvery per kind, with the hits it did not log.
func TestLimitLogThrottled(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	l := newLimiter(DefaultRequestLimits(), zap.New(core))
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	for range 5 {
		l.hit(limitTopics, "Metadata", 3, nil)
	}
	l.hit(limitGroups, "DescribeGroups", 1, nil) // another kind logs on its own
	if n := logs.Len(); n != 2 {
		t.Fatalf("%d log lines after 5 topic hits and 1 group hit within 10s, want 2", n)
	}
	now = now.Add(limitLogEvery)
	l.hit(limitTopics, "Metadata", 7, nil)
	all := logs.All()
	if len(all) != 3 {
		t.Fatalf("%d log lines, want 3", len(all))
	}
	f := all[2].ContextMap()
	if all[2].Message != "request limit hit" || f["limit"] != "max_request_topics" || f["refused"] != int64(7) || f["unlogged_hits"] != int64(4) {
		t.Errorf("third line %q %v", all[2].Message, f)
	}
}
