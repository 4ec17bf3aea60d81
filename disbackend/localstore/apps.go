package localstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/cockroachdb/pebble/v2"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
)

// Apps and checkpoints live in Pebble (keys.go):
//
//	'A' app                          app (JSON disbackend.App)
//	'K' app 0x00 stream 0x00 part    LAST_READ checkpoint (checkpointValue)
//
// App and stream names never hold 0x00, so a checkpoint key's app and
// stream parts end where the 0x00 is, and key order is (app, stream,
// partition) order. Every write is one synced Pebble batch, under appsMu.

const (
	checkpointVersion      = 1 // no leader epoch (read as -1)
	checkpointVersionEpoch = 2 // with the leader epoch after committed-at
)

func appKey(name string) []byte {
	return append([]byte{prefixApp}, name...)
}

// checkpointPrefix returns 'K' app 0x00, plus stream 0x00 when stream is
// not empty.
func checkpointPrefix(app, stream string) []byte {
	k := make([]byte, 0, 3+len(app)+len(stream)+4)
	k = append(k, prefixCheckpoint)
	k = append(k, app...)
	k = append(k, 0)
	if stream != "" {
		k = append(k, stream...)
		k = append(k, 0)
	}
	return k
}

func checkpointKey(app, stream string, part int32) []byte {
	return binary.BigEndian.AppendUint32(checkpointPrefix(app, stream), uint32(part))
}

// prefixEnd returns the smallest key above every key with prefix p (p ends
// in 0x00 or is a one-byte kind, so incrementing the last byte is enough).
func prefixEnd(p []byte) []byte {
	e := bytes.Clone(p)
	e[len(e)-1]++
	return e
}

// encodeCheckpoint: version, sequence number, committed-at (ns since the
// Unix epoch), leader epoch (int32), metadata. Version 1 (written before
// the leader epoch was kept) has no leader epoch.
func encodeCheckpoint(cp disbackend.Checkpoint) []byte {
	v := make([]byte, 0, 21+len(cp.Metadata))
	v = append(v, checkpointVersionEpoch)
	v = binary.BigEndian.AppendUint64(v, uint64(cp.SequenceNumber))
	v = binary.BigEndian.AppendUint64(v, uint64(cp.CommittedAt.UnixNano()))
	v = binary.BigEndian.AppendUint32(v, uint32(cp.LeaderEpoch))
	return append(v, cp.Metadata...)
}

func decodeCheckpoint(key, v []byte, appLen int) (disbackend.Checkpoint, error) {
	rest := key[1+appLen+1:]
	i := bytes.IndexByte(rest, 0)
	if len(v) < 17 || i < 0 || len(rest) != i+5 ||
		v[0] != checkpointVersion && (v[0] != checkpointVersionEpoch || len(v) < 21) {
		return disbackend.Checkpoint{}, fmt.Errorf("checkpoint %x: %w", key, errCorrupt)
	}
	cp := disbackend.Checkpoint{
		Stream:         string(rest[:i]),
		Partition:      int32(binary.BigEndian.Uint32(rest[i+1:])),
		SequenceNumber: int64(binary.BigEndian.Uint64(v[1:])),
		CommittedAt:    time.Unix(0, int64(binary.BigEndian.Uint64(v[9:]))).UTC(),
		LeaderEpoch:    -1,
	}
	meta := v[17:]
	if v[0] == checkpointVersionEpoch {
		cp.LeaderEpoch = int32(binary.BigEndian.Uint32(v[17:]))
		meta = v[21:]
	}
	cp.Metadata = string(meta)
	return cp, nil
}

func validateAppName(name string) error {
	if name == "" || len(name) > disbackend.MaxAppNameLen {
		return fmt.Errorf("%w: app name must be 1-%d characters", disbackend.ErrInvalidName, disbackend.MaxAppNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("%w: app name %q has character %q; allowed are ASCII letters, digits, '_' and '-'",
				disbackend.ErrInvalidName, name, c)
		}
	}
	return nil
}

// CreateApp creates an app for a Kafka consumer group, with CreatedAt set to
// now, synced before it returns. DIS CreateApp. Errors: ErrAppExists (an app
// of that name and GroupID exists; the existing app is returned with it),
// ErrNameCollision (the name exists for another GroupID), ErrInvalidName,
// ErrClosed, or a storage error.
func (s *Store) CreateApp(ctx context.Context, app disbackend.App) (disbackend.App, error) {
	op := fmt.Sprintf("create app %q", app.Name)
	if err := ctx.Err(); err != nil {
		return disbackend.App{}, fmt.Errorf("localstore: %s: %w", op, err)
	}
	if err := validateAppName(app.Name); err != nil {
		return disbackend.App{}, fmt.Errorf("localstore: %s: %w", op, err)
	}
	if err := s.enter(op); err != nil {
		return disbackend.App{}, err
	}
	defer s.dbMu.RUnlock()
	s.appsMu.Lock()
	defer s.appsMu.Unlock()
	old, found, err := s.getApp(app.Name)
	if err != nil {
		return disbackend.App{}, fmt.Errorf("localstore: %s: %w", op, err)
	}
	if found {
		if old.GroupID == app.GroupID {
			return old, fmt.Errorf("localstore: %s: %w", op, disbackend.ErrAppExists)
		}
		return disbackend.App{}, fmt.Errorf("localstore: %s for group %q: %w: group %q already uses it",
			op, app.GroupID, disbackend.ErrNameCollision, old.GroupID)
	}
	app.CreatedAt = s.now().UTC().Truncate(0)
	if err := s.db.Set(appKey(app.Name), mustJSON(app), pebble.Sync); err != nil {
		return disbackend.App{}, fmt.Errorf("localstore: %s: %w", op, metaErr(err))
	}
	s.log.Info("app created", zap.String("app", app.Name), zap.String("group", app.GroupID))
	return app, nil
}

// DeleteApp removes an app and all its checkpoints in one synced batch. DIS
// DeleteApp, Kafka DeleteGroups. Errors: ErrAppNotFound, ErrClosed, or a
// storage error.
func (s *Store) DeleteApp(ctx context.Context, name string) error {
	op := fmt.Sprintf("delete app %q", name)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("localstore: %s: %w", op, err)
	}
	if err := s.enter(op); err != nil {
		return err
	}
	defer s.dbMu.RUnlock()
	s.appsMu.Lock()
	defer s.appsMu.Unlock()
	if err := s.requireApp(name); err != nil {
		return fmt.Errorf("localstore: %s: %w", op, err)
	}
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Delete(appKey(name), nil)
	start := checkpointPrefix(name, "")
	_ = b.DeleteRange(start, prefixEnd(start), nil)
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("localstore: %s: %w", op, metaErr(err))
	}
	s.log.Info("app deleted", zap.String("app", name))
	return nil
}

// DescribeApp returns one app. DIS DescribeApp. Errors: ErrAppNotFound,
// ErrClosed, or a storage error.
func (s *Store) DescribeApp(ctx context.Context, name string) (disbackend.App, error) {
	op := fmt.Sprintf("describe app %q", name)
	if err := ctx.Err(); err != nil {
		return disbackend.App{}, fmt.Errorf("localstore: %s: %w", op, err)
	}
	if err := s.enter(op); err != nil {
		return disbackend.App{}, err
	}
	defer s.dbMu.RUnlock()
	app, found, err := s.getApp(name)
	if err != nil {
		return disbackend.App{}, fmt.Errorf("localstore: %s: %w", op, err)
	}
	if !found {
		return disbackend.App{}, fmt.Errorf("localstore: %s: %w", op, disbackend.ErrAppNotFound)
	}
	return app, nil
}

// ListApps returns every app, sorted by Name. DIS ListApps, Kafka
// ListGroups. Errors: ErrClosed, or a storage error.
func (s *Store) ListApps(ctx context.Context) ([]disbackend.App, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("localstore: list apps: %w", err)
	}
	if err := s.enter("list apps"); err != nil {
		return nil, err
	}
	defer s.dbMu.RUnlock()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixApp}, UpperBound: []byte{prefixApp + 1}})
	if err != nil {
		return nil, fmt.Errorf("localstore: list apps: %w", err)
	}
	defer it.Close()
	var out []disbackend.App
	for it.First(); it.Valid(); it.Next() {
		var app disbackend.App
		if err := json.Unmarshal(it.Value(), &app); err != nil {
			return nil, fmt.Errorf("localstore: list apps: app %q: %w: %v", it.Key()[1:], errCorrupt, err)
		}
		out = append(out, app)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("localstore: list apps: %w", err)
	}
	return out, nil
}

// CommitCheckpoints writes LAST_READ checkpoints of an app, all or none, in
// one synced Pebble batch; a checkpoint replaces the app's earlier one for
// the same partition. A zero CommittedAt is set to now. DIS
// CommitCheckpoint, Kafka OffsetCommit. Errors: ErrAppNotFound,
// ErrStreamNotFound, ErrPartitionNotFound, ErrInvalidConfig (metadata longer
// than disbackend.MaxCheckpointMetadataLen characters), ErrClosed, or a
// storage error.
func (s *Store) CommitCheckpoints(ctx context.Context, app string, cps []disbackend.Checkpoint) error {
	op := fmt.Sprintf("commit checkpoints of app %q", app)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("localstore: %s: %w", op, err)
	}
	for _, cp := range cps {
		if n := utf8.RuneCountInString(cp.Metadata); n > disbackend.MaxCheckpointMetadataLen {
			return fmt.Errorf("localstore: %s: stream %q partition %d: %w: metadata is %d characters, at most %d allowed",
				op, cp.Stream, cp.Partition, disbackend.ErrInvalidConfig, n, disbackend.MaxCheckpointMetadataLen)
		}
	}
	if err := s.enter(op); err != nil {
		return err
	}
	defer s.dbMu.RUnlock()
	// appsMu keeps DeleteStream (which takes it to drop checkpoints) from
	// running between the stream check and the commit.
	s.appsMu.Lock()
	defer s.appsMu.Unlock()
	if err := s.requireApp(app); err != nil {
		return fmt.Errorf("localstore: %s: %w", op, err)
	}
	now := s.now().UTC().Truncate(0)
	b := s.db.NewBatch()
	defer b.Close()
	for _, cp := range cps {
		if _, err := s.lookup(op, cp.Stream, cp.Partition); err != nil {
			return err
		}
		if cp.CommittedAt.IsZero() {
			cp.CommittedAt = now
		}
		_ = b.Set(checkpointKey(app, cp.Stream, cp.Partition), encodeCheckpoint(cp), nil)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("localstore: %s: %w", op, metaErr(err))
	}
	return nil
}

// Checkpoints returns the app's checkpoints sorted by stream and partition;
// stream "" means every stream. DIS GetCheckpoint, Kafka OffsetFetch.
// Errors: ErrAppNotFound, ErrClosed, or a storage error.
func (s *Store) Checkpoints(ctx context.Context, app, stream string) ([]disbackend.Checkpoint, error) {
	op := fmt.Sprintf("checkpoints of app %q", app)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("localstore: %s: %w", op, err)
	}
	if err := s.enter(op); err != nil {
		return nil, err
	}
	defer s.dbMu.RUnlock()
	// One snapshot for the app check and the scan, so a concurrent DeleteApp
	// is seen either entirely or not at all.
	snap := s.db.NewSnapshot()
	defer snap.Close()
	if _, closer, err := snap.Get(appKey(app)); err == pebble.ErrNotFound {
		return nil, fmt.Errorf("localstore: %s: %w", op, disbackend.ErrAppNotFound)
	} else if err != nil {
		return nil, fmt.Errorf("localstore: %s: %w", op, err)
	} else {
		_ = closer.Close()
	}
	start := checkpointPrefix(app, stream)
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: prefixEnd(start)})
	if err != nil {
		return nil, fmt.Errorf("localstore: %s: %w", op, err)
	}
	defer it.Close()
	var out []disbackend.Checkpoint
	for it.First(); it.Valid(); it.Next() {
		cp, err := decodeCheckpoint(it.Key(), it.Value(), len(app))
		if err != nil {
			return nil, fmt.Errorf("localstore: %s: %w", op, err)
		}
		out = append(out, cp)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("localstore: %s: %w", op, err)
	}
	return out, nil
}

// DeleteCheckpoints removes the app's checkpoints of the given partitions of
// a stream (all of the stream's when partitions is nil), synced. Missing
// checkpoints are not an error. DIS DeleteCheckpoint, Kafka OffsetDelete.
// Errors: ErrAppNotFound, ErrClosed, or a storage error.
func (s *Store) DeleteCheckpoints(ctx context.Context, app, stream string, partitions []int32) error {
	op := fmt.Sprintf("delete checkpoints of app %q stream %q", app, stream)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("localstore: %s: %w", op, err)
	}
	if err := s.enter(op); err != nil {
		return err
	}
	defer s.dbMu.RUnlock()
	s.appsMu.Lock()
	defer s.appsMu.Unlock()
	if err := s.requireApp(app); err != nil {
		return fmt.Errorf("localstore: %s: %w", op, err)
	}
	if stream == "" {
		return nil // no stream has the empty name
	}
	b := s.db.NewBatch()
	defer b.Close()
	if partitions == nil {
		start := checkpointPrefix(app, stream)
		_ = b.DeleteRange(start, prefixEnd(start), nil)
	}
	for _, p := range partitions {
		_ = b.Delete(checkpointKey(app, stream, p), nil)
	}
	if b.Empty() {
		return nil
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("localstore: %s: %w", op, metaErr(err))
	}
	return nil
}

// deleteStreamCheckpoints adds to b the deletion of every app's checkpoints
// of stream. Requires appsMu and dbMu.
func (s *Store) deleteStreamCheckpoints(b *pebble.Batch, stream string) error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixApp}, UpperBound: []byte{prefixApp + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		start := checkpointPrefix(string(it.Key()[1:]), stream)
		_ = b.DeleteRange(start, prefixEnd(start), nil)
	}
	return it.Error()
}

// getApp reads an app. Requires dbMu.
func (s *Store) getApp(name string) (disbackend.App, bool, error) {
	v, closer, err := s.db.Get(appKey(name))
	if err == pebble.ErrNotFound {
		return disbackend.App{}, false, nil
	}
	if err != nil {
		return disbackend.App{}, false, err
	}
	defer closer.Close()
	var app disbackend.App
	if err := json.Unmarshal(v, &app); err != nil {
		return disbackend.App{}, false, fmt.Errorf("app %q: %w: %v", name, errCorrupt, err)
	}
	return app, true, nil
}

// requireApp returns ErrAppNotFound unless the app exists. Requires dbMu.
func (s *Store) requireApp(name string) error {
	_, found, err := s.getApp(name)
	if err != nil {
		return err
	}
	if !found {
		return disbackend.ErrAppNotFound
	}
	return nil
}

var (
	_ disbackend.GroupStateStore  = (*Store)(nil)
	_ disbackend.GroupStateReader = (*Store)(nil)
)

// SaveGroupState stores a consumer group's membership (the group
// coordinator's opaque state) under its id, synced; nil deletes it.
// Errors: ErrClosed, or a storage error.
func (s *Store) SaveGroupState(ctx context.Context, group string, state []byte) error {
	return s.saveKeyed(ctx, prefixGroup, "save group", group, state)
}

// GroupStates returns every consumer group's stored membership by group id.
// Errors: ErrClosed, or a storage error.
func (s *Store) GroupStates(ctx context.Context) (map[string][]byte, error) {
	return s.keyedAll(prefixGroup, "group states")
}

var _ disbackend.TxnStateStore = (*Store)(nil)

// SaveTxnRecord stores one record of the transaction coordinator's state
// (its own encoding) under key, synced; nil deletes it. Errors:
// ErrClosed, ErrStorageFull, or a storage error.
func (s *Store) SaveTxnRecord(ctx context.Context, key string, value []byte) error {
	return s.saveKeyed(ctx, prefixTxn, "save transaction record", key, value)
}

// TxnRecords returns every stored transaction record by key. Errors:
// ErrClosed, or a storage error.
func (s *Store) TxnRecords(ctx context.Context) (map[string][]byte, error) {
	return s.keyedAll(prefixTxn, "transaction records")
}

// saveKeyed stores value under prefix|key, synced; nil deletes it. what
// names the operation in errors.
func (s *Store) saveKeyed(ctx context.Context, prefix byte, what, key string, value []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("localstore: %s %q: %w", what, key, err)
	}
	if err := s.enter(what); err != nil {
		return err
	}
	defer s.dbMu.RUnlock()
	k := append([]byte{prefix}, key...)
	var err error
	if value == nil {
		err = s.db.Delete(k, pebble.Sync)
	} else {
		err = s.db.Set(k, value, pebble.Sync)
	}
	if err != nil {
		return fmt.Errorf("localstore: %s %q: %w", what, key, metaErr(err))
	}
	return nil
}

// keyedAll returns every value stored under prefix, by the rest of its key.
func (s *Store) keyedAll(prefix byte, what string) (map[string][]byte, error) {
	if err := s.enter(what); err != nil {
		return nil, err
	}
	defer s.dbMu.RUnlock()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefix}, UpperBound: []byte{prefix + 1}})
	if err != nil {
		return nil, fmt.Errorf("localstore: %s: %w", what, err)
	}
	defer it.Close()
	out := map[string][]byte{}
	for it.First(); it.Valid(); it.Next() {
		out[string(it.Key()[1:])] = append([]byte(nil), it.Value()...)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("localstore: %s: %w", what, err)
	}
	return out, nil
}

// GroupState returns one consumer group's stored membership, nil when
// there is none. Errors: ErrClosed, or a storage error.
func (s *Store) GroupState(ctx context.Context, group string) ([]byte, error) {
	if err := s.enter("group state"); err != nil {
		return nil, err
	}
	defer s.dbMu.RUnlock()
	v, closer, err := s.db.Get(append([]byte{prefixGroup}, group...))
	if err == pebble.ErrNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("localstore: group state %q: %w", group, err)
	}
	defer closer.Close()
	return append([]byte(nil), v...), nil
}
