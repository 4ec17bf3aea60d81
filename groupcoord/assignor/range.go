package assignor

import (
	"cmp"
	"slices"
	"unicode/utf16"
)

type rangeAssignor struct{}

func (rangeAssignor) Name() string { return "range" }

// Assign follows RangeAssignor.assignHeterogeneousGroup, which gives the
// same result as its homogeneous variant when the subscriptions are the
// same: members in the order of sortMemberIds; for each member, for each
// topic it subscribes to, the topic's next range, of count/subscribers
// partitions, one more while count%subscribers lasts.
func (rangeAssignor) Assign(members []Member, partitions map[string]int32) Assignment {
	checkIDs(members)
	out := newAssignment(members)
	order := slices.Clone(members)
	slices.SortFunc(order, func(a, b Member) int {
		switch {
		case a.InstanceID != "" && b.InstanceID != "":
			return compareJava(a.InstanceID, b.InstanceID)
		case a.InstanceID != "":
			return -1
		case b.InstanceID != "":
			return 1
		}
		return compareJava(a.ID, b.ID)
	})
	type topicRange struct {
		count, subscribers int32
		extra, next        int32
		quota              int32 // -1 until the first member takes a range
	}
	topics := map[string]*topicRange{}
	subs := make([][]string, len(order))
	for i, m := range order {
		subs[i] = existing(m.Topics, partitions)
		for _, t := range subs[i] {
			r := topics[t]
			if r == nil {
				r = &topicRange{count: partitions[t], quota: -1}
				topics[t] = r
			}
			r.subscribers++
		}
	}
	for i, m := range order {
		for _, t := range subs[i] {
			r := topics[t]
			if r.quota < 0 {
				r.quota, r.extra = r.count/r.subscribers, r.count%r.subscribers
			}
			n := r.quota
			if r.extra > 0 {
				n++
				r.extra--
			}
			start, end := r.next, min(r.next+n, r.count)
			r.next = end
			if start < end {
				ps := make([]int32, 0, end-start)
				for p := start; p < end; p++ {
					ps = append(ps, p)
				}
				out[m.ID][t] = ps
			}
		}
	}
	return out
}

// compareJava orders strings as Java's String.compareTo does: by UTF-16
// code unit, which differs from Go's byte order for characters above
// U+FFFF against those from U+E000 (a surrogate pair sorts first).
func compareJava(a, b string) int {
	ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	for i := 0; i < len(ua) && i < len(ub); i++ {
		if c := cmp.Compare(ua[i], ub[i]); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(ua), len(ub))
}
