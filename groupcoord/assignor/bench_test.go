package assignor

import (
	"fmt"
	"testing"
)

// BenchmarkUniform assigns 2,000 partitions of 20 topics to 200 members,
// every other one subscribed to half of the topics (the heterogeneous
// path, with its balancing moves), from nothing.
func BenchmarkUniform(b *testing.B) {
	parts := map[string]int32{}
	var all, half []string
	for i := range 20 {
		t := fmt.Sprintf("t%02d", i)
		parts[t] = 100
		all = append(all, t)
		if i%2 == 0 {
			half = append(half, t)
		}
	}
	members := make([]Member, 200)
	for i := range members {
		members[i] = Member{ID: fmt.Sprintf("m%03d", i), Topics: all}
		if i%2 == 1 {
			members[i].Topics = half
		}
	}
	for b.Loop() {
		Uniform().Assign(members, parts)
	}
}
