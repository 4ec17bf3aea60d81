package consumer

import (
	"errors"
	"reflect"
	"testing"
)

// free: no other member owns anything; ownedBy gives the owners' epochs.
func free(string, int32) int32 { return -1 }

func ownedBy(owners map[string]map[int32]int32) func(string, int32) int32 {
	return func(t string, p int32) int32 {
		if e, ok := owners[t][p]; ok {
			return e
		}
		return -1
	}
}

func subscribedTo(topics ...string) func(string) bool {
	return func(t string) bool {
		for _, s := range topics {
			if s == t {
				return true
			}
		}
		return false
	}
}

func check(t *testing.T, step string, got Member, err error, want Member) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", step, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got %+v\nwant %+v", step, got, want)
	}
}

// TestReconcileRevokeThenAssign walks a member through a rebalance: the
// partition it loses is revoked at its own epoch, and only once its
// heartbeat no longer lists it does it move to the target epoch, with the
// partition that another member must release first held back.
func TestReconcileRevokeThenAssign(t *testing.T) {
	m := Member{ID: "a", MemberEpoch: 10, PreviousMemberEpoch: 9, State: Stable,
		Assigned: Partitions{"t": {0: 8, 1: 9, 2: 10}}}
	r := Reconciliation{TargetEpoch: 11, Target: map[string][]int32{"t": {0, 1, 3}}, Subscribed: subscribedTo("t"),
		PartitionEpoch: ownedBy(map[string]map[int32]int32{"t": {3: 10}}), Owned: map[string][]int32{"t": {0, 1, 2}}}

	// Stable at the target epoch: nothing to do.
	same, err := Reconcile(m, Reconciliation{TargetEpoch: 10, Subscribed: r.Subscribed, PartitionEpoch: free})
	check(t, "at the target epoch", same, err, m)

	// A new target: t/2 to revoke, the member stays at epoch 10.
	m, err = Reconcile(m, r)
	check(t, "revoke", m, err, Member{ID: "a", MemberEpoch: 10, PreviousMemberEpoch: 10, State: UnrevokedPartitions,
		Assigned: Partitions{"t": {0: 8, 1: 9}}, PendingRevocation: Partitions{"t": {2: 10}}})

	// The heartbeat still lists t/2, or does not say: no change.
	for _, owned := range []map[string][]int32{{"t": {0, 1, 2}}, nil} {
		r.Owned = owned
		got, err := Reconcile(m, r)
		check(t, "still owned", got, err, m)
	}

	// Revoked: to the target epoch, t/3 held back while another member
	// owns it.
	r.Owned = map[string][]int32{"t": {0, 1}}
	m, err = Reconcile(m, r)
	check(t, "unreleased", m, err, Member{ID: "a", MemberEpoch: 11, PreviousMemberEpoch: 10, State: UnreleasedPartitions,
		Assigned: Partitions{"t": {0: 8, 1: 9}}})

	// Released: t/3 assigned at the target epoch.
	r.PartitionEpoch = free
	m, err = Reconcile(m, r)
	check(t, "assigned", m, err, Member{ID: "a", MemberEpoch: 11, PreviousMemberEpoch: 11, State: Stable,
		Assigned: Partitions{"t": {0: 8, 1: 9, 3: 11}}})
}

// TestReconcileNothingToRevoke: new partitions only, the member goes to
// the target epoch at once.
func TestReconcileNothingToRevoke(t *testing.T) {
	m := Member{ID: "a", MemberEpoch: 3, State: Stable, Assigned: Partitions{"t": {0: 3}}}
	got, err := Reconcile(m, Reconciliation{TargetEpoch: 5, Target: map[string][]int32{"t": {0}, "u": {1}},
		Subscribed: subscribedTo("t", "u"), PartitionEpoch: free, Owned: map[string][]int32{"t": {0}}})
	check(t, "grow", got, err, Member{ID: "a", MemberEpoch: 5, PreviousMemberEpoch: 3, State: Stable,
		Assigned: Partitions{"t": {0: 3}, "u": {1: 5}}})
}

// TestReconcileOwnPendingPartition: a partition the member itself is
// revoking may be given back to it; others' are unreleased.
func TestReconcileOwnPendingPartition(t *testing.T) {
	m := Member{ID: "a", MemberEpoch: 4, State: UnrevokedPartitions,
		Assigned: Partitions{"t": {0: 4}}, PendingRevocation: Partitions{"t": {1: 4}}}
	owners := ownedBy(map[string]map[int32]int32{"t": {0: 4, 1: 4}})
	got, err := Reconcile(m, Reconciliation{TargetEpoch: 6, Target: map[string][]int32{"t": {0, 1}},
		Subscribed: subscribedTo("t"), PartitionEpoch: owners, Owned: map[string][]int32{"t": {0}}})
	check(t, "given back", got, err, Member{ID: "a", MemberEpoch: 6, PreviousMemberEpoch: 4, State: Stable,
		Assigned: Partitions{"t": {0: 4, 1: 6}}})
}

// TestReconcileSubscriptionChanged: a topic the member stops subscribing
// to is revoked at once, at its epoch, before the target catches up.
func TestReconcileSubscriptionChanged(t *testing.T) {
	m := Member{ID: "a", MemberEpoch: 7, PreviousMemberEpoch: 6, State: Stable,
		Assigned: Partitions{"t": {0: 7}, "u": {0: 5, 1: 7}}}
	r := Reconciliation{TargetEpoch: 7, Target: map[string][]int32{"t": {0}, "u": {0, 1}}, SubscriptionChanged: true,
		Subscribed: subscribedTo("t"), PartitionEpoch: free, Owned: map[string][]int32{"t": {0}, "u": {0, 1}}}
	got, err := Reconcile(m, r)
	check(t, "unsubscribed", got, err, Member{ID: "a", MemberEpoch: 7, PreviousMemberEpoch: 7, State: UnrevokedPartitions,
		Assigned: Partitions{"t": {0: 7}}, PendingRevocation: Partitions{"u": {0: 5, 1: 7}}})

	// Already given up by the client: dropped, no revocation to wait for.
	r.Owned = map[string][]int32{"t": {0}}
	got, err = Reconcile(m, r)
	check(t, "already revoked", got, err, Member{ID: "a", MemberEpoch: 7, PreviousMemberEpoch: 7, State: Stable,
		Assigned: Partitions{"t": {0: 7}}})

	// Subscribed to everything it holds: unchanged.
	r.Subscribed = subscribedTo("t", "u")
	got, err = Reconcile(m, r)
	check(t, "still subscribed", got, err, m)
}

// TestReconcileUnknownState: fenced unless the member owns nothing.
func TestReconcileUnknownState(t *testing.T) {
	m := Member{ID: "a", MemberEpoch: 2, State: Unknown, Assigned: Partitions{"t": {0: 2}}}
	r := Reconciliation{TargetEpoch: 3, Target: map[string][]int32{"t": {1}}, Subscribed: subscribedTo("t"), PartitionEpoch: free}
	for _, owned := range []map[string][]int32{nil, {"t": {}}, {"t": {0}}} {
		r.Owned = owned
		if _, err := Reconcile(m, r); !errors.Is(err, ErrFencedMemberEpoch) {
			t.Fatalf("owned %v: err %v, want ErrFencedMemberEpoch", owned, err)
		}
	}
	r.Owned = map[string][]int32{}
	got, err := Reconcile(m, r)
	check(t, "owns nothing", got, err, Member{ID: "a", MemberEpoch: 3, PreviousMemberEpoch: 2, State: Stable,
		Assigned: Partitions{"t": {1: 3}}})
}

func TestMemberStateString(t *testing.T) {
	for s, want := range map[MemberState]string{Stable: "stable", UnrevokedPartitions: "unrevoked_partitions",
		UnreleasedPartitions: "unreleased_partitions", Unknown: "unknown"} {
		if s.String() != want {
			t.Errorf("%d: %q, want %q", s, s.String(), want)
		}
	}
}
