package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/kafkawire/batch"
	"github.com/disgw/disgw/txncoord"
)

// Transactions (docs/transactions.md): the transaction coordinator
// (txncoord) runs when the backend keeps its state
// (disbackend.TxnStateStore: the embedded store, and DIS in TxnStream) on
// one node. Without it a transactional id is refused with
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED.

// newTxnCoordinator starts the transaction coordinator, or returns nil when
// the backend keeps no transaction state (or, with several nodes, does not
// share it: disbackend.TxnShared).
func newTxnCoordinator(cfg Config, backend disbackend.Backend, s *Server) (*txncoord.Coordinator, error) {
	ts, ok := backend.(disbackend.TxnStateStore)
	if !ok {
		return nil, nil
	}
	be, ok := backend.(txncoord.Backend)
	if !ok || ts == nil {
		return nil, nil
	}
	tcfg := txncoord.Config{
		MaxTimeout:    cfg.TransactionMaxTimeout,
		IDExpiration:  cfg.TransactionalIDExpiration,
		CheckInterval: cfg.TransactionCheckInterval,
		NodeID:        cfg.NodeID,
		LeaderEpoch:   s.writeEpoch,
		Logger:        s.log.Named("txn"),
	}
	var groups txncoord.Groups = s.groups
	if s.cluster != nil {
		shared, ok := backend.(disbackend.TxnShared)
		if !ok {
			return nil, nil
		}
		tcfg.Shared, tcfg.Owns, tcfg.Leads, tcfg.SendMarker = shared, s.ownsTxn, s.leads, s.sendMarker
		tcfg.FirstBatch = s.firstTxnBatch
		groups = txnGroups{s}
	}
	tc, err := txncoord.New(context.Background(), tcfg, be, txnTopics{s}, groups)
	if err != nil {
		return nil, fmt.Errorf("gateway: transaction coordinator: %w", err)
	}
	if tcl, ok := backend.(disbackend.TxnCleaner); ok {
		tcl.SetTxnView(tc.CleanerView) // the log cleaner keeps to the last stable offset and drops aborted records
	}
	return tc, nil
}

// txnTopics gives txncoord the topic cache's view of topics.
type txnTopics struct{ s *Server }

func (t txnTopics) Topic(ctx context.Context, name string) (txncoord.Topic, bool) {
	st := t.s.topicNamed(ctx, name)
	if st == nil {
		return txncoord.Topic{}, false
	}
	tp := txncoord.Topic{Stream: st.Name, ID: st.TopicID, Partitions: st.PartitionCount}
	if t.s.storesRecords && cmp.Or(st.Config.RecordFormat, t.s.cfg.DefaultRecordFormat) == disbackend.RecordFormatNative {
		tp.Refused = kerr.UnsupportedForMessageFormat.Code // a transaction's records need the envelope (DIS)
	}
	return tp, true
}

// errNoTransactions: a transactional request to a gateway without a
// transaction coordinator.
var errNoTransactions = errors.New("this gateway's backend keeps no transaction state")

// verifyTxn checks a produced batch against the transaction coordinator
// before it is queued (Kafka's transaction verification, KIP-890 part 1):
// a batch with the transactional bit needs a transactional id, a
// transactional id needs the coordinator, and the coordinator must find the
// producer's transaction open with the partition added. It returns the
// release to call once the append has ended (nil when there is nothing to
// release). Errors (kerr): TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
// INVALID_PRODUCER_ID_MAPPING, INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE,
// INVALID_RECORD (a transactional id with a batch that is not transactional).
func (c *conn) verifyTxn(txnID *string, st *disbackend.Stream, part int32, h *batch.Header) (func(), error) {
	transactional := h.Attributes&batch.AttrTransactional != 0
	switch {
	case txnID == nil && !transactional:
		return nil, nil
	case txnID == nil:
		return nil, kerrWrap(kerr.TransactionalIDAuthorizationFailed, "a transactional batch needs the request's transactional id")
	case c.s.txn == nil:
		return nil, kerrWrap(kerr.TransactionalIDAuthorizationFailed, errNoTransactions.Error())
	case !transactional:
		return nil, kerrWrap(kerr.InvalidRecord, "a request with a transactional id must carry transactional batches")
	}
	release, code := c.s.txn.VerifyProduce(c.backendCtx(), *txnID, h.ProducerID, h.ProducerEpoch, st.TopicID, part)
	if code != 0 {
		c.log.Debug("transactional produce refused", zap.String("transactional_id", *txnID), zapTopic(st.TopicName),
			zapPartition(part), zap.Int16("code", code))
		return nil, &txnRefusal{code}
	}
	return release, nil
}

// txnRefusal is a produce the transaction coordinator refused: answered
// with its code and, as Kafka answers a failed verification, no message.
type txnRefusal struct{ code int16 }

func (e *txnRefusal) Error() string { return kerr.ErrorForCode(e.code).Error() }

// message is what Kafka 4.4 says with the refusal: only a partition not
// added has one.
func (e *txnRefusal) message() *string {
	if e.code == kerr.InvalidTxnState.Code {
		m := "Partition was not added to the transaction"
		return &m
	}
	return nil
}
func (e *txnRefusal) Unwrap() error { return kerr.ErrorForCode(e.code) }

// answeredStable notes that this node answered lso as the partition's last
// stable offset to a read_committed reader (with several nodes, as its
// leader: committedReadable).
func (s *Server) answeredStable(st *disbackend.Stream, part int32, lso int64) {
	if s.txn != nil {
		s.txn.Answered(st.TopicID, part, lso)
	}
}

// lastStable is a partition's last stable offset for its high watermark
// hw: hw when no transaction is open there (or none are served).
func (s *Server) lastStable(st *disbackend.Stream, part int32, hw int64) int64 {
	if s.txn == nil {
		return hw
	}
	return s.txn.LastStableOffset(st.TopicID, part, hw)
}
