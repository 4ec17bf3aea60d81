package disrest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/disapi"
)

// GroupStream is the gateway-owned compacted stream (one partition, never
// listed as a topic) that keeps consumer groups' membership across gateway
// restarts, as Kafka keeps it in __consumer_offsets: a record per save,
// key the group id, value the coordinator's state, a tombstone when the
// group empties. The compactor keeps every live group's latest record.
const GroupStream = "__disgw_groups"

var _ disbackend.GroupStateStore = (*Store)(nil)

// ensureGroups creates GroupStream once per process (it may already
// exist) and has the compactor keep it.
func (s *Store) ensureGroups(ctx context.Context) error {
	return s.groupsOnce.do(func() error {
		cfg := disbackend.StreamConfig{CleanupPolicy: disbackend.CleanupCompact, MaxMessageBytes: maxRecordBytes,
			DeleteRetention: disbackend.DefaultDeleteRetention}
		err := s.createStream(ctx, GroupStream, 1, disapi.MaxRetentionHours, configTags(GroupStream, GroupStream, cfg))
		if err != nil && !errors.Is(err, disbackend.ErrStreamExists) {
			return err
		}
		st, err := s.DescribeStream(ctx, GroupStream)
		if err != nil {
			return err
		}
		s.compact.watch(st)
		return nil
	})
}

// SaveGroupState appends the group's state to GroupStream (a tombstone for
// nil) and returns once DIS has it. DIS PutRecords. Errors: ErrClosed,
// ErrUnavailable, ErrInvalidRecord (a state over DIS's 1 MB per record),
// or DIS's.
func (s *Store) SaveGroupState(ctx context.Context, group string, state []byte) error {
	if err := s.ensureGroups(ctx); err != nil {
		return fmt.Errorf("disrest: save group %q: %w", group, err)
	}
	recs := []disbackend.Record{{Key: []byte(group), Value: state, Timestamp: time.Now().UnixMilli()}}
	if _, err := s.appendFenced(partKey{GroupStream, 0}, recordsBatch(recs), nil, disbackend.GroupKey(group)).Wait(ctx); err != nil {
		return fmt.Errorf("disrest: save group %q: %w", group, err)
	}
	return nil
}

// GroupStates reads GroupStream from its start and returns each group's
// latest state (groups whose latest record is a tombstone are left out).
// DIS DescribeStream, GetCursor, GetRecords.
func (s *Store) GroupStates(ctx context.Context) (map[string][]byte, error) {
	if err := s.ensureGroups(ctx); err != nil {
		return nil, fmt.Errorf("disrest: group states: %w", err)
	}
	k := partKey{GroupStream, 0}
	for attempt := 0; ; attempt++ {
		r, err := s.describeRange(ctx, GroupStream, 0)
		if err != nil {
			return nil, fmt.Errorf("disrest: group states: %w", err)
		}
		out := map[string][]byte{}
		err = s.scan(ctx, k, r.First, r.Next, copyReadBytes, false, func(recs []fetched) bool {
			for i := range recs {
				if recs[i].rec.Value == nil {
					delete(out, string(recs[i].rec.Key))
				} else {
					out[string(recs[i].rec.Key)] = recs[i].rec.Value
				}
			}
			return true
		})
		if err == nil {
			return out, nil
		}
		if !errors.Is(err, disbackend.ErrOffsetOutOfRange) || attempt == 3 {
			return nil, fmt.Errorf("disrest: group states: %w", err)
		}
		// The start expired under the read: read again from the new start.
	}
}
