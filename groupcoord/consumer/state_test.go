package consumer

import (
	"reflect"
	"slices"
	"testing"
)

// TestStateRoundTrip saves a group in the middle of a rebalance (a member
// revoking, one waiting, a static member) and loads it: the same group,
// the derived indexes rebuilt, and heartbeats go on from there.
func TestStateRoundTrip(t *testing.T) {
	topics := fakeTopics{"t": 4}
	g := NewGroup("g")
	cfg := DefaultConfig()
	inst := "static-1"
	a := &client{t: t, g: g, cfg: cfg, topics: topics, subs: []string{"t"}, instance: &inst}
	a.mustHeartbeat()
	b := &client{t: t, g: g, cfg: cfg, topics: topics, subs: []string{"t"}}
	b.mustHeartbeat()
	a.owned = map[string][]int32{"t": {0, 1, 2, 3}}
	a.mustHeartbeat() // revoking two

	data, err := g.MarshalState()
	if err != nil {
		t.Fatal(err)
	}
	if !IsConsumerGroupState(data) || IsConsumerGroupState([]byte(`{"generation":3,"members":[]}`)) {
		t.Fatal("IsConsumerGroupState")
	}
	loaded, err := LoadGroup(data)
	if err != nil {
		t.Fatal(err)
	}
	g.topicMeta = nil     // what the last heartbeat read of the topics: not saved
	g.hashEpoch = g.Epoch // not saved: taken as the group epoch at load
	if !reflect.DeepEqual(loaded, g) {
		t.Fatalf("loaded\n %+v\nwant\n %+v", loaded, g)
	}
	timers := loaded.Loaded()
	if len(timers.Session) != 2 || len(timers.Rebalance) != 1 || timers.Rebalance[0].MemberID != a.id {
		t.Fatalf("timers after load: %+v", timers)
	}
	a.g, b.g = loaded, loaded
	a.owned = map[string][]int32{"t": a.owned["t"]}
	settle(t, loaded, 5, a, b)
	checkOwnership(t, topics, a, b)
}

func TestLoadGroupRefuses(t *testing.T) {
	for _, data := range []string{
		``, `[]`, `{"type":"classic","version":1}`, `{"type":"consumer","version":2}`,
		`{"type":"consumer","version":1,"members":[{"id":"a"},{"id":"a"}]}`,
		`{"type":"consumer","version":1,"members":[{"id":"a","instance_id":"i"},{"id":"b","instance_id":"i"}]}`,
		`{"type":"consumer","version":1,"members":[{"id":"a","assigned":{"t":{"-1":1}}}]}`,
		`{"type":"consumer","version":1,"members":[{"id":"a"}],"target":{"a":{"t":[-1]}}}`,
	} {
		if _, err := LoadGroup([]byte(data)); err == nil {
			t.Errorf("%s: loaded", data)
		}
	}
	g, err := LoadGroup([]byte(`{"type":"consumer","version":1,"id":"g","members":[{"id":"a","state":42,"topics":["t","t"]}]}`))
	if err != nil || g.Members["a"].State != Unknown || !slices.Equal(g.Members["a"].Topics, []string{"t"}) {
		t.Fatalf("a future state: %v %+v", err, g)
	}
}

// FuzzLoadGroup: no input makes LoadGroup panic, and what it loads saves
// and loads back the same.
func FuzzLoadGroup(f *testing.F) {
	g := NewGroup("g")
	cfg := DefaultConfig()
	c := &client{t: &testing.T{}, g: g, cfg: cfg, topics: fakeTopics{"t": 3}, subs: []string{"t"}}
	if _, _, err := c.heartbeat(); err != nil {
		f.Fatal(err)
	}
	data, err := g.MarshalState()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte(`{"type":"consumer","version":1,"members":[{"id":"a","state":1,"pending_revocation":{"t":{"0":2}}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := LoadGroup(data)
		if err != nil {
			return
		}
		again, err := g.MarshalState()
		if err != nil {
			t.Fatal(err)
		}
		g2, err := LoadGroup(again)
		if err != nil {
			t.Fatalf("saved state does not load: %v", err)
		}
		if !reflect.DeepEqual(g, g2) {
			t.Fatalf("round trip changed the group:\n %+v\n %+v", g, g2)
		}
	})
}
