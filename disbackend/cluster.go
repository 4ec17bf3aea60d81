package disbackend

import (
	"errors"
	"strconv"
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
