package disrest

// Following DIS: streams created, deleted and scaled by others (other
// gateway nodes, DIS tools, the console) are found by ListStreams, which
// the gateway calls every dis_metadata_refresh. To stay within DIS's API
// rate limits a listing costs one ListStreams (per 100 streams) and a
// DescribeStream only of each stream that is new or whose listing changed
// (partition count, retention, tags, create time), or that still has
// partitions left DELETED by a scale-down (they become EXPIRED with no
// change in the listing). What the previous listing knew and this one
// does not is forgotten: a deleted stream's caches (stream info, cursors,
// ranges, read-ahead buffers, idempotent producer state, the compactor's
// watch), and the caches of partitions that became EXPIRED.

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2/model"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/disapi"
)

// listedStream is what the last ListStreams knew of one stream.
type listedStream struct {
	// sig is the stream as listed: create time, partition count,
	// retention and tags.
	sig string
	// readable is the readable partition count (ACTIVE and DELETED, not
	// EXPIRED) DescribeStream gave; writable is the listed partition
	// count (ACTIVE ones). readable > writable while partitions are
	// DELETED.
	readable, writable int32
}

// listedStreams is guarded by mu; nil m means no listing yet.
type listedStreams struct {
	mu sync.Mutex
	m  map[string]listedStream
}

func (l *listedStreams) get(name string) (listedStream, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ls, ok := l.m[name]
	return ls, ok
}

// swap replaces the listing with m and returns the previous one.
func (l *listedStreams) swap(m map[string]listedStream) map[string]listedStream {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.m
	l.m = m
	return old
}

// listSig is a listed stream's signature: it changes when DIS changes the
// stream's partition count, retention or tags, or re-creates it.
func listSig(si *model.StreamInfo) string {
	var b strings.Builder
	if si.CreateTime != nil {
		b.WriteString(strconv.FormatInt(*si.CreateTime, 10))
	}
	b.WriteByte('/')
	if si.PartitionCount != nil {
		b.WriteString(strconv.FormatInt(int64(*si.PartitionCount), 10))
	}
	b.WriteByte('/')
	if si.RetentionPeriod != nil {
		b.WriteString(strconv.FormatInt(int64(*si.RetentionPeriod), 10))
	}
	if si.Tags != nil {
		tags := make([]string, 0, len(*si.Tags))
		for _, t := range *si.Tags {
			var k, v string
			if t.Key != nil {
				k = *t.Key
			}
			if t.Value != nil {
				v = *t.Value
			}
			tags = append(tags, strconv.Quote(k)+"="+strconv.Quote(v))
		}
		sort.Strings(tags)
		b.WriteByte('/')
		b.WriteString(strings.Join(tags, ","))
	}
	return b.String()
}

// ListStreams returns every stream (Kafka topic) sorted by Name, the
// gateway's own streams left out. DIS ListStreams, and DescribeStream of
// each stream that is new or changed since the last listing or has
// DELETED partitions (see the top of this file); PartitionCount is the
// readable partitions (EXPIRED ones are not counted). Streams and
// partitions gone since the last listing have their caches dropped.
// Errors: DIS's (ErrUnavailable for DIS.4305 and DIS.4309 after the
// retries).
func (s *Store) ListStreams(ctx context.Context) ([]disbackend.Stream, error) {
	var out []disbackend.Stream
	now := map[string]listedStream{}
	var start *string
	for {
		limit := int32(disapi.MaxListStreamsLimit)
		resp, err := callIdempotent(ctx, s, "list streams", func() (*model.ListStreamsResponse, error) {
			return s.c.ListStreams(&model.ListStreamsRequest{Limit: &limit, StartStreamName: start})
		})
		if err != nil {
			return nil, err
		}
		if resp.StreamInfoList == nil || len(*resp.StreamInfoList) == 0 {
			break
		}
		for i := range *resp.StreamInfoList {
			si := &(*resp.StreamInfoList)[i]
			if si.StreamName == nil {
				continue
			}
			name := *si.StreamName
			start = si.StreamName
			if gatewayStream(name) {
				continue
			}
			st, ls, err := s.listed1(ctx, name, si)
			if errors.Is(err, disbackend.ErrStreamNotFound) {
				continue // deleted meanwhile
			}
			if err != nil {
				return nil, err
			}
			now[name] = ls
			out = append(out, st)
		}
		if resp.HasMoreStreams == nil || !*resp.HasMoreStreams {
			break
		}
	}
	for name, was := range s.listed.swap(now) {
		is, ok := now[name]
		switch {
		case !ok:
			s.log.Info("stream gone from DIS: its caches dropped", zap.String("stream", name))
			s.forgetStream(name)
		case is.readable < was.readable:
			s.log.Info("partitions of a stream expired in DIS: their caches dropped", zap.String("stream", name),
				zap.Int32("readable_partitions", is.readable), zap.Int32("were", was.readable))
			s.forgetPartitions(name, is.readable)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// listed1 is one listed stream: from the listing when the last listing
// knew it unchanged with no DELETED partitions, else described.
func (s *Store) listed1(ctx context.Context, name string, si *model.StreamInfo) (disbackend.Stream, listedStream, error) {
	var created int64
	if si.CreateTime != nil {
		created = *si.CreateTime
	}
	var ret, parts int32
	if si.RetentionPeriod != nil {
		ret = *si.RetentionPeriod
	}
	if si.PartitionCount != nil {
		parts = *si.PartitionCount
	}
	ls := listedStream{sig: listSig(si), writable: parts}
	id, known := s.streams.idOf(name, created)
	if was, ok := s.listed.get(name); !known || !ok || was.sig != ls.sig || was.readable != was.writable {
		st, err := s.DescribeStream(ctx, name)
		if err != nil {
			return disbackend.Stream{}, ls, err
		}
		ls.readable = st.PartitionCount
		return st, ls, nil
	}
	ls.readable = parts
	var ext bool
	st := streamFromDIS(name, id, created, ret, parts, si.Tags, &ext)
	if ext {
		if err := s.loadExtConfig(ctx, name, id, &st); err != nil {
			return disbackend.Stream{}, ls, err
		}
	}
	return st, ls, nil
}

// forgetStream drops everything this Store keeps of a stream: it was
// deleted (by this node or in DIS).
func (s *Store) forgetStream(name string) {
	s.streams.drop(name)
	s.cursors.dropStream(name)
	s.ranges.dropStream(name)
	s.reads.dropFrom(name, 0)
	s.idem.dropStream(name)
	s.compact.forget(name)
	s.dropWriters(name)
}

// dropWriters drops the partition writers of stream name (dropPartition):
// a writer keeps the partition's end offset, which a stream made again
// under the name does not have (its first write would commit the dedupe
// checkpoint at the old end: DIS.4224).
func (s *Store) dropWriters(name string) {
	s.closeMu.Lock()
	var ks []partKey
	for k := range s.writers {
		if k.stream == name {
			ks = append(ks, k)
		}
	}
	s.closeMu.Unlock()
	for _, k := range ks {
		s.dropPartition(k)
	}
}

// forgetPartitions drops the caches of the stream's partitions from
// `from` on (they became EXPIRED: neither readable nor writable).
func (s *Store) forgetPartitions(name string, from int32) {
	s.streams.drop(name)
	s.cursors.dropFrom(name, from)
	s.ranges.dropFrom(name, from)
	s.reads.dropFrom(name, from)
}

func (c *cursorCache) dropFrom(name string, from int32) {
	c.mu.Lock()
	for k := range c.m {
		if k.stream == name && k.part >= from {
			delete(c.m, k)
		}
	}
	c.mu.Unlock()
}

func (c *rangeCache) dropFrom(name string, from int32) {
	c.mu.Lock()
	for k := range c.m {
		if k.stream == name && k.part >= from {
			delete(c.m, k)
		}
	}
	for k := range c.floors {
		if k.stream == name && k.part >= from {
			delete(c.floors, k)
		}
	}
	c.mu.Unlock()
}

// dropFrom empties and forgets the read state (buffered records; flights
// in flight answer only their readers) of the stream's partitions from
// `from` on.
func (c *readCache) dropFrom(name string, from int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, p := range c.m {
		if k.stream != name || k.part < from {
			continue
		}
		p.mu.Lock()
		p.reset(c)
		p.mu.Unlock()
		delete(c.m, k)
	}
}

// reset empties p's buffer; flights in flight answer their readers only.
// Requires p.mu.
func (p *partReads) reset(c *readCache) {
	p.dropSegs(c)
	p.gen++
	p.flights = map[int64]*flight{}
	p.emptyAt, p.rangeEpoch = -1, -1
}
