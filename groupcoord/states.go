package groupcoord

// State is a classic group's state, as Kafka names them (ClassicGroupState).
//
//	Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance
//	  ▲                 ▲        │                                   │
//	  │                 │        └──no member left──▶ Empty          │ leader's SyncGroup
//	  │                 └──join, leave, expiry, changed metadata──── Stable ◀┘
//	  └──last member leaves or expires (then, with no offsets, Dead)
//
// Dead is terminal: the group was deleted or emptied of members and removed
// from memory; a later request starts a new Empty group.
type State int8

const (
	// Empty: no members. The group may still have committed offsets (a DIS
	// app with checkpoints); then it is listed and described as Empty.
	Empty State = iota
	// PreparingRebalance: waiting for members to (re)join, up to the
	// rebalance timeout (the initial rebalance delay for a new group).
	PreparingRebalance
	// CompletingRebalance: the join phase is over and every member got its
	// JoinGroup response; waiting for the leader's SyncGroup with the
	// assignment.
	CompletingRebalance
	// Stable: the leader sent the assignment; members heartbeat.
	Stable
	// Dead: removed (deleted, or empty and dropped from memory).
	Dead
)

// String returns Kafka's name of the state, as DescribeGroups and
// ListGroups show it.
func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case PreparingRebalance:
		return "PreparingRebalance"
	case CompletingRebalance:
		return "CompletingRebalance"
	case Stable:
		return "Stable"
	case Dead:
		return "Dead"
	}
	return "Unknown"
}
