package gateway

// Kafka's view of several gateway nodes (docs/cluster.md §5).
//
// When the backend implements disbackend.Cluster, the gateway answers
// Kafka's view from the backend's View: Metadata, DescribeCluster and
// DescribeTopicPartitions list the view's nodes with their address for the
// listener the request came in on, each partition's leader is its owner in
// the view with replicas and ISR [leader], every leader epoch is the
// view's cluster epoch, controller_id is the view's controller, and
// FindCoordinator answers a group's owner. Without it the gateway is one
// node that leads everything at epoch disbackend.LeaderEpoch, as before.
//
// Which view answers: the current one when it is Ready; while the node is
// between views (a rebalance of the membership), the last Ready view it
// held, so that clients keep the leaders and addresses they had (a
// produce still gets NOT_LEADER_OR_FOLLOWER, as the node owns nothing
// then); before its first Ready view, this node alone, leader, controller
// and coordinator of everything: a client bootstrapped at it can then
// connect, its writes are refused NOT_LEADER_OR_FOLLOWER until the view
// arrives, and it learns the others at its next Metadata. Answering no
// broker at all would leave a client without a node to ask again.
//
// What this node may write is decided on the current view alone
// (Server.leads): it leads a partition only while that view is Ready and
// names it.

import (
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/disgw/disgw/disbackend"
)

// answerView returns the view Kafka's answers are built from (see the
// file comment): nil on one node.
func (s *Server) answerView() *disbackend.View {
	if s.cluster == nil {
		return nil
	}
	v := s.cluster.View()
	if v.Ready {
		s.noteView(v)
		return v
	}
	if last := s.lastReady.Load(); last != nil {
		return last
	}
	return s.soloView(v)
}

// noteView remembers v as the last Ready view, unless a newer one is
// already remembered.
func (s *Server) noteView(v *disbackend.View) {
	for {
		last := s.lastReady.Load()
		if last == v || last != nil && last.Generation > v.Generation {
			return
		}
		if s.lastReady.CompareAndSwap(last, v) {
			return
		}
	}
}

// watchViews remembers each Ready view the backend gives as it comes
// (ViewChanged), so that the last one is at hand between views even if no
// request came while it held; and tells the group coordinator of each
// change. Runs until Shutdown.
func (s *Server) watchViews() {
	defer s.bgWG.Done()
	var prev *disbackend.View
	for {
		changed := s.cluster.ViewChanged()
		v := s.cluster.View()
		if v.Ready {
			s.noteView(v)
		}
		if v != prev {
			s.groupsViewChanged(prev, v)
			prev = v
		}
		select {
		case <-changed:
		case <-s.closing:
			return
		}
	}
}

// soloView is this node alone, leader, controller and coordinator of
// everything at v's epoch: the answer before the first Ready view.
func (s *Server) soloView(v *disbackend.View) *disbackend.View {
	return &disbackend.View{Generation: v.Generation, Epoch: v.Epoch, Self: v.Self, Controller: v.Self,
		Nodes: []disbackend.Node{{ID: v.Self, Listeners: s.ownListeners()}}}
}

// ownListeners are this node's advertised addresses by listener name.
func (s *Server) ownListeners() map[string]string {
	m := make(map[string]string, len(s.listeners))
	for _, l := range s.listeners {
		m[l.Name] = l.advertised()
	}
	return m
}

// leads reports whether this node may write the partition of stream now:
// always on one node; with several, while its current view is Ready and
// names it the partition's leader (docs/cluster.md §4, §5).
func (s *Server) leads(stream string, partition int32) bool {
	if s.cluster == nil {
		return true
	}
	v := s.cluster.View()
	return v.Ready && v.Leader(stream, partition) == v.Self
}

// nodeID is this node's Kafka node id: the view's Self with several
// nodes, else Config.NodeID.
func (s *Server) nodeID() int32 {
	if s.cluster != nil {
		return s.cluster.View().Self
	}
	return s.cfg.NodeID
}

// isController reports whether this node applies admin writes (docs/
// cluster.md §7): always on one node; with several, while its current
// view is Ready and names it the controller.
func (s *Server) isController() bool {
	if s.cluster == nil {
		return true
	}
	v := s.cluster.View()
	return v.Ready && v.Controller == v.Self
}

// nodeEndpoint is one node's address on one listener.
type nodeEndpoint struct {
	id   int32
	host string
	port int32
}

// kafkaView is the view one request is answered from (answerView) and the
// listener it came in on, whose addresses the answer gives; nil on one
// node (conn.kafkaView).
type kafkaView struct {
	v *disbackend.View
	// brokers are the view's nodes that have an address on the listener,
	// by id order (the view's).
	brokers []nodeEndpoint
	// replicas interns [id] per node id: the replicas and ISR of every
	// partition a node leads.
	replicas map[int32][]int32
}

// kafkaView returns the view this connection's request is answered from,
// nil on one node.
func (c *conn) kafkaView() *kafkaView {
	v := c.s.answerView()
	if v == nil {
		return nil
	}
	kv := &kafkaView{v: v, replicas: make(map[int32][]int32, len(v.Nodes))}
	for _, n := range v.Nodes {
		if ep, ok := c.s.endpointOf(v, n.ID, c.lst); ok {
			kv.brokers = append(kv.brokers, ep)
		}
	}
	return kv
}

// endpointOf returns node id's address on listener l in v: the view's; for
// this node when the view lacks it, the listener's own advertised address.
func (s *Server) endpointOf(v *disbackend.View, id int32, l *listener) (nodeEndpoint, bool) {
	if n, ok := v.Node(id); ok {
		if addr, ok := n.Listeners[l.Name]; ok {
			if host, port, err := splitHostPort(addr); err == nil {
				return nodeEndpoint{id: id, host: host, port: port}, true
			}
		}
	}
	if id == v.Self {
		return nodeEndpoint{id: id, host: l.advHost, port: l.advPort}, true
	}
	return nodeEndpoint{}, false
}

// splitHostPort splits HOST:PORT with a port of 1-65535.
func splitHostPort(addr string) (string, int32, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port <= 0 || port > 65535 {
		return "", 0, strconv.ErrRange
	}
	return host, int32(port), nil
}

// endpoint returns node id's address on the request's listener.
func (kv *kafkaView) endpoint(id int32) (nodeEndpoint, bool) {
	for _, b := range kv.brokers {
		if b.id == id {
			return b, true
		}
	}
	return nodeEndpoint{}, false
}

// leaderOf returns the partition leader to answer for owner, the
// partition's owner in the view, and the error
// Kafka's metadata cache answers when clients cannot reach it on this
// listener (KRaftMetadataCache.getPartitionMetadata): LEADER_NOT_AVAILABLE
// for a leader that is not a member, LISTENER_NOT_FOUND (Metadata v6+,
// else LEADER_NOT_AVAILABLE) for one without an address on the listener;
// the leader is then -1.
func (kv *kafkaView) leaderOf(owner int32, version int16) (leader int32, code int16) {
	if _, ok := kv.endpoint(owner); ok {
		return owner, 0
	}
	if _, member := kv.v.Node(owner); member && version >= 6 {
		return -1, kerr.ListenerNotFound.Code
	}
	return -1, kerr.LeaderNotAvailable.Code
}

// replicasOf returns [id], shared by every partition id leads.
func (kv *kafkaView) replicasOf(id int32) []int32 {
	r, ok := kv.replicas[id]
	if !ok {
		r = []int32{id}
		kv.replicas[id] = r
	}
	return r
}

// epoch is every partition's leader epoch in the view.
func (kv *kafkaView) epoch() int32 { return kv.v.Epoch }

// currentEpoch is the leader epoch Fetch, ListOffsets and
// OffsetForLeaderEpoch fence with: the answering view's cluster epoch, or
// disbackend.LeaderEpoch on one node.
func (s *Server) currentEpoch() int32 {
	if v := s.answerView(); v != nil {
		return v.Epoch
	}
	return leaderEpoch
}

// writeEpoch is the partition leader epoch produced batches are stamped
// with: the current view's cluster epoch (a node writes only while that
// view is Ready), or disbackend.LeaderEpoch on one node.
func (s *Server) writeEpoch() int32 {
	if s.cluster == nil {
		return leaderEpoch
	}
	return s.cluster.View().Epoch
}
