package txncoord

import (
	"context"
	"errors"
	"math"
	"regexp"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
)

var (
	codeInvalidProducerIDMapping = kerr.InvalidProducerIDMapping.Code
	codeInvalidProducerEpoch     = kerr.InvalidProducerEpoch.Code
	codeInvalidTxnState          = kerr.InvalidTxnState.Code
	codeProducerFenced           = kerr.ProducerFenced.Code
	codeConcurrent               = kerr.ConcurrentTransactions.Code
	codeNotAvailable             = kerr.CoordinatorNotAvailable.Code
)

// lookup returns the txn of id, locked, or nil. A txn found gone (expired
// while waiting) is looked up again. With several nodes (shared.go) it
// answers NOT_COORDINATOR for an id another node coordinates, and loads an
// id this node has not loaded since it gained it (a placeholder, PID -1,
// when it has no record), or answers that loading's error.
func (c *Coordinator) lookup(ctx context.Context, id string) (*txn, int16) {
	if !c.Owns(id) {
		return nil, codeNotCoordinator
	}
	for {
		c.mu.Lock()
		t := c.txns[id]
		if t == nil && c.cfg.Shared != nil {
			t = &txn{rec: record{ID: id, PID: -1, LastPID: -1, LastEpoch: -1}}
			c.txns[id] = t
		}
		c.mu.Unlock()
		if t == nil {
			return nil, 0
		}
		t.mu.Lock()
		if !t.gone && c.cfg.Shared != nil && !t.auth {
			if code := c.loadOwned(ctx, t); code != 0 {
				t.mu.Unlock()
				return nil, code
			}
		}
		if !t.gone {
			return t, 0
		}
		t.mu.Unlock()
	}
}

// checkProducer checks a request's producer id and epoch against t
// (Kafka TransactionCoordinator): another producer id gets
// INVALID_PRODUCER_ID_MAPPING, another epoch PRODUCER_FENCED, or
// INVALID_PRODUCER_EPOCH for a request older than fencedSince, its first
// version that knows PRODUCER_FENCED (KIP-588). Requires t.mu.
func checkProducer(t *txn, pid int64, epoch int16, version, fencedSince int16) int16 {
	switch {
	case t == nil || t.rec.PID < 0 || t.rec.PID != pid:
		return codeInvalidProducerIDMapping
	case t.rec.Epoch != epoch:
		return fencedCode(version, fencedSince)
	}
	return 0
}

// fencedCode is PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH for a request
// version below fencedSince (KIP-588: InitProducerId v4, AddPartitionsToTxn
// v2, AddOffsetsToTxn v2, EndTxn v2, TxnOffsetCommit v3).
func fencedCode(version, fencedSince int16) int16 {
	if version < fencedSince {
		return codeInvalidProducerEpoch
	}
	return codeProducerFenced
}

// InitProducerID serves InitProducerId with a transactional id (API key
// 22, v0-5; the gateway serves those without one). A new id gets a new
// producer id at epoch 0; a known one its epoch bumped (a new producer id
// once the epoch is exhausted), after its open transaction, if any, is
// aborted and a half-ended one completed, which fences the previous
// producer (Kafka TransactionCoordinator.handleInitProducerId). v3+ with a
// producer id and epoch (KIP-360) must name the current pair (bumped) or
// the pair the last bump left (a retry: answered with the current one),
// else PRODUCER_FENCED. Errors: INVALID_REQUEST (an empty id, or one over
// 32767 bytes),
// INVALID_TRANSACTION_TIMEOUT (timeout <= 0 or above MaxTimeout),
// CONCURRENT_TRANSACTIONS (the previous transaction could not be finished
// yet: retried by clients), COORDINATOR_NOT_AVAILABLE (the state could
// not be saved).
func (c *Coordinator) InitProducerID(ctx context.Context, r *kmsg.InitProducerIDRequest) *kmsg.InitProducerIDResponse {
	resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	id := *r.TransactionalID
	switch {
	case id == "" || len(id) > math.MaxInt16:
		// Kafka's request parser refuses a string longer than 32767
		// bytes; kept, such an id would break the Java admin client's
		// ListTransactions for everyone.
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	case r.TransactionTimeoutMillis <= 0 || int64(r.TransactionTimeoutMillis) > c.cfg.MaxTimeout.Milliseconds():
		resp.ErrorCode = kerr.InvalidTransactionTimeout.Code
		return resp
	}
	t, code := c.lookup(ctx, id)
	if code != 0 {
		resp.ErrorCode = code
		return resp
	}
	if t == nil {
		c.mu.Lock()
		if t = c.txns[id]; t == nil {
			t = &txn{rec: record{ID: id, PID: -1, LastPID: -1, LastEpoch: -1}}
			t.mu.Lock()
			c.txns[id] = t
			c.mu.Unlock()
		} else {
			c.mu.Unlock()
			return c.InitProducerID(ctx, r) // made meanwhile
		}
	}
	defer t.mu.Unlock()
	if t.rec.PID < 0 {
		// A new transactional id.
		pid, _, err := c.be.InitProducerID(ctx)
		if err == nil {
			next := t.rec
			next.PID, next.Epoch, next.TimeoutMS, next.State, next.UpdateMS = pid, 0, r.TransactionTimeoutMillis, Empty, c.nowMS()
			if err = c.saveRec(ctx, &next); err == nil {
				c.update(t, func(rec *record) { *rec = next })
			}
		}
		if err != nil {
			c.log.Warn("init transactional producer failed", zap.String("transactional_id", id), zap.Error(err))
			c.mu.Lock()
			if t.rec.PID < 0 {
				delete(c.txns, id)
				t.gone = true
			}
			c.mu.Unlock()
			resp.ErrorCode = codeNotAvailable
			return resp
		}
		resp.ProducerID, resp.ProducerEpoch = t.rec.PID, t.rec.Epoch
		return resp
	}
	if r.ProducerID >= 0 {
		switch {
		case r.ProducerID == t.rec.LastPID && r.ProducerEpoch == t.rec.LastEpoch && t.rec.State != Ongoing:
			// A retry of the InitProducerId that made the current pair.
			resp.ProducerID, resp.ProducerEpoch = t.rec.PID, t.rec.Epoch
			return resp
		case r.ProducerID != t.rec.PID || r.ProducerEpoch != t.rec.Epoch:
			resp.ErrorCode = fencedCode(r.Version, 4)
			return resp
		}
	}
	if code := c.finishForInit(ctx, t); code != 0 {
		resp.ErrorCode = code
		return resp
	}
	prev := t.rec
	if err := c.bumpEpoch(ctx, t); err == nil {
		c.update(t, func(rec *record) {
			// As Kafka: the id is Empty again under its new epoch.
			rec.TimeoutMS, rec.UpdateMS, rec.State = r.TransactionTimeoutMillis, c.nowMS(), Empty
		})
		if err = c.save(ctx, t); err != nil {
			c.update(t, func(rec *record) { *rec = prev })
			c.log.Warn("init transactional producer failed", zap.String("transactional_id", id), zap.Error(err))
			resp.ErrorCode = codeNotAvailable
			return resp
		}
	} else {
		resp.ErrorCode = codeNotAvailable
		return resp
	}
	resp.ProducerID, resp.ProducerEpoch = t.rec.PID, t.rec.Epoch
	return resp
}

// finishForInit ends t's transaction before a new producer takes the id:
// an open one is aborted (fencing its producer), a half-ended one
// completed. Returns CONCURRENT_TRANSACTIONS when that cannot be done now.
// Requires t.mu.
func (c *Coordinator) finishForInit(ctx context.Context, t *txn) int16 {
	if t.rec.State == Ongoing {
		if err := c.prepare(ctx, t, false, true); err != nil {
			c.log.Warn("aborting the previous transaction failed", zap.String("transactional_id", t.rec.ID), zap.Error(err))
			return codeConcurrent
		}
	}
	if t.rec.State == PrepareCommit || t.rec.State == PrepareAbort {
		if err := c.complete(ctx, t); err != nil {
			c.log.Warn("completing the previous transaction failed", zap.String("transactional_id", t.rec.ID), zap.Error(err))
			return codeConcurrent
		}
	}
	return 0
}

// install saves next as t's record and, once it is synced, makes it t's;
// a failure is logged (what names the request) and changes nothing.
// Requires t.mu.
func (c *Coordinator) install(ctx context.Context, t *txn, next *record, what string) error {
	if err := c.saveRec(ctx, next); err != nil {
		c.log.Warn(what+" failed", zap.String("transactional_id", t.rec.ID), zap.Error(err))
		return err
	}
	c.update(t, func(rec *record) { *rec = *next })
	return nil
}

// begin checks t can take a new partition or group and starts a
// transaction when none is open. Returns 0 or CONCURRENT_TRANSACTIONS (one
// is ending). Requires t.mu.
func (c *Coordinator) begin(t *txn, next *record) int16 {
	switch t.rec.State {
	case PrepareCommit, PrepareAbort:
		return codeConcurrent
	case Ongoing:
		return 0
	}
	next.State, next.StartMS = Ongoing, c.nowMS()
	next.Parts, next.Groups, next.Offsets = nil, nil, nil
	next.Seq++
	return 0
}

// AddPartitions serves AddPartitionsToTxn v0-3 (API key 24, the client
// form): it adds the partitions to the producer's transaction, starting
// one if none is open, and saves it before answering. Errors, for every
// partition: INVALID_REQUEST (an empty transactional id, as AddOffsets and
// EndTxn), INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED,
// CONCURRENT_TRANSACTIONS, COORDINATOR_NOT_AVAILABLE; an unknown topic or
// partition gets UNKNOWN_TOPIC_OR_PARTITION, a topic that refuses
// transactions its Topic.Refused code (UNSUPPORTED_FOR_MESSAGE_FORMAT),
// and the others OPERATION_NOT_ATTEMPTED, as Kafka answers.
func (c *Coordinator) AddPartitions(ctx context.Context, r *kmsg.AddPartitionsToTxnRequest) *kmsg.AddPartitionsToTxnResponse {
	resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	codes := make([][]int16, len(r.Topics))
	topics := make([]Topic, len(r.Topics))
	refused := false
	for i, rt := range r.Topics {
		codes[i] = make([]int16, len(rt.Partitions))
		tp, ok := c.topics.Topic(ctx, rt.Topic)
		topics[i] = tp
		for j, p := range rt.Partitions {
			switch {
			case !ok || p < 0 || p >= tp.Partitions:
				codes[i][j], refused = kerr.UnknownTopicOrPartition.Code, true
			case tp.Refused != 0:
				codes[i][j], refused = tp.Refused, true
			}
		}
	}
	answer := func(all int16) *kmsg.AddPartitionsToTxnResponse {
		for i, rt := range r.Topics {
			t := kmsg.NewAddPartitionsToTxnResponseTopic()
			t.Topic = rt.Topic
			for j, p := range rt.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, codes[i][j]
				if rp.ErrorCode == 0 {
					rp.ErrorCode = all
				}
				t.Partitions = append(t.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp
	}
	if r.TransactionalID == "" {
		return answer(kerr.InvalidRequest.Code) // as Kafka, before anything else
	}
	if refused {
		return answer(kerr.OperationNotAttempted.Code)
	}
	t, code := c.lookup(ctx, r.TransactionalID)
	if code != 0 {
		return answer(code)
	}
	if t == nil {
		return answer(codeInvalidProducerIDMapping)
	}
	defer t.mu.Unlock()
	if code := checkProducer(t, r.ProducerID, r.ProducerEpoch, r.Version, 2); code != 0 {
		return answer(code)
	}
	next := t.rec
	if code := c.begin(t, &next); code != 0 {
		return answer(code)
	}
	next.Parts = slices.Clone(next.Parts)
	var added []txnPart
	for i, rt := range r.Topics {
		for _, p := range rt.Partitions {
			if slices.ContainsFunc(next.Parts, func(x txnPart) bool { return x.TopicID == topics[i].ID && x.Partition == p }) {
				continue
			}
			rng, err := c.firstRange(ctx, topics[i].Stream, p)
			if err != nil {
				c.log.Warn("add partitions to transaction: range failed", zap.String("topic", rt.Topic), zap.Error(err))
				return answer(codeNotAvailable)
			}
			tp := txnPart{Topic: rt.Topic, Stream: topics[i].Stream, TopicID: topics[i].ID, Partition: p, FirstOffset: rng.Next}
			next.Parts = append(next.Parts, tp)
			added = append(added, tp)
		}
	}
	if len(added) == 0 && next.State == t.rec.State {
		return answer(0)
	}
	next.UpdateMS = c.nowMS()
	// The partitions hold the last stable offset back from before the
	// save: a batch of the transaction can only follow the answer.
	c.mu.Lock()
	for i := range added {
		c.openPart(t, &added[i])
	}
	c.mu.Unlock()
	if err := c.install(ctx, t, &next, "add partitions to transaction"); err != nil {
		c.mu.Lock()
		for i := range added {
			c.unopen(added[i].key(), t)
		}
		c.mu.Unlock()
		return answer(codeNotAvailable)
	}
	return answer(0)
}

// AddOffsets serves AddOffsetsToTxn (API key 25, v0-4): it adds group to
// the producer's transaction, starting one if none is open. Errors:
// INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, CONCURRENT_TRANSACTIONS,
// COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) AddOffsets(ctx context.Context, r *kmsg.AddOffsetsToTxnRequest) *kmsg.AddOffsetsToTxnResponse {
	resp := r.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	if r.TransactionalID == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	t, code := c.lookup(ctx, r.TransactionalID)
	if code != 0 {
		resp.ErrorCode = code
		return resp
	}
	if t == nil {
		resp.ErrorCode = codeInvalidProducerIDMapping
		return resp
	}
	defer t.mu.Unlock()
	if resp.ErrorCode = checkProducer(t, r.ProducerID, r.ProducerEpoch, r.Version, 2); resp.ErrorCode != 0 {
		return resp
	}
	next := t.rec
	if resp.ErrorCode = c.begin(t, &next); resp.ErrorCode != 0 {
		return resp
	}
	if slices.Contains(next.Groups, r.Group) && next.State == t.rec.State {
		return resp
	}
	if !slices.Contains(next.Groups, r.Group) {
		next.Groups = append(slices.Clone(next.Groups), r.Group)
	}
	next.UpdateMS = c.nowMS()
	if err := c.install(ctx, t, &next, "add offsets to transaction"); err != nil {
		resp.ErrorCode = codeNotAvailable
	}
	return resp
}

// TxnOffsetCommit serves TxnOffsetCommit (API key 28, v0-4): the offsets
// are kept in the transaction and applied to the group when it commits.
// The group must have been added (AddOffsetsToTxn), else
// INVALID_TXN_STATE; the member and generation (v3+, KIP-447) are checked
// by the group coordinator (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
// FENCED_INSTANCE_ID). Other errors, for every partition:
// INVALID_PRODUCER_ID_MAPPING, INVALID_PRODUCER_EPOCH (a fenced producer,
// at every version, as Kafka's group coordinator answers),
// COORDINATOR_NOT_AVAILABLE;
// an unknown topic or partition gets UNKNOWN_TOPIC_OR_PARTITION.
func (c *Coordinator) TxnOffsetCommit(ctx context.Context, r *kmsg.TxnOffsetCommitRequest) *kmsg.TxnOffsetCommitResponse {
	resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	codes := make([][]int16, len(r.Topics))
	for i, rt := range r.Topics {
		codes[i] = make([]int16, len(rt.Partitions))
		tp, ok := c.topics.Topic(ctx, rt.Topic)
		for j, p := range rt.Partitions {
			if !ok || p.Partition < 0 || p.Partition >= tp.Partitions {
				codes[i][j] = kerr.UnknownTopicOrPartition.Code
			}
		}
	}
	answer := func(all int16) *kmsg.TxnOffsetCommitResponse {
		for i, rt := range r.Topics {
			t := kmsg.NewTxnOffsetCommitResponseTopic()
			t.Topic = rt.Topic
			for j, p := range rt.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, codes[i][j]
				if rp.ErrorCode == 0 {
					rp.ErrorCode = all
				}
				t.Partitions = append(t.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp
	}
	t, code := c.lookup(ctx, r.TransactionalID)
	if code != 0 {
		return answer(code)
	}
	if t == nil {
		return answer(codeInvalidProducerIDMapping)
	}
	defer t.mu.Unlock()
	// The group coordinator answers a fenced TxnOffsetCommit with
	// INVALID_PRODUCER_EPOCH at every version (Kafka 4.4).
	if code := checkProducer(t, r.ProducerID, r.ProducerEpoch, r.Version, math.MaxInt16); code != 0 {
		return answer(code)
	}
	if t.rec.State != Ongoing || !slices.Contains(t.rec.Groups, r.Group) {
		return answer(codeInvalidTxnState)
	}
	if ctx.Value(groupCheckedKey{}) == nil {
		if code := c.groups.ValidateTxnCommit(r.Group, r.Generation, r.MemberID, r.InstanceID); code != 0 {
			return answer(code)
		}
	}
	next := t.rec
	next.Offsets = map[string][]txnOffset{}
	for g, l := range t.rec.Offsets {
		next.Offsets[g] = slices.Clone(l)
	}
	offs := next.Offsets[r.Group]
	for i, rt := range r.Topics {
		for j, p := range rt.Partitions {
			if codes[i][j] != 0 {
				continue
			}
			o := txnOffset{Topic: rt.Topic, Partition: p.Partition, Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata}
			if r.Version < 2 {
				o.LeaderEpoch = -1
			}
			k := slices.IndexFunc(offs, func(x txnOffset) bool { return x.Topic == o.Topic && x.Partition == o.Partition })
			if k >= 0 {
				offs[k] = o
			} else {
				offs = append(offs, o)
			}
		}
	}
	next.Offsets[r.Group] = offs
	next.UpdateMS = c.nowMS()
	if err := c.install(ctx, t, &next, "transactional offset commit"); err != nil {
		return answer(codeNotAvailable)
	}
	return answer(0)
}

type groupCheckedKey struct{}

// GroupChecked returns ctx marked for TxnOffsetCommit: the group's
// coordinator has checked the request's member and generation (with
// several nodes, another node), so they are not checked again.
func GroupChecked(ctx context.Context) context.Context {
	return context.WithValue(ctx, groupCheckedKey{}, true)
}

// EndTxn serves EndTxn (API key 26, v0-4): it commits or aborts the
// producer's transaction and answers once its markers are written and,
// for a commit, its offsets applied. A retry of an ended transaction with
// the same outcome succeeds. Errors: INVALID_PRODUCER_ID_MAPPING,
// PRODUCER_FENCED, INVALID_TXN_STATE (no transaction open, or the other
// outcome already decided), CONCURRENT_TRANSACTIONS (the outcome is
// saved but the markers or offsets could not all be written yet: the
// client retries, and the coordinator's loop finishes it meanwhile),
// COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) EndTxn(ctx context.Context, r *kmsg.EndTxnRequest) *kmsg.EndTxnResponse {
	resp := r.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if r.TransactionalID == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	t, code := c.lookup(ctx, r.TransactionalID)
	if code != 0 {
		resp.ErrorCode = code
		return resp
	}
	if t == nil {
		resp.ErrorCode = codeInvalidProducerIDMapping
		return resp
	}
	defer t.mu.Unlock()
	if resp.ErrorCode = checkProducer(t, r.ProducerID, r.ProducerEpoch, r.Version, 2); resp.ErrorCode != 0 {
		return resp
	}
	switch st := t.rec.State; {
	case st == Ongoing:
		if err := c.prepare(ctx, t, r.Commit, false); err != nil {
			c.log.Warn("end transaction failed", zap.String("transactional_id", t.rec.ID), zap.Error(err))
			resp.ErrorCode = codeNotAvailable
			return resp
		}
	case st == PrepareCommit && r.Commit, st == PrepareAbort && !r.Commit:
		// A retry: finish what was decided.
	case st == CompleteCommit && r.Commit, st == CompleteAbort && !r.Commit:
		return resp
	default:
		resp.ErrorCode = codeInvalidTxnState
		return resp
	}
	if err := c.complete(ctx, t); err != nil {
		level := zap.WarnLevel
		if errors.Is(err, context.Canceled) {
			level = zap.DebugLevel
		}
		c.log.Log(level, "end transaction: not completed yet, will retry", zap.String("transactional_id", t.rec.ID), zap.Error(err))
		resp.ErrorCode = codeConcurrent
	}
	return resp
}

// Described is a transactional id's state for DescribeTransactions and
// ListTransactions.
type Described struct {
	ID         string
	State      State
	ProducerID int64
	Epoch      int16
	TimeoutMS  int32
	StartMS    int64 // when the last transaction started, ms; -1 before the first
	Partitions map[string][]int32
}

// Describe returns the state of a transactional id; ok false when unknown
// (DescribeTransactions answers TRANSACTIONAL_ID_NOT_FOUND).
func (c *Coordinator) Describe(id string) (Described, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.txns[id]
	if t == nil || t.rec.PID < 0 || !c.Owns(id) {
		return Described{}, false
	}
	return describe(t), true
}

func open(s State) bool { return s == Ongoing || s == PrepareCommit || s == PrepareAbort }

func describe(t *txn) Described {
	d := Described{ID: t.rec.ID, State: t.rec.State, ProducerID: t.rec.PID, Epoch: t.rec.Epoch,
		TimeoutMS: t.rec.TimeoutMS, StartMS: -1, Partitions: map[string][]int32{}}
	if t.rec.StartMS > 0 {
		d.StartMS = t.rec.StartMS // as Kafka, kept once the transaction ended
	}
	for _, p := range t.rec.Parts {
		d.Partitions[p.Topic] = append(d.Partitions[p.Topic], p.Partition)
	}
	return d
}

// List returns the transactional ids in the given states (any when
// empty), of the given producer ids (any when empty), open for at least
// minDurationMS (ms; <= 0: any) and whose id matches pattern (nil: any),
// as ListTransactions v0-2 filters.
func (c *Coordinator) List(states []string, pids []int64, minDurationMS int64, pattern *regexp.Regexp) []Described {
	now := c.nowMS()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Described
	for _, t := range c.txns {
		if t.rec.PID < 0 || !c.Owns(t.rec.ID) {
			continue // with several nodes each lists its own, as Kafka's brokers
		}
		d := describe(t)
		switch {
		case len(states) > 0 && !slices.Contains(states, d.State.String()):
			continue
		case len(pids) > 0 && !slices.Contains(pids, d.ProducerID):
			continue
		case minDurationMS > 0 && (!open(d.State) || now-d.StartMS < minDurationMS):
			continue
		case pattern != nil && !pattern.MatchString(d.ID):
			continue
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Described) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out
}

// firstRange is a partition's range for a transaction's first offset
// there: with several nodes read from the store (another node, its
// leader, wrote the markers before it), else the backend's.
func (c *Coordinator) firstRange(ctx context.Context, stream string, part int32) (disbackend.PartitionRange, error) {
	if c.cfg.Shared != nil {
		return c.cfg.Shared.FreshRange(ctx, stream, part)
	}
	return c.be.Range(stream, part)
}
