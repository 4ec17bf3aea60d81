package disrest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/disapi"
)

// GroupStream is the gateway-owned compacted stream (one partition, never
// listed as a topic) that keeps consumer groups' membership across gateway
// restarts, as Kafka keeps it in __consumer_offsets: a record per save,
// key the group id, value the coordinator's state, a tombstone when the
// group empties. The compactor keeps every live group's latest record.
//
// Each record carries a version in header GroupVersionHeader (decimal):
// one more than the highest version of the group the saving node knows.
// A reader keeps, per group, the record of the highest version, not the
// last to arrive (of equal versions, the later), so that a compaction
// copy of an older record landing after a newer save (the compactor of
// another node re-appends live keys) never rolls a group back. A record
// without the header (written before versions) is version 0.
//
// The Store keeps the latest record of every group in memory (groupTable:
// the state of each live group, and the version of each deleted one for
// DefaultDeleteRetention), read from the stream: from its start at the
// first GroupStates, GroupState or SaveGroupState, then from where it
// left off. GroupState (a node loading a group that moved to it) first
// reads up to the stream's end (one DescribeStream and the GetRecords of
// what arrived since the last read), so it sees every save DIS
// acknowledged before the call. In cluster mode a goroutine also tails
// the stream (a GetRecords every groupTailEvery), so these reads stay
// short, and re-appends a group's highest-version record when an older
// copy of it landed later and this node coordinates the group, so the
// compactor, which keeps the last record of a key, keeps the right one.
const GroupStream = "__disgw_groups"

// GroupVersionHeader is the record header of GroupStream holding a
// record's version (decimal).
const GroupVersionHeader = "disgw.group.version"

// groupStateFenceKey is the fence's key of a write of key to GroupStream:
// the group's placement key, for its state and for its GROUP configs
// (disbackend.GroupConfigStateKey), which its coordinator writes.
func groupStateFenceKey(key string) string {
	if g, ok := disbackend.GroupOfConfigStateKey(key); ok {
		return disbackend.GroupKey(g)
	}
	return disbackend.GroupKey(key)
}

// groupTailEvery is how often the tail of GroupStream is read in cluster
// mode.
const groupTailEvery = time.Second

var (
	_ disbackend.GroupStateStore  = (*Store)(nil)
	_ disbackend.GroupStateReader = (*Store)(nil)
)

// groupEntry is what the Store knows of one group's saved state.
type groupEntry struct {
	state []byte // latest state; nil: deleted (or only issued)
	ver   uint64 // its version
	read  bool   // a record of the group was read or written: ver is valid
	// issued is the highest version this Store sent (its outcome maybe
	// unknown): the next save takes a higher one.
	issued uint64
	// deleted is when a tombstone was taken: the entry is forgotten
	// DefaultDeleteRetention later, as the compactor forgets the tombstone.
	deleted time.Time
	// streamVer is the highest version read from the stream (not this
	// Store's own saves): a record read later with a lower one landed
	// after a newer record, a late copy.
	streamVer uint64
}

// groupTable is the latest record of each key of a gateway-owned compacted
// stream of versioned keyed records: each group in GroupStream, each
// transaction coordinator record in TxnStream (txns.go).
type groupTable struct {
	stream    string                  // GroupStream or TxnStream
	verHeader string                  // the records' version header
	what      string                  // what the records are, for logs
	fenceKey  func(key string) string // the fence's key of a write of key ("": none)
	// onApply, when set, is called (with mu held) with every record
	// taken: read from the stream or written by this Store.
	onApply func(key string, value []byte)
	once    onceOK // stream created
	mu      sync.Mutex
	m       map[string]*groupEntry // guarded by mu
	next    int64                  // next sequence number to read; guarded by mu
	stale   map[string]bool        // groups whose older record landed after a newer one; guarded by mu
	loaded  bool                   // read up to the end once; guarded by mu
	tail    bool                   // the tail goroutine was started; guarded by mu
	// Catch-ups (readGroups) run one at a time (sem); started counts
	// those begun and done the last that ended well, so a caller whose
	// call came before a catch-up began is served by it. Guarded by mu.
	sem     chan struct{}
	started uint64
	done    uint64
}

func (t *groupTable) init(stream, verHeader, what string, fenceKey func(string) string) {
	t.stream, t.verHeader, t.what, t.fenceKey = stream, verHeader, what, fenceKey
	t.m = map[string]*groupEntry{}
	t.stale = map[string]bool{}
	t.sem = make(chan struct{}, 1)
}

// ensureTable creates t's stream once per process (it may already exist)
// and has the compactor keep it.
func (s *Store) ensureTable(ctx context.Context, t *groupTable) error {
	return t.once.do(func() error {
		cfg := disbackend.StreamConfig{CleanupPolicy: disbackend.CleanupCompact, MaxMessageBytes: maxRecordBytes,
			DeleteRetention: disbackend.DefaultDeleteRetention}
		err := s.createStream(ctx, t.stream, 1, disapi.MaxRetentionHours, configTags(t.stream, t.stream, cfg))
		if err != nil && !errors.Is(err, disbackend.ErrStreamExists) {
			return err
		}
		st, err := s.DescribeStream(ctx, t.stream)
		if err != nil {
			return err
		}
		s.compact.watch(st)
		return nil
	})
}

// SaveGroupState appends the group's state to GroupStream (a tombstone for
// nil) with the next version of the group and returns once DIS has it. In
// cluster mode only the group's coordinator may (the fence). DIS
// PutRecords (and, at the Store's first group call, DescribeStream,
// GetCursor and GetRecords of the stream). Errors: ErrClosed,
// ErrUnavailable, ErrNotCoordinator, ErrInvalidRecord (a state over DIS's
// 1 MB per record), or DIS's.
func (s *Store) SaveGroupState(ctx context.Context, group string, state []byte) error {
	if err := s.saveKeyed(ctx, &s.groups, group, state); err != nil {
		return fmt.Errorf("disrest: save group %q: %w", group, err)
	}
	return nil
}

// saveKeyed appends key's value to t's stream (a tombstone for nil) with
// the key's next version and returns once DIS has it, fenced by
// t.fenceKey(key).
func (s *Store) saveKeyed(ctx context.Context, t *groupTable, key string, value []byte) error {
	if err := s.groupWrite(ctx, t.fenceKey(key)); err != nil {
		return err
	}
	if err := s.loadTable(ctx, t, false); err != nil {
		return err
	}
	ver := t.issue(key)
	recs := []disbackend.Record{keyedRecord(t.verHeader, key, value, ver)}
	if _, err := s.appendFenced(partKey{t.stream, 0}, recordsBatch(recs), nil, t.fenceKey(key)).Wait(ctx); err != nil {
		return err
	}
	now := time.Now()
	t.mu.Lock()
	t.applyLocked(key, value, ver, now)
	if value == nil {
		t.pruneLocked(now)
	}
	t.mu.Unlock()
	return nil
}

// groupRecord is the record of GroupStream saving state of version ver.
func groupRecord(group string, state []byte, ver uint64) disbackend.Record {
	return keyedRecord(GroupVersionHeader, group, state, ver)
}

// keyedRecord is the record saving value of version ver under key, the
// version in header verHeader.
func keyedRecord(verHeader, key string, value []byte, ver uint64) disbackend.Record {
	return disbackend.Record{Key: []byte(key), Value: value, Timestamp: time.Now().UnixMilli(),
		Headers: []disbackend.RecordHeader{{Key: verHeader, Value: strconv.AppendUint(nil, ver, 10)}}}
}

// groupVersion is a GroupStream record's version (recordVersion).
func groupVersion(r *disbackend.Record) uint64 { return recordVersion(r, GroupVersionHeader) }

// recordVersion is a record's version: its header verHeader, 0 without
// one (written before versions) or when it does not parse.
func recordVersion(r *disbackend.Record, verHeader string) uint64 {
	for _, h := range r.Headers {
		if h.Key == verHeader {
			v, err := strconv.ParseUint(string(h.Value), 10, 64)
			if err != nil {
				return 0
			}
			return v
		}
	}
	return 0
}

// GroupStates returns each group's latest state (groups whose latest record
// is a tombstone are left out), reading GroupStream up to its end: from its
// start the first time. DIS DescribeStream, GetCursor, GetRecords.
func (s *Store) GroupStates(ctx context.Context) (map[string][]byte, error) {
	out, err := s.keyedAll(ctx, &s.groups)
	if err != nil {
		return nil, fmt.Errorf("disrest: group states: %w", err)
	}
	return out, nil
}

// keyedAll returns each key's latest value in t's stream (keys whose
// latest record is a tombstone are left out), reading the stream up to its
// end first.
func (s *Store) keyedAll(ctx context.Context, t *groupTable) (map[string][]byte, error) {
	if err := s.loadTable(ctx, t, true); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string][]byte, len(t.m))
	for g, e := range t.m {
		if e.read && e.state != nil {
			out[g] = e.state
		}
	}
	return out, nil
}

// GroupState returns the latest state saved for group by any node (nil
// when there is none or it was deleted), reading GroupStream up to its end
// first, so every save DIS acknowledged before the call is seen. DIS
// DescribeStream, GetCursor, GetRecords.
func (s *Store) GroupState(ctx context.Context, group string) ([]byte, error) {
	// In cluster mode the coordinator loads a group it gained only once
	// its previous coordinator's writes (state, commits) can no longer
	// land (the fence's takeover, as for a partition): then the state read
	// is the last one, and no commit of the old coordinator lands after
	// the new one's (docs/cluster.md §6).
	if err := s.fence.takeover(ctx, disbackend.GroupKey(group)); err != nil {
		return nil, fmt.Errorf("disrest: group state %q: %w", group, err)
	}
	if err := s.loadTable(ctx, &s.groups, true); err != nil {
		return nil, fmt.Errorf("disrest: group state %q: %w", group, err)
	}
	t := &s.groups
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.m[group]; e != nil && e.read {
		return e.state, nil
	}
	return nil, nil
}

// loadTable brings t up to its stream's end: always when fresh, else only
// if it never was. In cluster mode it starts the tail.
func (s *Store) loadTable(ctx context.Context, t *groupTable, fresh bool) error {
	if err := s.ensureTable(ctx, t); err != nil {
		return err
	}
	t.mu.Lock()
	want := t.started + 1 // a catch-up begun after this call
	if !fresh && t.loaded {
		t.mu.Unlock()
		return nil
	}
	t.mu.Unlock()
	select {
	case t.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-t.sem }()
	t.mu.Lock()
	if t.done >= want || (!fresh && t.loaded) {
		t.mu.Unlock()
		return nil
	}
	t.started++
	n := t.started
	t.mu.Unlock()
	if err := s.readTable(ctx, t); err != nil {
		return err
	}
	t.mu.Lock()
	t.done, t.loaded = n, true
	t.mu.Unlock()
	s.startTail(t)
	return nil
}

// readTable reads t's stream from where t left off to the stream's end as
// DIS describes it now. When the records there have expired (DIS's
// retention, the compactor having copied the live ones since), it reads
// again from the stream's start.
func (s *Store) readTable(ctx context.Context, t *groupTable) error {
	k := partKey{t.stream, 0}
	for attempt := 0; ; attempt++ {
		r, err := s.describeRange(ctx, t.stream, 0)
		if err != nil {
			return err
		}
		t.mu.Lock()
		if t.next < r.First {
			t.resetLocked(r.First)
		}
		from := t.next
		t.mu.Unlock()
		err = s.scan(ctx, k, from, r.Next, copyReadBytes, false, func(recs []fetched) bool {
			t.applyRecords(recs)
			return true
		})
		if err == nil {
			s.repairTable(ctx, t)
			return nil
		}
		if !errors.Is(err, disbackend.ErrOffsetOutOfRange) || attempt == 3 {
			return err
		}
		// The start expired under the read: read again from the new start.
	}
}

// applyRecords takes records read from t's stream, skipping those
// already taken.
func (t *groupTable) applyRecords(recs []fetched) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range recs {
		f := &recs[i]
		if f.sn < t.next || f.rec.Key == nil {
			continue
		}
		t.next = f.sn + 1
		g := string(f.rec.Key)
		ver := recordVersion(&f.rec, t.verHeader)
		t.applyLocked(g, f.rec.Value, ver, now)
		e := t.m[g]
		if ver < e.streamVer {
			t.stale[g] = true
		}
		e.streamVer = max(e.streamVer, ver)
	}
}

// applyLocked takes state of version ver for group unless a higher
// version is known. Called with mu held.
func (t *groupTable) applyLocked(group string, state []byte, ver uint64, now time.Time) {
	e := t.m[group]
	if e == nil {
		e = &groupEntry{}
		t.m[group] = e
	}
	if e.read && ver < e.ver {
		return
	}
	e.state, e.ver, e.read = state, ver, true
	e.deleted = time.Time{}
	if state == nil {
		e.deleted = now
	}
	if t.onApply != nil {
		t.onApply(group, state)
	}
}

// resetLocked forgets what was read (it expired from the stream) before
// reading again from first; the versions this Store issued stay. Called
// with mu held.
func (t *groupTable) resetLocked(first int64) {
	for g, e := range t.m {
		if e.issued == 0 {
			delete(t.m, g)
			continue
		}
		*e = groupEntry{issued: e.issued}
	}
	clear(t.stale)
	t.next = first
}

// issue returns the version of group's next save: above every version
// read or sent.
func (t *groupTable) issue(group string) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.m[group]
	if e == nil {
		e = &groupEntry{}
		t.m[group] = e
	}
	v := max(e.ver, e.issued) + 1
	e.issued = v
	return v
}

// pruneLocked forgets the groups deleted DefaultDeleteRetention ago (the
// compactor no longer keeps their tombstones either). Called with mu held.
func (t *groupTable) pruneLocked(now time.Time) {
	for g, e := range t.m {
		if e.read && e.state == nil && now.Sub(e.deleted) >= disbackend.DefaultDeleteRetention && e.issued <= e.ver {
			delete(t.m, g)
		}
	}
}

// repairTable re-appends the highest-version record of each key of t
// whose older record landed later (a late compaction copy), when this node
// may write the key (a group's coordinator, in cluster mode): the
// compactor keeps the last record of a key, so without the repair the
// newer record would expire and the older one live on. Failures are
// logged; the next stale record tries again.
func (s *Store) repairTable(ctx context.Context, t *groupTable) {
	t.mu.Lock()
	type fix struct {
		group string
		state []byte
		ver   uint64
	}
	var fixes []fix
	for g := range t.stale {
		delete(t.stale, g)
		if e := t.m[g]; e != nil && e.read {
			fixes = append(fixes, fix{g, e.state, e.ver})
		}
	}
	t.mu.Unlock()
	for _, f := range fixes {
		if s.fenced(t.fenceKey(f.group)) != nil {
			continue // another node coordinates it: it repairs
		}
		recs := []disbackend.Record{keyedRecord(t.verHeader, f.group, f.state, f.ver)}
		if _, err := s.appendFenced(partKey{t.stream, 0}, recordsBatch(recs), nil, t.fenceKey(f.group)).Wait(ctx); err != nil {
			s.log.Warn(t.what+": re-appending the latest state over an older copy failed",
				zap.String("key", f.group), zap.Uint64("version", f.ver), zap.Error(err))
			continue
		}
		s.log.Info(t.what+": an older copy landed after the latest state; re-appended the latest",
			zap.String("key", f.group), zap.Uint64("version", f.ver))
	}
}

// startTail starts, in cluster mode, the goroutine that tails t's stream
// until the Store closes.
func (s *Store) startTail(t *groupTable) {
	if !s.clustered() {
		return
	}
	t.mu.Lock()
	if t.tail {
		t.mu.Unlock()
		return
	}
	t.tail = true
	t.mu.Unlock()
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return
	}
	s.wg.Add(1)
	go s.tailTable(t)
}

// tailTable reads the new records of t's stream every groupTailEvery (at
// once again when a read returned records), from where t left off.
func (s *Store) tailTable(t *groupTable) {
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.stopPoll
		cancel()
	}()
	k := partKey{t.stream, 0}
	tick := time.NewTicker(groupTailEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for ctx.Err() == nil {
			took := false
			select {
			case t.sem <- struct{}{}: // not while a catch-up reads
				took = true
			default:
			}
			if !took {
				break
			}
			t.mu.Lock()
			from := t.next
			t.pruneLocked(time.Now())
			t.mu.Unlock()
			rctx, rcancel := context.WithTimeout(ctx, s.opts.RequestTimeout+s.opts.RetryTimeout)
			recs, err := s.fetchAt(rctx, k, from, copyReadBytes, false)
			if err == nil {
				t.applyRecords(recs)
			}
			<-t.sem
			if errors.Is(err, disbackend.ErrOffsetOutOfRange) {
				err = s.loadTable(rctx, t, true) // expired: read again from the start
				recs = nil
			}
			if err == nil {
				s.repairTable(rctx, t)
			}
			rcancel()
			if err != nil {
				if ctx.Err() == nil {
					s.log.Debug(t.what+": reading the tail failed", zap.Error(err))
				}
				break
			}
			if len(recs) == 0 {
				break
			}
		}
	}
}
