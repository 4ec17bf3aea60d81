package assignor

// Regressions and properties a review added (a newcomer's tests, kept).

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

func randomGroup(r *rand.Rand, nMembers, nTopics int, same bool) ([]Member, map[string]int32) {
	parts := map[string]int32{}
	var all []string
	for i := range nTopics {
		name := fmt.Sprintf("t%03d", i)
		parts[name] = int32(r.IntN(40))
		all = append(all, name)
	}
	var members []Member
	for i := range nMembers {
		m := Member{ID: fmt.Sprintf("m%05d", r.IntN(100000)*100+i)}
		if r.IntN(3) == 0 {
			m.InstanceID = fmt.Sprintf("i%d", i)
		}
		if same {
			m.Topics = slices.Clone(all)
			r.Shuffle(len(m.Topics), func(a, b int) { m.Topics[a], m.Topics[b] = m.Topics[b], m.Topics[a] })
		} else {
			for _, tn := range all {
				if r.IntN(4) == 0 {
					m.Topics = append(m.Topics, tn)
				}
			}
		}
		if r.IntN(2) == 0 {
			m.Current = map[string][]int32{}
			for _, tn := range all {
				for p := range int32(45) {
					if r.IntN(8) == 0 {
						m.Current[tn] = append(m.Current[tn], p)
					}
				}
			}
		}
		members = append(members, m)
	}
	return members, parts
}

// Many members and topics, random subscriptions, stale and overlapping
// current assignments; the result must not depend on the members' order.
func TestRegressLargeRandomAndOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for iter := range 60 {
		same := iter%2 == 0
		members, parts := randomGroup(r, 5+r.IntN(80), 1+r.IntN(30), same)
		for _, a := range []Assignor{Uniform(), Range()} {
			got := a.Assign(members, parts)
			checkAssignment(t, got, members, parts)
			if a.Name() == "uniform" {
				checkBalanced(t, fmt.Sprintf("iter %d", iter), got, members, parts, same)
			}
			shuffled := slices.Clone(members)
			r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			if again := a.Assign(shuffled, parts); !reflect.DeepEqual(again, got) {
				t.Fatalf("iter %d %s: the result depends on the members' order", iter, a.Name())
			}
			if t.Failed() {
				t.Fatalf("iter %d %s", iter, a.Name())
			}
		}
	}
}

// Homogeneous stickiness: from a valid (disjoint) current assignment, the
// fewest partitions move that the quotas allow.
func TestRegressHomogeneousMinimalMoves(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for iter := range 300 {
		parts := map[string]int32{"a": int32(r.IntN(30)), "b": int32(r.IntN(30))}
		n := 1 + r.IntN(9)
		members := make([]Member, n)
		for i := range members {
			members[i] = Member{ID: fmt.Sprintf("m%d", i), Topics: []string{"a", "b"}, Current: map[string][]int32{}}
		}
		for _, tn := range []string{"a", "b"} {
			for p := range parts[tn] {
				if k := r.IntN(n + 2); k < n { // some left unowned
					members[k].Current[tn] = append(members[k].Current[tn], p)
				}
			}
		}
		got := Uniform().Assign(members, parts)
		total := int(parts["a"] + parts["b"])
		minQ, extra := total/n, total%n
		held := make([]int, n)
		for i, m := range members {
			held[i] = count(m.Current)
		}
		slices.SortFunc(held, func(x, y int) int { return y - x })
		want := 0
		for i, h := range held {
			q := minQ
			if i < extra {
				q++
			}
			want += max(0, h-q)
		}
		if moved := movedCount(members, got); moved != want {
			t.Fatalf("iter %d: %d moved, the fewest is %d", iter, moved, want)
		}
	}
}

// docs/consumer-protocol.md §5.2 (must match Kafka exactly): Java's
// String.compareTo orders UTF-16 code units, so an instance id with a
// character above U+FFFF (a surrogate, 0xD800..) sorts before one with
// U+E000..U+FFFF; Go's byte order puts it after.
func TestRegressRangeJavaOrder(t *testing.T) {
	parts := map[string]int32{"t": 2}
	members := []Member{{ID: "x", InstanceID: "\uFFFD", Topics: []string{"t"}}, {ID: "y", InstanceID: "\U00010000", Topics: []string{"t"}}}
	got := Range().Assign(members, parts)
	// Kafka: "\U00010000" (D800 DC00) < "\uFFFD" → y first, gets t/0.
	if !slices.Equal(got["y"]["t"], []int32{0}) {
		t.Fatalf("got %v; Kafka gives t/0 to y (instance id U+10000 sorts first in UTF-16)", got)
	}
}
