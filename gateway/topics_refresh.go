package gateway

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
)

// The metadata refresher: every Config.MetadataRefresh the gateway lists
// the backend's streams (one ListStreams; disrest describes only the
// streams new or changed since its last listing) and brings its topic
// cache in line, so that streams created, deleted or scaled in DIS by
// anyone (other gateway nodes, DIS tools, the console) show in Metadata
// within one interval (plus the listing's own time). A failed listing
// (DIS.4305 too many requests, DIS.4309, DIS down: ErrUnavailable) backs
// the refresher off, doubling the wait up to maxRefreshBackoff.

// maxRefreshBackoff caps the wait after failed listings.
const maxRefreshBackoff = 2 * time.Minute

// refreshListTimeout bounds one listing (its retries of DIS.4305 included).
const refreshListTimeout = 2 * time.Minute

// nextRefreshWait is the wait before the next listing after failures
// listings in a row failed: interval after a success, then doubling from
// 2·interval, capped at maxRefreshBackoff (or interval when that is
// longer).
func nextRefreshWait(interval time.Duration, failures int) time.Duration {
	if failures <= 0 {
		return interval
	}
	limit := max(maxRefreshBackoff, interval)
	w := interval
	for i := 0; i < failures; i++ {
		w *= 2
		if w >= limit || w <= 0 {
			return limit
		}
	}
	return w
}

// refreshTopics runs the refresher until Shutdown.
func (s *Server) refreshTopics(interval time.Duration) {
	defer s.bgWG.Done()
	failures := 0
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-s.closing:
			return
		case <-t.C:
		}
		if err := s.refreshTopicsOnce(); err != nil {
			failures++
			wait := nextRefreshWait(interval, failures)
			// DIS unavailable or rate limiting is a warning, logged once
			// per outage; anything else (refused credentials) an error.
			lvl := s.log.Error
			if errors.Is(err, disbackend.ErrUnavailable) {
				lvl = s.log.Warn
				if failures > 1 {
					lvl = s.log.Debug
				}
			}
			lvl("metadata refresh failed, backing off", zap.Error(err), zap.Int("failures", failures),
				zap.Bool("backend_unavailable", errors.Is(err, disbackend.ErrUnavailable)), zap.Duration("wait", wait))
			t.Reset(wait)
			continue
		}
		if failures > 0 {
			s.log.Info("metadata refresh recovered", zap.Int("failures", failures))
		}
		failures = 0
		t.Reset(interval)
	}
}

// refreshTopicsOnce lists the backend's streams and applies them to the
// topic cache.
func (s *Server) refreshTopicsOnce() error {
	ctx, cancel := context.WithTimeout(context.Background(), refreshListTimeout)
	defer cancel()
	go func() {
		select {
		case <-s.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	since := s.topics.beginListing()
	defer s.topics.endListing()
	streams, err := s.backend.ListStreams(ctx)
	if err != nil {
		return err
	}
	added, removed, resized := s.topics.sync(streams, since)
	for _, st := range added {
		s.log.Info("topic found in the backend", zapTopic(st.TopicName), zapInt32("partitions", st.PartitionCount))
	}
	for _, topic := range removed {
		s.log.Info("topic gone from the backend", zapTopic(topic))
	}
	for _, st := range resized {
		s.log.Info("topic partition count changed in the backend", zapTopic(st.TopicName), zapInt32("partitions", st.PartitionCount))
	}
	return nil
}

// beginListing returns the count of puts and removes so far, for sync;
// endListing must follow.
func (tc *topicCache) beginListing() uint64 {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tc.listings++
	return tc.gen
}

func (tc *topicCache) endListing() {
	tc.mu.Lock()
	tc.listings--
	tc.mu.Unlock()
}

// sync makes the cache the listed streams, except for topics put or
// removed after generation since (when the listing started): streams not
// cached are added, cached topics not listed are removed, changed ones
// replaced. It returns what it added, removed, and replaced with another
// partition count.
func (tc *topicCache) sync(streams []disbackend.Stream, since uint64) (added []*disbackend.Stream, removed []string, resized []*disbackend.Stream) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	listed := make(map[string]bool, len(streams))
	for i := range streams {
		st := &streams[i]
		listed[st.TopicName] = true
		if tc.putGen[st.TopicName] > since {
			continue // changed here meanwhile
		}
		old := tc.byName[st.TopicName]
		switch {
		case old == nil:
			added = append(added, st)
		case old.TopicID == st.TopicID && old.Name == st.Name && old.PartitionCount == st.PartitionCount && old.Config == st.Config:
			continue
		case old.PartitionCount != st.PartitionCount:
			resized = append(resized, st)
		}
		tc.putLocked(st)
		tc.putGen[st.TopicName] = 0 // from a listing: the next one may change it
	}
	for topic, g := range tc.putGen {
		if g <= since && tc.byName[topic] == nil {
			delete(tc.putGen, topic) // a removal's mark, older than the listing
		}
	}
	for topic := range tc.byName {
		if !listed[topic] && tc.putGen[topic] <= since {
			tc.removeLocked(topic)
			removed = append(removed, topic)
		}
	}
	return added, removed, resized
}
