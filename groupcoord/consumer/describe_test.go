package consumer

import (
	"math"
	"slices"
	"testing"
)

func TestDescribe(t *testing.T) {
	topics := fakeTopics{"t": 4, "u": 1}
	g := NewGroup("g")
	cfg := DefaultConfig()
	if d := g.Describe(cfg, topics); d.State != "Empty" || len(d.Members) != 0 || d.AssignorName != "uniform" || d.AuthorizedOperations != math.MinInt32 {
		t.Fatalf("empty group: %+v", d)
	}
	inst := "i"
	a := &client{t: t, g: g, cfg: cfg, topics: topics, subs: []string{"t", "u"}, instance: &inst}
	a.mustHeartbeat()
	b := &client{t: t, g: g, cfg: cfg, topics: topics, subs: []string{"t"}}
	b.mustHeartbeat()
	a.owned = map[string][]int32{"t": {0, 1, 2, 3}, "u": {0}}
	a.mustHeartbeat() // a revoking two of t

	d := g.Describe(cfg, topics)
	if d.Group != "g" || d.State != "Reconciling" || d.Epoch != 3 || d.AssignmentEpoch != 3 || len(d.Members) != 2 {
		t.Fatalf("describe: %+v", d)
	}
	for _, m := range d.Members {
		if m.MemberType != MemberTypeConsumer || m.ClientHost != "/127.0.0.1" {
			t.Errorf("member %+v", m)
		}
		n, target := 0, 0
		for _, tp := range m.Assignment.TopicPartitions {
			n += len(tp.Partitions)
			if id, _ := topics.ID(tp.Topic); id != tp.TopicID || !slices.IsSorted(tp.Partitions) {
				t.Errorf("assignment topic %+v", tp)
			}
		}
		for _, tp := range m.TargetAssignment.TopicPartitions {
			target += len(tp.Partitions)
		}
		switch m.MemberID {
		case a.id:
			// Assigned plus pending revocation: all five; its target three.
			if n != 5 || target != 3 || m.InstanceID == nil || *m.InstanceID != "i" || !slices.Equal(m.SubscribedTopics, []string{"t", "u"}) {
				t.Errorf("a: %d owned, %d targeted: %+v", n, target, m)
			}
		case b.id:
			if n != 0 || target != 2 || m.InstanceID != nil {
				t.Errorf("b: %d owned, %d targeted: %+v", n, target, m)
			}
		default:
			t.Errorf("member %s", m.MemberID)
		}
	}
	// A topic deleted is left out of assignments.
	delete(topics, "u")
	for _, m := range g.Describe(cfg, topics).Members {
		for _, tp := range append(m.Assignment.TopicPartitions, m.TargetAssignment.TopicPartitions...) {
			if tp.Topic == "u" {
				t.Errorf("deleted topic described: %+v", tp)
			}
		}
	}
	if l := g.Listed(); l.Group != "g" || l.ProtocolType != "consumer" || l.GroupType != "consumer" || l.GroupState != "Reconciling" {
		t.Errorf("listed: %+v", l)
	}
}
