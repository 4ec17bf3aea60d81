package localstore

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"
)

// swapCleaned puts the cleaned segment in place of the range, under wmu:
// the commit (rename to .swap, directory synced), the partitions pointed
// at it, the replaced segments removed, the renames to .log and .index.
// It reports false, changing nothing, when the range changed meanwhile
// (retention or DeleteStream removed some of it).
func (s *Store) swapCleaned(plan *cleanPlan, out *cleaned) (bool, error) {
	if err := s.enter("clean"); err != nil {
		return false, err
	}
	defer s.dbMu.RUnlock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	st := plan.st
	segs := s.segs[st.sid]
	if s.streams[st.meta.Name] != st || s.storageFailure() != nil || len(segs) < len(plan.segs) {
		return false, nil
	}
	for i, sg := range plan.segs {
		if segs[i] != sg {
			return false, nil
		}
	}
	first, last := plan.segs[0], plan.segs[len(plan.segs)-1]
	final := s.fs.PathJoin(s.segDir, segmentName(st.sid, first.n))
	swap := s.fs.PathJoin(s.segDir, fmt.Sprintf("%016x-%016x-%016x.%s", st.sid, first.n, last.n, swapExt))
	if err := s.fs.Rename(out.path, swap); err != nil {
		return false, fmt.Errorf("segment %s: rename: %w", out.path, err)
	}
	if err := syncDir(s.fs, s.segDir); err != nil {
		return false, s.failSwap(fmt.Errorf("segment %s: sync directory: %w", swap, err))
	}
	s.hook("swap committed")
	ns, err := s.openCleaned(plan, out, swap, final)
	if err != nil {
		return false, s.failSwap(err)
	}
	gone := make(map[*segment]bool, len(plan.segs))
	for _, sg := range plan.segs {
		gone[sg] = true
	}
	for _, p := range st.parts {
		p.mu.Lock()
		k := 0
		for k < len(p.segs) && gone[p.segs[k].seg] {
			k++
		}
		segsNew := make([]*segPart, 0, len(p.segs)-k+1)
		if sp := ns.parts[p.id]; sp != nil && sp.last >= p.first {
			segsNew = append(segsNew, sp)
		}
		p.segs = append(segsNew, p.segs[k:]...)
		p.segsGen++
		var bytes, n int64
		if last := plan.partLast(p.id); last >= 0 {
			bytes, n = p.dropCacheBelow(last + 1)
		}
		p.mu.Unlock()
		s.cache.release(bytes, n)
	}
	s.segs[st.sid] = append([]*segment{ns}, segs[len(plan.segs):]...)
	for _, p := range st.parts {
		if err := s.setFirst(p, p.first); err != nil {
			s.log.Warn("log cleaner: reading the new index failed; the partition's size is off until it is read again",
				zap.String("stream", st.meta.Name), zap.Int32("partition", p.id), zap.Error(err))
		}
	}
	for _, sg := range plan.segs {
		if err := s.removeSegment(sg); err != nil {
			return true, s.failSwap(err)
		}
	}
	if err := syncDir(s.fs, s.segDir); err != nil {
		return true, s.failSwap(fmt.Errorf("segment %s: sync directory: %w", swap, err))
	}
	s.hook("replaced removed")
	// The index takes its name before the .log does: while the .swap
	// exists, Open knows whether the index was renamed (the
	// .cleaned-index is gone); once it is renamed, a .cleaned-index left
	// over is an uncommitted pass's.
	if err := s.fs.Rename(out.ixPath, final+"."+extIndex); err != nil {
		return true, s.failSwap(fmt.Errorf("segment %s: rename: %w", out.ixPath, err))
	}
	if err := syncDir(s.fs, s.segDir); err != nil {
		return true, s.failSwap(fmt.Errorf("segment %s: sync directory: %w", final, err))
	}
	s.hook("index written")
	if err := s.fs.Rename(swap, final+"."+extLog); err != nil {
		return true, s.failSwap(fmt.Errorf("segment %s: rename: %w", swap, err))
	}
	if err := syncDir(s.fs, s.segDir); err != nil {
		return true, s.failSwap(fmt.Errorf("segment %s: sync directory: %w", final, err))
	}
	s.hook("swap renamed")
	return true, nil
}

// openCleaned opens the committed .swap and its index as the new segment
// of the range. Requires wmu.
func (s *Store) openCleaned(plan *cleanPlan, out *cleaned, swap, final string) (*segment, error) {
	f, err := s.fs.Open(swap)
	if err != nil {
		return nil, fmt.Errorf("segment %s: open: %w", swap, err)
	}
	ixf, err := s.fs.Open(out.ixPath)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("segment %s: open: %w", out.ixPath, err)
	}
	ns := newSegment(plan.st.sid, plan.segs[0].n, final, f)
	ns.st, ns.sealed, ns.size, ns.parts = plan.st, true, out.size, out.parts
	ns.covers = plan.segs[len(plan.segs)-1].covers
	ns.setIndex(ixf)
	for _, sp := range out.parts {
		sp.seg = ns
		ns.maxAppendMS = max(ns.maxAppendMS, sp.maxAppend)
	}
	return ns, nil
}

// failSwap stops the store after a failure past the swap's commit: the
// files are in a state only Open finishes.
func (s *Store) failSwap(err error) error {
	s.fail(err)
	return err
}

// saveCleanerState persists a stream's cleaner state (synced).
func (s *Store) saveCleanerState(st *stream, cs cleanerState) error {
	if err := s.enter("clean"); err != nil {
		return err
	}
	defer s.dbMu.RUnlock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.streams[st.meta.Name] != st {
		return nil
	}
	if err := s.db.Set(cleanerKey(st.sid), mustJSON(cs), pebble.Sync); err != nil {
		return fmt.Errorf("localstore: clean stream %q: save state: %w", st.meta.Name, metaErr(err))
	}
	return nil
}

func cleanerKey(sid uint64) []byte {
	k := make([]byte, 9)
	k[0] = prefixCleaner
	for i := 0; i < 8; i++ {
		k[1+i] = byte(sid >> (56 - 8*i))
	}
	return k
}

// loadCleanerState reads a stream's cleaner state; none is the zero state.
func (s *Store) loadCleanerState(sid uint64) (cleanerState, error) {
	var cs cleanerState
	v, closer, err := s.db.Get(cleanerKey(sid))
	if err == pebble.ErrNotFound {
		return cs, nil
	}
	if err != nil {
		return cs, err
	}
	defer closer.Close()
	if err := json.Unmarshal(v, &cs); err != nil {
		return cs, fmt.Errorf("cleaner state of stream %d: %w: %v", sid, errCorrupt, err)
	}
	return cs, nil
}

// finishSwaps is Open's part of the swap. A .swap file means the pass
// committed: what is left of the segments it names is removed (their
// index too while the pass's .cleaned-index is still there, which then
// takes the first one's index name), and the .swap takes the first one's
// log name. A .cleaned file or a .cleaned-index without a .swap belongs
// to a pass that never committed: removed.
func finishSwaps(fs vfs.FS, dir string) error {
	names, err := fs.List(dir)
	if err != nil {
		return err
	}
	has := make(map[string]bool, len(names))
	for _, name := range names {
		has[name] = true
	}
	changed := false
	for _, name := range names {
		if !strings.HasSuffix(name, "."+swapExt) {
			continue
		}
		sid, from, to, ok := parseSwapName(name)
		if !ok {
			continue
		}
		ixName := segmentName(sid, from) + "." + cleanedIndexExt
		for _, other := range names {
			osid, n, ext, ok := parseSegmentName(other)
			if !ok || ext == extSnapshot || osid != sid || n < from || n > to {
				continue
			}
			if n == from && ext == extIndex && !has[ixName] {
				continue // the pass's index, already renamed
			}
			if err := fs.Remove(fs.PathJoin(dir, other)); err != nil {
				return err
			}
		}
		if err := syncDir(fs, dir); err != nil {
			return err
		}
		if has[ixName] {
			if err := fs.Rename(fs.PathJoin(dir, ixName), fs.PathJoin(dir, segmentName(sid, from)+"."+extIndex)); err != nil {
				return err
			}
			delete(has, ixName)
		}
		if err := fs.Rename(fs.PathJoin(dir, name), fs.PathJoin(dir, segmentName(sid, from)+"."+extLog)); err != nil {
			return err
		}
		changed = true
	}
	for _, name := range names {
		if (strings.HasSuffix(name, "."+cleanedExt) || strings.HasSuffix(name, "."+cleanedIndexExt)) && has[name] {
			if err := fs.Remove(fs.PathJoin(dir, name)); err != nil {
				return err
			}
			changed = true
		}
	}
	if changed {
		return syncDir(fs, dir)
	}
	return nil
}

// parseSwapName parses "<sid>-<from>-<to>.swap".
func parseSwapName(name string) (sid, from, to uint64, ok bool) {
	base, _ := strings.CutSuffix(name, "."+swapExt)
	parts := strings.Split(base, "-")
	if len(parts) != 3 {
		return 0, 0, 0, false
	}
	var v [3]uint64
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 16, 64)
		if err != nil || len(p) != 16 {
			return 0, 0, 0, false
		}
		v[i] = n
	}
	return v[0], v[1], v[2], v[1] <= v[2]
}
