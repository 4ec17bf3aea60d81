// Package consumer is KIP-848's consumer group protocol
// (group.protocol=consumer) as Kafka 4.4's group coordinator runs it
// (docs/consumer-protocol.md): a group's state and ConsumerGroupHeartbeat
// (API key 68) over it (Group: members, group and assignment epochs, the
// target assignment through groupcoord/assignor, static members, leaving
// and fencing, the timers to arm), and a member's reconciliation towards
// its target (Reconcile, Kafka's CurrentAssignmentBuilder). It is pure
// state: no I/O, no clock, no goroutines; its caller serializes calls,
// persists what changed (MarshalState) and runs the timers. disgw does
// not serve the protocol yet: nothing outside its tests calls this package
// (not built: the assignment interval, classic members in a consumer
// group and the migrations).
//
// Topics are named (disgw's topics map to DIS streams by name), where
// Kafka keys assignments by topic id.
package consumer

import (
	"errors"
	"maps"
	"slices"
)

// MemberState is a consumer group member's reconciliation state; the
// values are Kafka's (MemberState.value(), persisted in its
// ConsumerGroupCurrentMemberAssignment records).
type MemberState int8

const (
	// Stable: the member owns its assignment at its epoch.
	Stable MemberState = 0
	// UnrevokedPartitions: the member must revoke partitions (its
	// PartitionsPendingRevocation) before it gets new ones.
	UnrevokedPartitions MemberState = 1
	// UnreleasedPartitions: the member is at the target epoch but some of
	// its target partitions are still owned by others.
	UnreleasedPartitions MemberState = 2
	// Unknown: a state this version does not know (Kafka's UNKNOWN, 127).
	Unknown MemberState = 127
)

func (s MemberState) String() string {
	switch s {
	case Stable:
		return "stable"
	case UnrevokedPartitions:
		return "unrevoked_partitions"
	case UnreleasedPartitions:
		return "unreleased_partitions"
	}
	return "unknown"
}

// Partitions are a member's partitions by topic, each with its assignment
// epoch: the target epoch at which the member was given it. OffsetCommit
// refuses a commit for a partition with a member epoch older than that
// (STALE_MEMBER_EPOCH).
type Partitions map[string]map[int32]int32

// clone returns a deep copy of p (nil for an empty p).
func (p Partitions) clone() Partitions {
	if len(p) == 0 {
		return nil
	}
	out := make(Partitions, len(p))
	for t, ps := range p {
		out[t] = maps.Clone(ps)
	}
	return out
}

// Member is what reconciliation reads and changes of a consumer group
// member (Kafka's ConsumerGroupMember, its assignment part).
type Member struct {
	ID string
	// MemberEpoch is the epoch the member is at; PreviousMemberEpoch the
	// one before the last change (OffsetCommit and heartbeats from it are
	// still accepted while the member moves on).
	MemberEpoch, PreviousMemberEpoch int32
	State                            MemberState
	// Assigned are the partitions the member owns or is to own;
	// PendingRevocation those it must give up first.
	Assigned, PendingRevocation Partitions
}

// ErrFencedMemberEpoch is Kafka's FENCED_MEMBER_EPOCH (error code 110):
// the member must give up all its partitions and rejoin with epoch 0.
var ErrFencedMemberEpoch = errors.New("the consumer group member is in an unknown state: it must abandon all its partitions and rejoin")

// Reconciliation is the input of Reconcile besides the member.
type Reconciliation struct {
	// TargetEpoch and Target are the group's target assignment epoch and
	// the member's partitions in it (topic → partitions).
	TargetEpoch int32
	Target      map[string][]int32
	// SubscriptionChanged: the heartbeat changed the member's
	// subscription; partitions of topics it no longer subscribes to are
	// revoked at once, before the target assignment catches up.
	SubscriptionChanged bool
	// Subscribed reports whether the member subscribes to a topic (its
	// names and its resolved regular expression, the topic existing).
	Subscribed func(topic string) bool
	// PartitionEpoch is the member epoch of the partition's current owner
	// in the group, -1 when no member owns it (assigned or pending
	// revocation).
	PartitionEpoch func(topic string, part int32) int32
	// Owned are the partitions the member's heartbeat says it owns
	// (TopicPartitions: an entry for every topic it lists, even with no
	// partitions); nil when the heartbeat did not send them (then the
	// member is taken to still own what it must revoke).
	Owned map[string][]int32
}

// Reconcile returns the member's next state towards the target assignment,
// Kafka 4.4's CurrentAssignmentBuilder.build: partitions no longer in the
// target are revoked first (UnrevokedPartitions, at the member's epoch)
// and the member moves to the target epoch only once its heartbeat no
// longer lists them; then it gets its new partitions, those another member
// still owns held back (UnreleasedPartitions) until released. The member
// is returned unchanged when nothing moves. Errors: ErrFencedMemberEpoch
// for a member in an unknown state that still owns partitions (or did not
// say).
func Reconcile(m Member, r Reconciliation) (Member, error) {
	switch m.State {
	case Stable:
		if m.MemberEpoch != r.TargetEpoch {
			return computeNext(m, r, m.MemberEpoch), nil
		}
		if r.SubscriptionChanged {
			return updateCurrent(m, r), nil
		}
		return m, nil
	case UnrevokedPartitions:
		if ownsAny(r.Owned, m.PendingRevocation) {
			if r.SubscriptionChanged {
				return updateCurrent(m, r), nil
			}
			return m, nil
		}
		return computeNext(m, r, m.MemberEpoch), nil
	case UnreleasedPartitions:
		return computeNext(m, r, m.MemberEpoch), nil
	}
	if r.Owned == nil || len(r.Owned) > 0 {
		return m, ErrFencedMemberEpoch
	}
	return computeNext(m, r, r.TargetEpoch), nil
}

// ownsAny reports whether owned lists a partition of pending; a nil owned
// (not sent) counts as owning them (ownsRevokedPartitions).
func ownsAny(owned map[string][]int32, pending Partitions) bool {
	if owned == nil {
		return true
	}
	for t, ps := range owned {
		for _, p := range ps {
			if _, ok := pending[t][p]; ok {
				return true
			}
		}
	}
	return false
}

// withEpoch returns m moved to epoch (the previous epoch remembered) with
// state, assigned and pending.
func withEpoch(m Member, epoch int32, state MemberState, assigned, pending Partitions) Member {
	m.PreviousMemberEpoch, m.MemberEpoch = m.MemberEpoch, epoch
	m.State, m.Assigned, m.PendingRevocation = state, assigned, pending
	return m
}

// updateCurrent revokes, at once, the partitions of topics the member no
// longer subscribes to (updateCurrentAssignment): they join its pending
// revocation, and it waits in UnrevokedPartitions while it owns any; when
// its heartbeat no longer lists them, they are simply dropped. (Kafka
// takes a shortcut when the member subscribes to no existing topic and
// has nothing pending: all of it revoked, the same outcome.)
func updateCurrent(m Member, r Reconciliation) Member {
	var assigned, pending Partitions
	for _, t := range slices.Sorted(maps.Keys(m.Assigned)) {
		if r.Subscribed(t) {
			continue
		}
		if assigned == nil {
			assigned, pending = m.Assigned.clone(), m.PendingRevocation.clone()
			if pending == nil {
				pending = Partitions{}
			}
		}
		delete(assigned, t)
		if pending[t] == nil {
			pending[t] = map[int32]int32{}
		}
		maps.Copy(pending[t], m.Assigned[t])
	}
	if pending == nil {
		return m // every topic it holds still subscribed
	}
	if len(assigned) == 0 {
		assigned = nil
	}
	if ownsAny(r.Owned, pending) {
		return withEpoch(m, m.MemberEpoch, UnrevokedPartitions, assigned, pending)
	}
	return withEpoch(m, m.MemberEpoch, m.State, assigned, m.PendingRevocation)
}

// computeNext is computeNextAssignment: the member keeps what it holds
// that the target keeps, revokes the rest (and stays at epoch while its
// heartbeat lists any of it), and otherwise moves to the target epoch with
// the new partitions that no other member still owns, each at the target
// epoch.
func computeNext(m Member, r Reconciliation, epoch int32) Member {
	topics := map[string]bool{}
	for t := range r.Target {
		topics[t] = true
	}
	for t := range m.Assigned {
		topics[t] = true
	}
	var assigned, revoking Partitions
	toAssign := map[string][]int32{}
	unreleased := false
	for _, t := range slices.Sorted(maps.Keys(topics)) {
		var target []int32
		if r.Subscribed(t) {
			target = r.Target[t]
		}
		current := m.Assigned[t]
		kept := map[int32]int32{}
		for p, e := range current {
			if slices.Contains(target, p) {
				kept[p] = e
			}
		}
		for p, e := range current {
			if _, ok := kept[p]; !ok {
				if revoking == nil {
					revoking = Partitions{}
				}
				if revoking[t] == nil {
					revoking[t] = map[int32]int32{}
				}
				revoking[t][p] = e
			}
		}
		for _, p := range target {
			if _, ok := kept[p]; ok {
				continue
			}
			if _, mine := m.PendingRevocation[t][p]; r.PartitionEpoch(t, p) != -1 && !mine {
				unreleased = true // another member still owns it
				continue
			}
			toAssign[t] = append(toAssign[t], p)
		}
		if len(kept) > 0 {
			if assigned == nil {
				assigned = Partitions{}
			}
			assigned[t] = kept
		}
	}
	if len(revoking) > 0 && ownsAny(r.Owned, revoking) {
		return withEpoch(m, epoch, UnrevokedPartitions, assigned, revoking)
	}
	state := Stable
	if unreleased {
		state = UnreleasedPartitions
	}
	for t, ps := range toAssign {
		if assigned == nil {
			assigned = Partitions{}
		}
		if assigned[t] == nil {
			assigned[t] = map[int32]int32{}
		}
		for _, p := range ps {
			assigned[t][p] = r.TargetEpoch
		}
	}
	return withEpoch(m, r.TargetEpoch, state, assigned, nil)
}
