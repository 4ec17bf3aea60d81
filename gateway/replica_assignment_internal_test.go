package gateway

import "testing"

// TestReplicaAssignmentError: Kafka's checks of one partition's replicas,
// in its order. The replica count check cannot be reached through a
// request while this node is the only broker (two replicas name another
// broker or this one twice, checked first), so it is checked here.
func TestReplicaAssignmentError(t *testing.T) {
	s := &Server{cfg: Config{NodeID: 3}}
	cases := []struct {
		replicas []int32
		rf       int
		want     string
	}{
		{[]int32{3}, 1, ""},
		{[]int32{3}, -1, ""},
		{[]int32{3}, 2, "The manual partition assignment includes a partition with 1 replica(s), but this is not consistent with previous partitions, which have 2 replica(s)."},
		{nil, 1, "The manual partition assignment includes an empty replica list."},
		{[]int32{5, 3, 0}, 3, "The manual partition assignment includes broker 0, but no such broker is registered."},
		{[]int32{3, 3}, 2, "The manual partition assignment includes the broker 3 more than once."},
		{[]int32{3, 4}, 1, "The manual partition assignment includes broker 4, but no such broker is registered."},
	}
	for _, tc := range cases {
		if got := s.replicaAssignmentError(tc.replicas, tc.rf); got != tc.want {
			t.Errorf("replicas %v, replication factor %d: %q, want %q", tc.replicas, tc.rf, got, tc.want)
		}
	}
}
