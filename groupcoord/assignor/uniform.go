package assignor

import (
	"cmp"
	"maps"
	"slices"
)

type uniform struct{}

func (uniform) Name() string { return "uniform" }

// Assign gives each member its current partitions where balance allows,
// then the partitions no one keeps; see Uniform.
func (uniform) Assign(members []Member, partitions map[string]int32) Assignment {
	checkIDs(members)
	if len(members) == 0 {
		return Assignment{}
	}
	topics, homogeneous := subscribed(members, partitions)
	st := newSticky(members, partitions)
	if homogeneous {
		st.quotas(topics)
	} else {
		st.fill(topics)
		st.balance()
	}
	return st.result()
}

// sticky is the state of one uniform assignment: members in member id
// order, what each holds, and who holds each partition.
type sticky struct {
	members    []Member
	subs       []map[string]bool // by member index: the existing topics it subscribes to
	partitions map[string]int32
	held       [][]tp           // by member index
	owner      map[tp]int       // member index
	subsOf     map[string][]int // topic → subscribed member indexes, ascending
}

// newSticky orders the members by id and gives each the partitions of its
// current assignment that it still may hold (its subscription, an
// existing partition, not kept by a member before it).
func newSticky(members []Member, partitions map[string]int32) *sticky {
	order := slices.Clone(members)
	slices.SortFunc(order, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	st := &sticky{members: order, partitions: partitions, held: make([][]tp, len(order)),
		owner: map[tp]int{}, subs: make([]map[string]bool, len(order)), subsOf: map[string][]int{}}
	for i, m := range order {
		st.subs[i] = map[string]bool{}
		for _, t := range existing(m.Topics, partitions) {
			st.subs[i][t] = true
			st.subsOf[t] = append(st.subsOf[t], i)
		}
	}
	for i, m := range order {
		for _, t := range slices.Sorted(maps.Keys(m.Current)) {
			if !st.subs[i][t] {
				continue // unsubscribed, or the topic is gone
			}
			for _, p := range m.Current[t] {
				k := tp{t, p}
				if _, taken := st.owner[k]; taken || p < 0 || p >= partitions[t] {
					continue
				}
				st.give(i, k)
			}
		}
		slices.SortFunc(st.held[i], compareTP)
	}
	return st
}

func (st *sticky) give(i int, k tp) {
	st.owner[k] = i
	st.held[i] = append(st.held[i], k)
}

// unowned returns the partitions of topics that no member holds, in topic
// and partition order.
func (st *sticky) unowned(topics []string) []tp {
	var out []tp
	for _, t := range topics {
		for p := int32(0); p < st.partitions[t]; p++ {
			if _, ok := st.owner[tp{t, p}]; !ok {
				out = append(out, tp{t, p})
			}
		}
	}
	return out
}

// quotas is UniformHomogeneousAssignmentBuilder's algorithm, for members
// that all subscribe to the same topics: each member may keep up to its
// quota (total/members, one more for total%members of them: those holding
// the most now, so that fewer partitions move; Kafka takes the first in
// its iteration order), the partitions over it are revoked, and the
// unowned ones fill the members under their quota in member id order.
func (st *sticky) quotas(topics []string) {
	total := 0
	for _, t := range topics {
		total += int(st.partitions[t])
	}
	n := len(st.members)
	minQuota, extra := total/n, total%n
	byHeld := make([]int, n)
	for i := range byHeld {
		byHeld[i] = i
	}
	slices.SortStableFunc(byHeld, func(a, b int) int { return cmp.Compare(len(st.held[b]), len(st.held[a])) })
	quota := make([]int, n)
	for rank, i := range byHeld {
		quota[i] = minQuota
		if rank < extra {
			quota[i]++
		}
	}
	for i := range st.members {
		if len(st.held[i]) > quota[i] {
			for _, k := range st.held[i][quota[i]:] {
				delete(st.owner, k) // revoked: unowned below
			}
			st.held[i] = st.held[i][:quota[i]]
		}
	}
	free := st.unowned(topics)
	next := 0
	for i := range st.members {
		for len(st.held[i]) < quota[i] && next < len(free) {
			st.give(i, free[next])
			next++
		}
	}
}

// fill gives each unowned partition to the member subscribed to its topic
// that holds the fewest partitions (the first in member id order on a
// tie).
func (st *sticky) fill(topics []string) {
	for _, k := range st.unowned(topics) {
		best := -1
		for _, i := range st.subsOf[k.topic] {
			if best < 0 || len(st.held[i]) < len(st.held[best]) {
				best = i
			}
		}
		if best >= 0 {
			st.give(best, k)
		}
	}
}

// balance moves one partition at a time from a member to one subscribed
// to its topic that holds at least two fewer, the most loaded member's
// last partition to the least loaded such member first, until no such move
// is left. Each move lowers the sum of the squares of the members' counts,
// so it ends.
func (st *sticky) balance() {
	n := len(st.members)
	byLoad := make([]int, n)
	for {
		for i := range byLoad {
			byLoad[i] = i
		}
		slices.SortStableFunc(byLoad, func(a, b int) int { return cmp.Compare(len(st.held[b]), len(st.held[a])) })
		if !st.moveOne(byLoad) {
			return
		}
	}
}

// moveOne makes the first move balance looks for among members in byLoad
// order (most loaded first); false when there is none.
func (st *sticky) moveOne(byLoad []int) bool {
	for _, from := range byLoad {
		held := st.held[from]
		for j := len(held) - 1; j >= 0; j-- {
			k := held[j]
			to := -1
			for _, i := range st.subsOf[k.topic] {
				if len(st.held[i]) <= len(held)-2 && (to < 0 || len(st.held[i]) < len(st.held[to])) {
					to = i
				}
			}
			if to < 0 {
				continue
			}
			st.held[from] = slices.Delete(held, j, j+1)
			st.give(to, k)
			return true
		}
	}
	return false
}

// result is the assignment st came to, by member id, partitions sorted.
func (st *sticky) result() Assignment {
	out := newAssignment(st.members)
	for i, m := range st.members {
		for _, k := range st.held[i] {
			out[m.ID][k.topic] = append(out[m.ID][k.topic], k.part)
		}
		for _, ps := range out[m.ID] {
			slices.Sort(ps)
		}
	}
	return out
}
