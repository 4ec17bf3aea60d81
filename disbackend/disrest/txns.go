package disrest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/disgw/disgw/disbackend"
)

// TxnStream is the gateway-owned compacted stream (one partition, never
// listed as a topic) that keeps the transaction coordinator's records
// (disbackend.TxnStateStore, docs/transactions.md), as Kafka keeps them in
// __transaction_state: a record per save, key the coordinator's key (a
// transactional id's, or an aborted range's), value the coordinator's
// record, a tombstone when it is deleted. It works as GroupStream does
// (groups.go): each record carries a version in header TxnVersionHeader,
// a reader keeps each key's record of the highest version, and the
// compactor keeps every live key's latest record.
const TxnStream = "__disgw_txns"

// TxnVersionHeader is the record header of TxnStream holding a record's
// version (decimal).
const TxnVersionHeader = "disgw.txn.version"

var (
	_ disbackend.TxnStateStore = (*Store)(nil)
	_ disbackend.TxnCleaner    = (*Store)(nil)
)

// SetTxnView gives the compactor the transactions (the gateway's
// transaction coordinator): it indexes a compacted partition's
// transactional records only below its last stable offset, leaves out
// those of aborted transactions, and copies no key with a record of a
// transaction not yet ended (implements disbackend.TxnCleaner).
func (s *Store) SetTxnView(v disbackend.TxnView) { s.txnView.Store(&v) }

// txnState is partition k's aborted ranges and last stable offset
// (math.MaxInt64 when no transaction is open there); ok is false without
// a view (no coordinator runs, or not yet): then no transaction's outcome
// is known.
func (s *Store) txnState(k partKey) (aborted []disbackend.AbortedRange, lastStable int64, ok bool) {
	v := s.txnView.Load()
	if v == nil {
		return nil, math.MaxInt64, false
	}
	aborted, lastStable = (*v)(k.stream, k.part)
	return aborted, lastStable, true
}

var _ disbackend.TxnShared = (*Store)(nil)

// txnFenceKey is the fence key of a TxnStream write of key: a
// transactional id's record ("t/<id>") is its coordinator's
// (disbackend.TxnKey); the others (aborted ranges, written by a
// partition's leader) are not fenced (disbackend.TxnShared).
func txnFenceKey(key string) string {
	if strings.HasPrefix(key, disbackend.TxnKey("")) {
		return key
	}
	return ""
}

// WatchTxnRecords has f called with every TxnStream record this Store
// takes from then on (implements disbackend.TxnShared): read (at a load, a
// catch-up, the tail of cluster mode) or saved by it.
func (s *Store) WatchTxnRecords(f func(key string, value []byte)) {
	s.txns.mu.Lock()
	s.txns.onApply = f
	s.txns.mu.Unlock()
}

// CatchUpTxns reads TxnStream up to its end as DIS describes it now
// (implements disbackend.TxnShared); nothing while the stream does not
// exist. DIS DescribeStream, GetCursor, GetRecords.
func (s *Store) CatchUpTxns(ctx context.Context) error {
	if !s.txns.once.isDone() {
		_, err := s.DescribeStream(ctx, TxnStream)
		switch {
		case errors.Is(err, disbackend.ErrStreamNotFound):
			return nil
		case err != nil:
			return fmt.Errorf("disrest: transaction records: %w", err)
		}
	}
	if err := s.loadTable(ctx, &s.txns, true); err != nil {
		return fmt.Errorf("disrest: transaction records: %w", err)
	}
	return nil
}

// TxnRecord returns key's latest TxnStream record (nil when there is none
// or it was deleted) once this node may write it: in cluster mode after
// the fence's takeover of the key (its previous coordinator's writes can
// no longer land), then a catch-up (implements disbackend.TxnShared).
// Errors: ErrNotCoordinator (another node owns the key), ErrClosed, DIS's.
func (s *Store) TxnRecord(ctx context.Context, key string) ([]byte, error) {
	if err := s.groupWrite(ctx, txnFenceKey(key)); err != nil {
		return nil, fmt.Errorf("disrest: transaction record %q: %w", key, err)
	}
	if err := s.CatchUpTxns(ctx); err != nil {
		return nil, err
	}
	t := &s.txns
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.m[key]; e != nil && e.read {
		return e.state, nil
	}
	return nil, nil
}

// FreshRange reads a partition's range from DIS (DescribeStream), not from
// the cache (implements disbackend.TxnShared): the first offset of a
// transaction on a partition must be at or past the markers written there
// before.
func (s *Store) FreshRange(ctx context.Context, stream string, part int32) (disbackend.PartitionRange, error) {
	return s.describeRange(ctx, stream, part)
}

// SaveTxnRecord appends value under key to TxnStream (a tombstone for nil)
// with the key's next version and returns once DIS has it (implements
// disbackend.TxnStateStore). DIS PutRecords (and, at the first call,
// CreateStream, DescribeStream, GetCursor and GetRecords of the stream).
// Errors: ErrClosed, ErrUnavailable, ErrInvalidRecord (a value over DIS's
// 1 MB per record), or DIS's.
func (s *Store) SaveTxnRecord(ctx context.Context, key string, value []byte) error {
	if err := s.saveKeyed(ctx, &s.txns, key, value); err != nil {
		return fmt.Errorf("disrest: save transaction record %q: %w", key, err)
	}
	return nil
}

// TxnRecords returns every key's latest record of TxnStream (keys whose
// latest record is a tombstone are left out), reading the stream up to its
// end (implements disbackend.TxnStateStore); none while the stream does
// not exist: it is created at the first SaveTxnRecord, so a project whose
// gateways never see a transactional id has no TxnStream. DIS
// DescribeStream, GetCursor, GetRecords.
func (s *Store) TxnRecords(ctx context.Context) (map[string][]byte, error) {
	if !s.txns.once.isDone() {
		_, err := s.DescribeStream(ctx, TxnStream)
		switch {
		case errors.Is(err, disbackend.ErrStreamNotFound):
			return map[string][]byte{}, nil
		case err != nil:
			return nil, fmt.Errorf("disrest: transaction records: %w", err)
		}
	}
	out, err := s.keyedAll(ctx, &s.txns)
	if err != nil {
		return nil, fmt.Errorf("disrest: transaction records: %w", err)
	}
	return out, nil
}
