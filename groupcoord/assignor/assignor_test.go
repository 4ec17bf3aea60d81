package assignor

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// The expectations of range come from Kafka's RangeAssignorTest (broker
// side, org.apache.kafka.coordinator.group.assignor).
func TestRange(t *testing.T) {
	parts := map[string]int32{"t1": 3, "t2": 3, "t3": 2}
	for _, tc := range []struct {
		name    string
		members []Member
		want    Assignment
	}{
		{"no members", nil, Assignment{}},
		{"one member, two topics", []Member{{ID: "a", Topics: []string{"t1", "t3"}}},
			Assignment{"a": {"t1": {0, 1, 2}, "t3": {0, 1}}}},
		{"two members, co-partitioned", []Member{
			{ID: "b", Topics: []string{"t1", "t2"}}, {ID: "a", Topics: []string{"t2", "t1"}}},
			Assignment{"a": {"t1": {0, 1}, "t2": {0, 1}}, "b": {"t1": {2}, "t2": {2}}}},
		{"more members than partitions", []Member{
			{ID: "a", Topics: []string{"t3"}}, {ID: "b", Topics: []string{"t3"}}, {ID: "c", Topics: []string{"t3"}}},
			Assignment{"a": {"t3": {0}}, "b": {"t3": {1}}, "c": {}}},
		{"different subscriptions", []Member{
			{ID: "a", Topics: []string{"t1", "t2"}}, {ID: "b", Topics: []string{"t3"}}, {ID: "c", Topics: []string{"t2", "t3"}}},
			Assignment{"a": {"t1": {0, 1, 2}, "t2": {0, 1}}, "b": {"t3": {0}}, "c": {"t2": {2}, "t3": {1}}}},
		{"static members first, by instance id", []Member{
			{ID: "a", Topics: []string{"t1"}}, {ID: "b", InstanceID: "z", Topics: []string{"t1"}}, {ID: "c", InstanceID: "y", Topics: []string{"t1"}}},
			Assignment{"c": {"t1": {0}}, "b": {"t1": {1}}, "a": {"t1": {2}}}},
		{"a topic that does not exist", []Member{{ID: "a", Topics: []string{"gone", "t3"}}},
			Assignment{"a": {"t3": {0, 1}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Range().Assign(tc.members, parts)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestByName(t *testing.T) {
	for _, n := range []string{"uniform", "range"} {
		if a, ok := ByName(n); !ok || a.Name() != n {
			t.Errorf("ByName(%q) = %v, %v", n, a, ok)
		}
	}
	if _, ok := ByName("sticky"); ok {
		t.Error(`ByName("sticky"): want not ok (UNSUPPORTED_ASSIGNOR)`)
	}
}

func TestUniformHomogeneous(t *testing.T) {
	parts := map[string]int32{"t1": 4, "t2": 3}
	sub := []string{"t1", "t2"}
	got := Uniform().Assign([]Member{{ID: "a", Topics: sub}, {ID: "b", Topics: sub}}, parts)
	checkAssignment(t, got, []Member{{ID: "a", Topics: sub}, {ID: "b", Topics: sub}}, parts)
	if n := count(got["a"]) + count(got["b"]); n != 7 || absDiff(count(got["a"]), count(got["b"])) > 1 {
		t.Fatalf("got %v: want 7 partitions split 4/3", got)
	}

	// A third member joins: it takes two partitions, one from each, and
	// the others keep the rest of theirs.
	members := []Member{{ID: "a", Topics: sub, Current: got["a"]}, {ID: "b", Topics: sub, Current: got["b"]}, {ID: "c", Topics: sub}}
	next := Uniform().Assign(members, parts)
	checkAssignment(t, next, members, parts)
	if moved := movedCount(members, next); moved != 2 {
		t.Fatalf("a member joined: %d partitions moved, want 2 (from %v to %v)", moved, got, next)
	}

	// b leaves: a and c keep theirs and share b's.
	members = []Member{{ID: "a", Topics: sub, Current: next["a"]}, {ID: "c", Topics: sub, Current: next["c"]}}
	after := Uniform().Assign(members, parts)
	checkAssignment(t, after, members, parts)
	if moved := movedCount(members, after); moved != 0 {
		t.Fatalf("a member left: %d of the others' partitions moved, want 0 (from %v to %v)", moved, next, after)
	}
}

func TestUniformHeterogeneous(t *testing.T) {
	parts := map[string]int32{"t1": 3, "t2": 3}
	members := []Member{{ID: "a", Topics: []string{"t1"}}, {ID: "b", Topics: []string{"t1", "t2"}}}
	got := Uniform().Assign(members, parts)
	checkAssignment(t, got, members, parts)
	want := Assignment{"a": {"t1": {0, 1, 2}}, "b": {"t2": {0, 1, 2}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}

	// b held everything: balance moves t1 to a, b keeps t2.
	members[1].Current = map[string][]int32{"t1": {0, 1, 2}, "t2": {0, 1, 2}}
	got = Uniform().Assign(members, parts)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("from b holding all: got %v, want %v", got, want)
	}
}

// TestUniformRandom checks, over random groups, what uniform promises:
// every partition of a subscribed, existing topic assigned once, to a
// member subscribed to it; counts within one of each other when the
// subscriptions are the same, and no move left that would balance them
// otherwise; and an assignment given back as the current one is kept
// (stickiness at rest).
func TestUniformRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := range 500 {
		parts := map[string]int32{}
		var all []string
		for i := range 1 + r.IntN(5) {
			name := fmt.Sprintf("t%d", i)
			parts[name] = int32(r.IntN(12))
			all = append(all, name)
		}
		same := r.IntN(2) == 0
		var members []Member
		for i := range 1 + r.IntN(7) {
			m := Member{ID: fmt.Sprintf("m%d", r.IntN(1000)*10+i)}
			if same {
				m.Topics = all
			} else {
				for _, tn := range all {
					if r.IntN(2) == 0 {
						m.Topics = append(m.Topics, tn)
					}
				}
				if r.IntN(4) == 0 {
					m.Topics = append(m.Topics, "gone")
				}
			}
			if r.IntN(2) == 0 { // a current assignment, possibly stale or overlapping
				m.Current = map[string][]int32{}
				for _, tn := range append(slices.Clone(all), "gone") {
					for p := range int32(14) {
						if r.IntN(4) == 0 {
							m.Current[tn] = append(m.Current[tn], p)
						}
					}
				}
			}
			members = append(members, m)
		}
		got := Uniform().Assign(members, parts)
		name := fmt.Sprintf("iteration %d (same subscriptions: %v)", iter, same)
		checkAssignment(t, got, members, parts)
		checkBalanced(t, name, got, members, parts, same)
		again := slices.Clone(members)
		for i := range again {
			again[i].Current = got[again[i].ID]
		}
		if next := Uniform().Assign(again, parts); !reflect.DeepEqual(next, got) {
			t.Fatalf("%s: the assignment given back moved: %v then %v", name, got, next)
		}
		if t.Failed() {
			t.Fatalf("%s: members %+v, partitions %v: got %v", name, members, parts, got)
		}
	}
}

func TestRangeRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		parts := map[string]int32{"a": int32(r.IntN(10)), "b": int32(r.IntN(10))}
		var members []Member
		for i := range 1 + r.IntN(6) {
			m := Member{ID: fmt.Sprintf("m%d", i)}
			for _, tn := range []string{"a", "b"} {
				if r.IntN(3) > 0 {
					m.Topics = append(m.Topics, tn)
				}
			}
			members = append(members, m)
		}
		got := Range().Assign(members, parts)
		checkAssignment(t, got, members, parts)
		if t.Failed() {
			t.Fatalf("members %+v, partitions %v: got %v", members, parts, got)
		}
	}
}

// checkAssignment fails t unless every partition of a topic some member
// subscribes to is assigned exactly once, to a subscriber, and every
// member has an entry.
func checkAssignment(t *testing.T, got Assignment, members []Member, parts map[string]int32) {
	t.Helper()
	if len(got) != len(members) {
		t.Errorf("%d members in the assignment, want %d", len(got), len(members))
	}
	owner := map[tp]string{}
	for _, m := range members {
		a, ok := got[m.ID]
		if !ok {
			t.Errorf("member %s missing", m.ID)
			continue
		}
		for topic, ps := range a {
			if !slices.Contains(m.Topics, topic) || parts[topic] == 0 {
				t.Errorf("member %s got %s, which it does not subscribe to (or does not exist)", m.ID, topic)
			}
			if !slices.IsSorted(ps) || len(ps) == 0 {
				t.Errorf("member %s: %s partitions %v: want sorted, not empty", m.ID, topic, ps)
			}
			for _, p := range ps {
				if p < 0 || p >= parts[topic] {
					t.Errorf("member %s got %s/%d, which does not exist", m.ID, topic, p)
				}
				if o, dup := owner[tp{topic, p}]; dup {
					t.Errorf("%s/%d given to %s and %s", topic, p, o, m.ID)
				}
				owner[tp{topic, p}] = m.ID
			}
		}
	}
	for topic, n := range parts {
		subscribed := slices.ContainsFunc(members, func(m Member) bool { return slices.Contains(m.Topics, topic) })
		for p := range n {
			if _, ok := owner[tp{topic, p}]; subscribed && !ok {
				t.Errorf("%s/%d not assigned", topic, p)
			}
		}
	}
}

// checkBalanced: with the same subscriptions, counts within one; with
// different ones, no member holds a partition that a member holding two
// fewer subscribes to.
func checkBalanced(t *testing.T, name string, got Assignment, members []Member, parts map[string]int32, same bool) {
	t.Helper()
	counts := map[string]int{}
	for id, a := range got {
		counts[id] = count(a)
	}
	if same {
		lo, hi := slices.Min(slices.Collect(maps.Values(counts))), slices.Max(slices.Collect(maps.Values(counts)))
		if hi-lo > 1 {
			t.Errorf("%s: counts %v differ by more than one", name, counts)
		}
		return
	}
	for _, from := range members {
		for _, to := range members {
			if counts[from.ID]-counts[to.ID] < 2 {
				continue
			}
			for topic := range got[from.ID] {
				if slices.Contains(to.Topics, topic) {
					t.Errorf("%s: %s holds %d with %s, %s holds %d and subscribes to it", name, from.ID, counts[from.ID], topic, to.ID, counts[to.ID])
				}
			}
		}
	}
}

func count(a map[string][]int32) int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

func absDiff(a, b int) int {
	if a > b {
		return a - b
	}
	return b - a
}

// movedCount is how many partitions members held (Current) that the new
// assignment gives someone else.
func movedCount(members []Member, next Assignment) int {
	n := 0
	for _, m := range members {
		for topic, ps := range m.Current {
			for _, p := range ps {
				if !slices.Contains(next[m.ID][topic], p) {
					n++
				}
			}
		}
	}
	return n
}
