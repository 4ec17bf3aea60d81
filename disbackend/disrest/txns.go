package disrest

import (
	"context"
	"errors"
	"fmt"
	"math"

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

// noFenceKey is the fence key of a TxnStream write: none. The transaction
// coordinator runs on a single node only (docs/transactions.md).
func noFenceKey(string) string { return "" }

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
