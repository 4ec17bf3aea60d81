package gateway

import (
	"testing"
	"time"

	"github.com/disgw/disgw/disbackend"
)

// TestNextRefreshWait: the interval after a success; after failures
// (DIS.4305 among them) doubling from twice the interval, capped at
// maxRefreshBackoff, or at the interval when that is longer; no overflow.
func TestNextRefreshWait(t *testing.T) {
	for _, c := range []struct {
		interval time.Duration
		failures int
		want     time.Duration
	}{
		{5 * time.Second, 0, 5 * time.Second},
		{5 * time.Second, 1, 10 * time.Second},
		{5 * time.Second, 2, 20 * time.Second},
		{5 * time.Second, 4, 80 * time.Second},
		{5 * time.Second, 5, maxRefreshBackoff},
		{5 * time.Second, 1000, maxRefreshBackoff},
		{time.Millisecond, 3, 8 * time.Millisecond},
		{10 * time.Minute, 0, 10 * time.Minute},
		{10 * time.Minute, 3, 10 * time.Minute},
		{time.Duration(1) << 62, 2, time.Duration(1) << 62},
	} {
		if got := nextRefreshWait(c.interval, c.failures); got != c.want {
			t.Errorf("nextRefreshWait(%v, %d) = %v, want %v", c.interval, c.failures, got, c.want)
		}
	}
}

// TestTopicCacheSync: a refresh adds, drops and replaces what its listing
// says, except topics created or deleted on this node while the listing
// ran (the listing may predate them); removals leave no mark when no
// listing runs.
func TestTopicCacheSync(t *testing.T) {
	st := func(topic string, parts int32) disbackend.Stream {
		return disbackend.Stream{Name: topic, TopicName: topic, TopicID: [16]byte{byte(len(topic)), byte(parts)}, PartitionCount: parts}
	}
	tc := &topicCache{byName: map[string]*disbackend.Stream{}, byID: map[[16]byte]*disbackend.Stream{}, putGen: map[string]uint64{}}
	for _, s := range []disbackend.Stream{st("old", 1), st("gone", 1), st("scaled", 1)} {
		tc.put(&s)
	}
	since := tc.beginListing()
	local := st("local", 1) // created here during the listing
	tc.put(&local)
	tc.remove("old") // deleted here during the listing
	added, removed, resized := tc.sync([]disbackend.Stream{st("old", 1), st("scaled", 3), st("new", 2)}, since)
	tc.endListing()
	if len(added) != 1 || added[0].TopicName != "new" || len(removed) != 1 || removed[0] != "gone" ||
		len(resized) != 1 || resized[0].PartitionCount != 3 {
		t.Fatalf("added %v removed %v resized %v", added, removed, resized)
	}
	if tc.get("old") != nil || tc.get("local") == nil || tc.get("gone") != nil || tc.get("scaled").PartitionCount != 3 {
		t.Fatalf("cache after sync: %v", tc.all())
	}
	// The next listing settles it.
	since = tc.beginListing()
	_, removed, _ = tc.sync([]disbackend.Stream{st("scaled", 3), st("new", 2)}, since)
	tc.endListing()
	if len(removed) != 1 || removed[0] != "local" || len(tc.putGen) != 2 {
		t.Fatalf("removed %v; marks %v", removed, tc.putGen)
	}
	tc.remove("new")
	if _, ok := tc.putGen["new"]; ok {
		t.Error("a removal outside a listing left a mark")
	}
}
