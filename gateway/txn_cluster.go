package gateway

// Transactions with several nodes (docs/transactions.md, "Several nodes";
// txncoord/shared.go). Every node runs the transaction coordinator over
// the records the nodes share (DIS's __disgw_txns). The node that owns a
// transactional id's placement key (disbackend.TxnKey) coordinates it:
// FindCoordinator (key type 1) answers it, and the transaction APIs
// answer NOT_COORDINATOR elsewhere. The calls between nodes are node
// calls: envelopes (API key 58) authenticated by the cluster key as
// forwarded admin writes are (forward.go), sent to a given node and served
// there by any node of the view, without ACLs (the sender is a node; the
// client's request was authorized where it came in):
//
//   - WriteTxnMarkers (27, v1): the coordinator to a partition's leader,
//     which writes the marker (txncoord LeaderMarker);
//   - TxnOffsetCommit (28): the group's coordinator, which received it
//     from the client and checked its member and generation, to the
//     transactional id's coordinator, which keeps the offsets in the
//     transaction;
//   - OffsetCommit (8, v8): the transaction's coordinator, committing a
//     transaction, to the group's coordinator, which writes the offsets as
//     the group's committed offsets (groupcoord CommitTxnOffsets: no
//     member check).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/kafkawire"
	"github.com/disgw/disgw/kafkawire/batch"
	"github.com/disgw/disgw/txncoord"
)

// ownsTxn reports whether this node coordinates the transactional id.
func (s *Server) ownsTxn(id string) bool {
	if s.cluster == nil {
		return true
	}
	if s.ownNoGroup.Load() {
		return false
	}
	v := s.cluster.View()
	return v.Ready && v.TxnCoordinator(id) == v.Self
}

// committedReadable reports whether this node may answer a read_committed
// Fetch or ListOffsets of a partition (always on one node): with several
// nodes only its leader knows every transaction open there, once it has
// read the transaction records saved before its view began
// (txncoord Follow). Otherwise the client gets NOT_LEADER_OR_FOLLOWER and
// asks the leader, as from a Kafka broker that is not the leader. Between
// views the leader of the last Ready view answers (nobody writes then);
// before its first Ready view a node answers none.
func (s *Server) committedReadable(ctx context.Context, stream string, part int32) bool {
	if s.cluster == nil || s.txn == nil {
		return true
	}
	v := s.answerView()
	if !v.Ready || v.Leader(stream, part) != v.Self {
		return false
	}
	if err := s.txn.Follow(ctx, v.Epoch); err != nil {
		s.log.Info("read_committed: reading the transaction records failed", zap.Error(err))
		return false
	}
	return true
}

// errNodeCall: a node call could not be made (no view, no address, no
// cluster key); retried by the caller later.
var errNodeCall = errors.New("node call not made")

// nodeCallKeys are the API keys a node may call another node with.
var nodeCallKeys = map[int16]bool{8: true, 27: true, 28: true}

// nodeCallWriteKeys are the API keys a node may call another node with
// that are also controller writes forwarded in envelopes
// (IncrementalAlterConfigs: a group's configs applied by its coordinator,
// group_configs.go). Such an envelope is a node call when it carries no
// principal (call sends none); a forwarded client's request always
// carries one (kafkaPrincipal: at least User:ANONYMOUS).
var nodeCallWriteKeys = map[int16]bool{44: true}

// isNodeCall reports whether the envelope r, of inner request key, is a
// node call rather than an admin write forwarded to the controller.
func isNodeCall(r *kmsg.EnvelopeRequest, key int16) bool {
	if nodeCallKeys[key] {
		return true
	}
	if !nodeCallWriteKeys[key] {
		return false
	}
	p, err := decodePrincipal(r.RequestPrincipal)
	return err == nil && p == ":"
}

// call sends body to node (a node call) and returns its response.
// Errors: errNodeCall (wrapped), the envelope's error code (a kerr
// error), the transport's.
func (f *forwarder) call(ctx context.Context, node int32, body kmsg.Request) (kmsg.Response, error) {
	if len(f.key) == 0 {
		return nil, fmt.Errorf("%w: no cluster key", errNodeCall)
	}
	v := f.s.cluster.View()
	if !v.Ready {
		return nil, fmt.Errorf("%w: no view", errNodeCall)
	}
	n, ok := v.Node(node)
	addr := n.Listeners[f.s.clusterListener()]
	if !ok || addr == "" {
		return nil, fmt.Errorf("%w: node %d has no address on listener %s", errNodeCall, node, f.s.clusterListener())
	}
	req := &kafkawire.Request{Key: body.Key(), Version: body.GetVersion(), CorrelationID: 1,
		ClientID: "disgw-node", Body: body}
	env := kmsg.NewPtrEnvelopeRequest()
	env.RequestData = appendRequest(nil, req)
	env.RequestPrincipal = encodePrincipal("")
	env.ClientHostAddress = net.IPv4(127, 0, 0, 1).To4()
	f.sign(env, v.Self, time.Now())
	er, _, err := f.roundTrip(ctx, addr, env)
	if err != nil && ctx.Err() == nil {
		// A kept connection to a node that restarted fails at its first
		// use. The node calls bear a repeat (a second marker changes
		// nothing for readers; offsets are written again as they were), so
		// once more, on a new connection (roundTrip closed the old one).
		f.sign(env, v.Self, time.Now())
		er, _, err = f.roundTrip(ctx, addr, env)
	}
	if err != nil {
		return nil, err
	}
	if er.ErrorCode != 0 {
		return nil, fmt.Errorf("node call to %d refused: %w", node, kerr.ErrorForCode(er.ErrorCode))
	}
	return decodeResponseData(body, er.ResponseData)
}

// handleNodeCall serves a node call's inner request, from node sender.
func (c *conn) handleNodeCall(req *kafkawire.Request, resp *kmsg.EnvelopeResponse, inner *kafkawire.Request, sender int32) reply {
	ctx, cancel := c.requestContext(0)
	defer cancel()
	var out kmsg.Response
	switch r := inner.Body.(type) {
	case *kmsg.WriteTxnMarkersRequest:
		out = c.writeTxnMarkers(ctx, r)
	case *kmsg.TxnOffsetCommitRequest:
		if c.s.txn == nil {
			out = refuseTxnOffsetCommit(r, errTxnAuth)
		} else {
			out = c.s.txn.TxnOffsetCommit(txncoord.GroupChecked(ctx), r)
		}
	case *kmsg.IncrementalAlterConfigsRequest:
		out = c.groupConfigNodeCall(ctx, r)
	case *kmsg.OffsetCommitRequest:
		if !c.s.ownsGroup(r.Group) {
			out = refuseOffsetCommit(r, kerr.NotCoordinator.Code)
		} else {
			out = c.s.groups.CommitTxnOffsets(ctx, r)
		}
	default:
		resp.ErrorCode = kerr.InvalidRequest.Code
		return ready(req, resp)
	}
	c.log.Debug("node call served", zap.Int32("sender", sender), zap.String("api", kmsg.NameForKey(inner.Key)))
	resp.ResponseData = appendResponseData(inner.CorrelationID, out)
	return ready(req, resp)
}

// refuseOffsetCommit answers code on every partition.
func refuseOffsetCommit(r *kmsg.OffsetCommitRequest, code int16) *kmsg.OffsetCommitResponse {
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range r.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// sendMarker is txncoord's Config.SendMarker: the marker written by the
// partition's leader, this node (LeaderMarker) or another (a node call of
// WriteTxnMarkers v1). Errors: the partition's code (a kerr error),
// errNodeCall, the transport's.
func (s *Server) sendMarker(ctx context.Context, topic string, part int32, pid int64, epoch int16, commit bool) error {
	st := s.topicNamed(ctx, topic)
	if st == nil {
		return kerr.UnknownTopicOrPartition
	}
	v := s.cluster.View()
	if !v.Ready {
		return fmt.Errorf("%w: no view", errNodeCall)
	}
	leader := v.Leader(st.Name, part)
	if leader == v.Self {
		if code := s.txn.LeaderMarker(ctx, topic, part, pid, epoch, commit); code != 0 {
			return kerr.ErrorForCode(code)
		}
		return nil
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 1
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed = pid, epoch, commit
	m.CoordinatorEpoch = 0
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, []int32{part}
	m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{mt}
	req.Markers = []kmsg.WriteTxnMarkersRequestMarker{m}
	resp, err := s.fwd.call(ctx, leader, req)
	if err != nil {
		return err
	}
	wr := resp.(*kmsg.WriteTxnMarkersResponse)
	if len(wr.Markers) != 1 || len(wr.Markers[0].Topics) != 1 || len(wr.Markers[0].Topics[0].Partitions) != 1 {
		return fmt.Errorf("write transaction marker: node %d answered no partition", leader)
	}
	if code := wr.Markers[0].Topics[0].Partitions[0].ErrorCode; code != 0 {
		return kerr.ErrorForCode(code)
	}
	return nil
}

// txnGroups is txncoord's Groups with several nodes: a transaction's
// offsets are committed by the group's coordinator (a node call of
// OffsetCommit when it is another node).
type txnGroups struct{ s *Server }

func (g txnGroups) ValidateTxnCommit(group string, generation int32, memberID string, instanceID *string) int16 {
	return g.s.groups.ValidateTxnCommit(group, generation, memberID, instanceID)
}

func (g txnGroups) CommitTxnOffsets(ctx context.Context, req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	s := g.s
	if s.ownsGroup(req.Group) {
		return s.groups.CommitTxnOffsets(ctx, req)
	}
	v := s.cluster.View()
	code := kerr.NotCoordinator.Code
	if v.Ready {
		resp, err := s.fwd.call(ctx, v.Coordinator(req.Group), req)
		if err == nil {
			return resp.(*kmsg.OffsetCommitResponse)
		}
		s.log.Info("committing a transaction's offsets at the group's coordinator failed", zap.String("group", req.Group), zap.Error(err))
	}
	return refuseOffsetCommit(req, code)
}

// txnOffsetCommitCluster serves TxnOffsetCommit with several nodes at the
// group's coordinator (where clients send it): the member and generation
// checked here, then the offsets kept by the transactional id's
// coordinator (a node call when it is another node). Errors as
// TxnOffsetCommit, and NOT_COORDINATOR (this node does not coordinate the
// group, or the call failed: the client looks the coordinator up again).
func (c *conn) txnOffsetCommitCluster(ctx context.Context, r *kmsg.TxnOffsetCommitRequest) kmsg.Response {
	s := c.s
	if !s.ownsGroup(r.Group) {
		return refuseTxnOffsetCommit(r, kerr.NotCoordinator.Code)
	}
	if code := s.groups.ValidateTxnCommit(r.Group, r.Generation, r.MemberID, r.InstanceID); code != 0 {
		return refuseTxnOffsetCommit(r, code)
	}
	if s.txn.Owns(r.TransactionalID) {
		return s.txn.TxnOffsetCommit(txncoord.GroupChecked(ctx), r)
	}
	v := s.cluster.View()
	resp, err := s.fwd.call(ctx, v.TxnCoordinator(r.TransactionalID), r)
	if err != nil {
		c.log.Info("transactional offset commit not passed to the transaction's coordinator", zap.String("transactional_id", r.TransactionalID), zap.Error(err))
		return refuseTxnOffsetCommit(r, kerr.NotCoordinator.Code)
	}
	// The offsets are pending here from the answer on (OffsetFetch
	// require_stable answers UNSTABLE_OFFSET_COMMIT): read the record the
	// coordinator saved.
	if err := s.txn.CatchUp(ctx); err != nil {
		c.log.Info("transactional offset commit: reading the transaction records failed", zap.Error(err))
		return refuseTxnOffsetCommit(r, kerr.CoordinatorNotAvailable.Code)
	}
	return resp
}

// firstTxnBatchReadBytes is how much one read of firstTxnBatch asks the
// backend for, in bytes (a variable for tests).
var firstTxnBatchReadBytes = 1 << 20

// firstTxnBatchScanBytes bounds what firstTxnBatch reads for one
// transaction, in bytes: a new leader answers no read_committed read
// before it is done, and a transaction left open for its whole timeout
// on a busy partition spans a lot. A variable for tests.
var firstTxnBatchScanBytes = 64 << 20

// firstTxnBatch is txncoord's Config.FirstBatch: the base offset of the
// first transactional batch (not a control batch) of producer pid in the
// partition's offsets [from, to), or to when it has none. It reads the
// partition's batches from from (from its log start offset when from is
// below it), at most firstTxnBatchScanBytes: past that it returns the
// offset it reached (still at or below the transaction's first batch).
// Errors: the backend's Read.
func (s *Server) firstTxnBatch(ctx context.Context, stream string, part int32, pid int64, from, to int64) (int64, error) {
	read := 0
	for off := from; off < to; {
		if read >= firstTxnBatchScanBytes {
			s.log.Info("transaction's first batch not found within the bytes read for it: its first offset is where the read stopped",
				zap.String("stream", stream), zap.Int32("partition", part), zap.Int64("producer_id", pid),
				zap.Int64("from", from), zap.Int64("first_offset", off), zap.Int("bytes_read", read))
			return off, nil
		}
		res, err := s.backend.Read(ctx, stream, part, off, firstTxnBatchReadBytes)
		if errors.Is(err, disbackend.ErrOffsetOutOfRange) && off < res.Range.First {
			off = res.Range.First
			continue
		}
		if err != nil {
			return 0, err
		}
		if len(res.Batches) == 0 {
			break
		}
		read += res.Bytes
		for _, raw := range res.Batches {
			h, err := batch.ParseHeader(raw)
			if err != nil {
				return 0, err
			}
			if h.LastOffset() < off {
				continue
			}
			if h.BaseOffset >= to {
				return to, nil
			}
			if h.ProducerID == pid && h.Attributes&batch.AttrTransactional != 0 && h.Attributes&batch.AttrControl == 0 {
				return max(h.BaseOffset, from), nil
			}
			off = h.LastOffset() + 1
		}
	}
	return to, nil
}
