package gateway

// FindCoordinator: v0-6.
//
// Version notes:
//   - v1: CoordinatorType (0 group, 1 transaction), ThrottleMillis,
//     ErrorMessage. v3: flexible.
//   - v4: several keys in one request (KIP-699); the answer moves from the
//     top-level fields to Coordinators.
//   - v5, v6: no change here (v6 adds share-group keys, type 2).
//
// On one node this node coordinates every group. With several
// (cluster.go), a group's coordinator is its owner in the answering view,
// at its address on the request's listener (COORDINATOR_NOT_AVAILABLE when
// it has none there); the group APIs on other nodes answer
// NOT_COORDINATOR (groupcoord). Transactions are not offered, so type 1 gets
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED (as InitProducerId does for a
// transactional id); share groups (type 2) and unknown types INVALID_REQUEST.
//
// v4+ keys past Limits.MaxGroups get INVALID_REQUEST (limits.go).
//
// This file also builds the group coordinator (groupcoord) for the server.

import (
	"context"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/groupcoord"
	"github.com/disgw/disgw/groupcoord/consumer"
	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

func init() { registerAPI(10, 0, 6, (*conn).handleFindCoordinator, (*conn).authorizeFindCoordinator) }

// authorizeFindCoordinator: DESCRIBE on each key, a group or (coordinator
// type 1) a transactional id; a refused key is answered
// GROUP_AUTHORIZATION_FAILED or TRANSACTIONAL_ID_AUTHORIZATION_FAILED
// without a coordinator.
func (c *conn) authorizeFindCoordinator(req *kafkawire.Request) (kmsg.Response, postAuth) {
	r := req.Body.(*kmsg.FindCoordinatorRequest)
	return nil, func(resp kmsg.Response) error {
		fr := resp.(*kmsg.FindCoordinatorResponse)
		rt, code := acl.ResourceGroup, errGroupAuth
		if r.CoordinatorType == 1 {
			rt, code = acl.ResourceTransactionalID, errTxnAuth
		}
		if r.Version < 4 {
			if !c.may(acl.OpDescribe, rt, r.CoordinatorKey) {
				fr.ErrorCode, fr.NodeID, fr.Host, fr.Port = code, -1, "", -1
			}
			return nil
		}
		for i := range fr.Coordinators {
			k := &fr.Coordinators[i]
			if !c.may(acl.OpDescribe, rt, k.Key) {
				k.ErrorCode, k.NodeID, k.Host, k.Port = code, -1, "", -1
			}
		}
		return nil
	}
}

func (c *conn) handleFindCoordinator(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.FindCoordinatorRequest)
	resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := r.CoordinatorKeys
	if r.Version < 4 {
		keys = []string{r.CoordinatorKey}
	}
	q := newQuota(c.s.cfg.Limits.MaxGroups)
	defer q.report(c, limitGroups, "FindCoordinator")
	resp.Coordinators = make([]kmsg.FindCoordinatorResponseCoordinator, 0, len(keys))
	kv := c.kafkaView()
	for _, key := range keys {
		fc := kmsg.NewFindCoordinatorResponseCoordinator()
		fc.Key = key
		switch {
		case !q.take():
			fc.ErrorCode = errCodeOverCap
		case r.CoordinatorType == 0 && kv != nil:
			if ep, ok := kv.endpoint(kv.v.Coordinator(key)); ok {
				fc.NodeID, fc.Host, fc.Port = ep.id, ep.host, ep.port
			} else {
				// As Kafka when the coordinator has no address on
				// the request's listener.
				msg := kerr.CoordinatorNotAvailable.Description
				fc.ErrorCode, fc.ErrorMessage = kerr.CoordinatorNotAvailable.Code, &msg
			}
		case r.CoordinatorType == 0:
			fc.NodeID, fc.Host, fc.Port = c.s.cfg.NodeID, c.lst.advHost, c.lst.advPort
		case r.CoordinatorType == 1 && c.s.txn != nil && kv != nil:
			if ep, ok := kv.endpoint(kv.v.TxnCoordinator(key)); ok {
				fc.NodeID, fc.Host, fc.Port = ep.id, ep.host, ep.port
			} else {
				msg := kerr.CoordinatorNotAvailable.Description
				fc.ErrorCode, fc.ErrorMessage = kerr.CoordinatorNotAvailable.Code, &msg
			}
		case r.CoordinatorType == 1 && c.s.txn != nil:
			fc.NodeID, fc.Host, fc.Port = c.s.cfg.NodeID, c.lst.advHost, c.lst.advPort
		case r.CoordinatorType == 1:
			fc.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			msg := errNoTransactions.Error()
			fc.ErrorMessage = &msg
		default:
			fc.ErrorCode = kerr.InvalidRequest.Code
			msg := "only group coordinators (type 0) are served"
			fc.ErrorMessage = &msg
		}
		if fc.ErrorCode != 0 {
			fc.NodeID, fc.Port = -1, -1
		}
		resp.Coordinators = append(resp.Coordinators, fc)
	}
	if r.Version < 4 {
		fc := resp.Coordinators[0]
		resp.ErrorCode, resp.ErrorMessage = fc.ErrorCode, fc.ErrorMessage
		resp.NodeID, resp.Host, resp.Port = fc.NodeID, fc.Host, fc.Port
		resp.Coordinators = nil
	}
	return ready(req, resp)
}

// newGroupCoordinator starts the server's group coordinator over the
// backend's apps (committed offsets) and the server's topic cache.
func newGroupCoordinator(cfg Config, backend disbackend.Backend, s *Server, log *zap.Logger) *groupcoord.Coordinator {
	var owns func(string) bool // nil: this node coordinates every group
	if s.cluster != nil {
		owns = s.ownsGroup
	}
	return groupcoord.New(groupcoord.Config{
		InitialRebalanceDelay: cfg.GroupInitialRebalanceDelay,
		MinSessionTimeout:     cfg.GroupMinSessionTimeout,
		MaxSessionTimeout:     cfg.GroupMaxSessionTimeout,
		OffsetsRetention:      cfg.OffsetsRetention,
		SubscribedTopics:      consumerSubscription,
		Logger:                log,
		Metrics:               cfg.Metrics,
		Owns:                  owns,
		Consumer:              consumer.Config{MigrationPolicy: cfg.ConsumerGroupMigrationPolicy},
	}, backend, groupTopics{s})
}

// groupTopics gives groupcoord the topic cache's view of topics; a topic
// the cache does not know is looked up in the backend (created by DIS
// tools, or through another node, after this one started: a DIS
// application's checkpoints on its own stream are the group's offsets).
type groupTopics struct{ s *Server }

func (t groupTopics) Topic(ctx context.Context, name string) (groupcoord.TopicInfo, bool) {
	st := t.s.topicNamed(ctx, name)
	if st == nil {
		return groupcoord.TopicInfo{}, false
	}
	return topicInfo(st), true
}

func (t groupTopics) Stream(ctx context.Context, stream string) (groupcoord.TopicInfo, bool) {
	for _, st := range t.s.topics.all() {
		if st.Name == stream {
			return topicInfo(st), true
		}
	}
	if st := t.s.lookupStream(ctx, stream); st != nil {
		return topicInfo(st), true
	}
	return groupcoord.TopicInfo{}, false
}

func topicInfo(st *disbackend.Stream) groupcoord.TopicInfo {
	return groupcoord.TopicInfo{Topic: st.TopicName, Stream: st.Name, ID: st.TopicID, Partitions: st.PartitionCount}
}

// groupClient identifies the connection for DescribeGroups: the client id
// and "/" + the client's IP, as Kafka shows a member's host.
func (c *conn) groupClient(req *kafkawire.Request) groupcoord.Client {
	host := c.nc.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return groupcoord.Client{ID: req.ClientID, Host: "/" + host}
}

// ownsGroup reports whether this node coordinates group now: always on
// one node; with several, while its current view is Ready and names it the
// group's coordinator (docs/cluster.md §6), and not while groupsViewChanged
// passes through a view that owns nothing. groupcoord asks it before
// serving a group (groupcoord.Config.Owns) and answers NOT_COORDINATOR
// when it is false.
func (s *Server) ownsGroup(group string) bool {
	if s.cluster == nil {
		return true
	}
	if s.ownNoGroup.Load() {
		return false
	}
	v := s.cluster.View()
	return v.Ready && v.Coordinator(group) == v.Self
}

// groupsViewChanged tells the group coordinator that the view changed
// from prev (nil at start) to v, so that it drops the groups this node no
// longer owns and loads those it gained (groupcoord's ViewChanged, with
// Config.Owns = ownsGroup). A group lost and gained again between two
// calls would not be seen to have moved; so when views were skipped (v's
// generation is not prev's next one), the coordinator is first shown a
// view that owns nothing (ownNoGroup), which drops every group, then v.
func (s *Server) groupsViewChanged(prev, v *disbackend.View) {
	vc, ok := any(s.groups).(interface{ ViewChanged() })
	if !ok {
		return
	}
	if prev != nil && v.Generation > prev.Generation+1 {
		s.ownNoGroup.Store(true)
		vc.ViewChanged()
		if s.txn != nil {
			s.txn.ViewChanged()
		}
		s.ownNoGroup.Store(false)
	}
	vc.ViewChanged()
	if s.txn != nil {
		s.txn.ViewChanged()
	}
}
