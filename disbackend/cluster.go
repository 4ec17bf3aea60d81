package disbackend

import (
	"errors"
	"strconv"
	"time"
)

// Several gateway nodes in front of one DIS project (docs/cluster.md). The
// backend that coordinates them (disrest, with cluster mode on) implements
// Cluster; the gateway reads Kafka's view (brokers, leaders, coordinators,
// the controller, leader epochs) from it. A backend without it is one node
// that owns everything, as before.

// Sentinels of cluster mode, mapped by internal/errmap.
var (
	// ErrNotLeader: this node does not lead the partition in its current
	// view, or its lease has lapsed (docs/cluster.md §4). Kafka
	// NOT_LEADER_OR_FOLLOWER (6); the gateway adds KIP-951's current
	// leader.
	ErrNotLeader = errors.New("this node does not lead the partition")
	// ErrNotCoordinator: this node does not coordinate the group in its
	// current view. Kafka NOT_COORDINATOR (16).
	ErrNotCoordinator = errors.New("this node does not coordinate the group")
	// ErrNotController: an admin write reached a node that is not the
	// controller and could not be forwarded. Kafka NOT_CONTROLLER (41).
	ErrNotController = errors.New("this node is not the controller")
)

// Node is one gateway node of a view.
type Node struct {
	// ID is the node's Kafka node id (the node_id setting), 0-1023.
	ID int32
	// Listeners are the node's advertised addresses, HOST:PORT, by
	// listener name (PLAINTEXT, SASL_SSL, ...): Metadata answers each
	// client the address of the listener its request came in on.
	Listeners map[string]string
}

// View is what every node of one generation agrees on (docs/cluster.md §2):
// read from the view document the controller wrote for the generation.
// A View is immutable; a new generation gives a new View.
type View struct {
	// Generation is the DIS consumer-group generation of app __disgw-nodes
	// the view belongs to.
	Generation int64
	// Epoch is the cluster epoch: it grows by one with every view and is
	// every partition's Kafka leader epoch while the view holds.
	Epoch int32
	// Self is this node's id.
	Self int32
	// Controller is the controller's node id (Metadata's controller_id).
	Controller int32
	// Nodes are the members, sorted by ID.
	Nodes []Node
	// Ready is false until this node holds the view of its generation:
	// it then owns nothing and answers NOT_LEADER_OR_FOLLOWER and
	// NOT_COORDINATOR.
	Ready bool

	// Owner gives the owner of a placement key (PartitionKey, GroupKey):
	// the view document's, else the rendezvous hash over the members. Set
	// by the backend; nil means Self owns everything.
	Owner func(key string) int32
}

// PartitionKey is the placement key of a partition of a stream.
func PartitionKey(stream string, partition int32) string {
	return "p/" + stream + "/" + strconv.Itoa(int(partition))
}

// GroupKey is the placement key of a consumer group (by its Kafka group
// id).
func GroupKey(group string) string { return "g/" + group }

// TxnKey is the placement key of a transactional id: its transaction
// coordinator is the key's owner.
func TxnKey(id string) string { return "t/" + id }

// TxnCoordinator returns the node that coordinates the transactional id
// in the view.
func (v *View) TxnCoordinator(id string) int32 {
	if v.Owner == nil {
		return v.Self
	}
	return v.Owner(TxnKey(id))
}

// Leader returns the node that leads the partition in the view.
func (v *View) Leader(stream string, partition int32) int32 {
	if v.Owner == nil {
		return v.Self
	}
	return v.Owner(PartitionKey(stream, partition))
}

// Coordinator returns the node that coordinates the group in the view.
func (v *View) Coordinator(group string) int32 {
	if v.Owner == nil {
		return v.Self
	}
	return v.Owner(GroupKey(group))
}

// Node returns the member with id, and whether it is one.
func (v *View) Node(id int32) (Node, bool) {
	for _, n := range v.Nodes {
		if n.ID == id {
			return n, true
		}
	}
	return Node{}, false
}

// Cluster is implemented by a backend that coordinates several gateway
// nodes (disrest in cluster mode).
type Cluster interface {
	// View returns the current view, never nil.
	View() *View
	// ViewChanged returns a channel closed when View changes.
	ViewChanged() <-chan struct{}
}

// LeaseState is where a node's lease stands (docs/cluster.md §4), as the
// admin listener shows it.
type LeaseState int

const (
	// LeaseNone: no lease since the node started (it has not synced a
	// generation yet).
	LeaseNone LeaseState = iota
	// LeaseHeld: renewed for the generation of the node's view, and not
	// ended.
	LeaseHeld
	// LeaseBetweenViews: the nodes rebalance. DIS refused the last renewal
	// with DIS.4701, the lease holds for a newer generation than the
	// view's, whose view the node has not read yet, or the view's
	// generation ended (the view is no longer Ready) while the lease
	// still holds.
	LeaseBetweenViews
	// LeaseRefused: DIS refused the last renewal with DIS.4702 or
	// DIS.4703: the node is no member of the current generation (DIS
	// dropped it after its session, as a paused node).
	LeaseRefused
	// LeaseLapsed: no renewal accepted for cluster_lease (DIS not
	// answering, or the node was paused).
	LeaseLapsed
)

func (s LeaseState) String() string {
	switch s {
	case LeaseNone:
		return "none"
	case LeaseHeld:
		return "held"
	case LeaseBetweenViews:
		return "between views"
	case LeaseRefused:
		return "refused"
	case LeaseLapsed:
		return "lapsed"
	}
	return "unknown"
}

// ClusterStatus is a node's standing in the cluster at one moment: its
// view, its generation and its lease (the admin listener's /readyz and
// console).
type ClusterStatus struct {
	// View is the current view (Cluster.View), never nil.
	View *View
	// Generation is the DIS generation of the node's last SyncGroup, -1
	// before the first.
	Generation int64
	// Lease is where the lease stands.
	Lease LeaseState
	// LeaseLeft is how long the lease still holds (LeaseHeld; LeaseBetweenViews
	// when it holds for a newer generation), else 0.
	LeaseLeft time.Duration
	// LeaseEnded is how long ago the lease stopped holding (LeaseRefused,
	// LeaseLapsed; LeaseBetweenViews after a refusal), else 0.
	LeaseEnded time.Duration
	// RefusedCode is the DIS error code of the last renewal DIS refused
	// (DIS.4701, DIS.4702, DIS.4703), "" when none was.
	RefusedCode string
	// Failure is the error that stopped the membership for good (another
	// live node holds this node id), nil otherwise.
	Failure error
}

// NotReady returns why the node should not take new clients, "" when it
// may (the admin listener's /readyz, docs/operations.md): its membership
// stopped; it has held no view yet (Epoch 0); DIS refused its lease as no
// member of the current generation (LeaseRefused); or its lease lapsed
// (LeaseLapsed). Between views (LeaseBetweenViews: the view of the
// generation that ended is no longer Ready, or the lease already holds
// for the next generation) it is ready: every node is between views at
// once while the nodes rebalance, and each keeps answering Kafka's view
// from its last one.
func (st ClusterStatus) NotReady() string {
	switch {
	case st.Failure != nil:
		return "cluster membership stopped: " + st.Failure.Error()
	case st.View == nil || (!st.View.Ready && st.View.Epoch == 0):
		return "no cluster view yet: joining the nodes' group"
	case st.Lease == LeaseRefused:
		return "cluster lease refused " + st.LeaseEnded.Round(time.Millisecond).String() + " ago (" + st.RefusedCode +
			"): this node is no member of the current generation; joining again"
	case st.Lease == LeaseLapsed:
		return "cluster lease lapsed " + st.LeaseEnded.Round(time.Millisecond).String() + " ago: no renewal accepted by DIS"
	case st.Lease == LeaseNone:
		return "no cluster lease yet"
	}
	return ""
}

// ClusterStatusReporter is implemented by a Cluster that can tell a
// node's lease and generation (disrest's membership).
type ClusterStatusReporter interface {
	// Status returns the node's standing now.
	Status() ClusterStatus
}
