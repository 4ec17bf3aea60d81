package admin

import (
	"context"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/internal/metrics"
)

// DIS's per-partition limits (docs/dis-api.md §6.1): writes of 1 MB/s or
// 1000 records/s, reads of 2 MB/s.
const (
	disWriteBytesPerSec   = 1 << 20
	disWriteRecordsPerSec = 1000
	disReadBytesPerSec    = 2 << 20
)

// Snapshot is what the lag collector read from the backend and the group
// coordinator at one time: the console's data and the lag metrics. It is
// replaced whole, never changed.
type Snapshot struct {
	Taken  time.Time
	Err    string // the last refresh's error, "" when it succeeded
	Topics []Topic
	Groups []Group
	Apps   []App
}

// Topic is one topic with its partitions.
type Topic struct {
	Name, Stream string
	Partitions   []Partition
	Configs      []KV // retention.ms, cleanup.policy, ...
}

// KV is one key and value, as shown.
type KV struct{ Key, Value string }

// Partition is one partition's offsets, size and rates (since the
// previous snapshot) against DIS's limits.
type Partition struct {
	ID                   int32
	LogStart, End        int64 // Kafka log start offset, high watermark
	Bytes                int64 // -1 when the backend does not tell
	WriteBps, WriteRps   float64
	ReadBps              float64
	WritePct, ReadPct    float64 // of DIS's limits, the larger of bytes and records for writes
	WriteRecordsPctLimit float64
}

// Group is one consumer group with its members and lag.
type Group struct {
	ID, State, ProtocolType, Protocol string
	App                               string // its DIS app
	Members                           []Member
	Offsets                           []GroupOffset
	Lag                               int64 // the sum over Offsets
}

// Member is one group member and what it was assigned.
type Member struct {
	ID, ClientID, Host string
	Assigned           []string // "topic[0 1 2]"
}

// GroupOffset is a committed offset (a DIS checkpoint) and its lag.
type GroupOffset struct {
	Topic, Stream string
	Partition     int32
	Committed     int64
	End           int64
	Lag           int64
}

// App is a DIS app (a group's offsets live in its checkpoints).
type App struct {
	Name, Group string
	Created     time.Time
}

// refresh reads a new snapshot. prev gives the rates' base.
func (s *Server) refresh(ctx context.Context, prev *Snapshot, prevTraffic map[metrics.PartitionKey]metrics.PartitionTraffic) (*Snapshot, map[metrics.PartitionKey]metrics.PartitionTraffic) {
	snap := &Snapshot{Taken: time.Now()}
	b := s.opts.Backend
	traffic := s.opts.Metrics.Traffic()
	var dt float64
	if prev != nil {
		dt = snap.Taken.Sub(prev.Taken).Seconds()
	}
	streams, err := b.ListStreams(ctx)
	if err != nil {
		snap.Err = "list streams: " + err.Error()
		return snap, prevTraffic
	}
	sort.Slice(streams, func(i, j int) bool { return streams[i].TopicName < streams[j].TopicName })
	ends := make(map[string]map[int32]int64)
	streamOf := make(map[string]string)
	sizer, _ := b.(disbackend.LogDirDescriber)
	for _, st := range streams {
		name := st.TopicName
		if name == "" {
			name = st.Name
		}
		t := Topic{Name: name, Stream: st.Name, Configs: topicConfigs(st.Config)}
		streamOf[name] = st.Name
		ends[name] = make(map[int32]int64)
		for p := int32(0); p < st.PartitionCount; p++ {
			part := Partition{ID: p, Bytes: -1}
			r, err := b.Range(st.Name, p)
			if err != nil {
				continue // a partition gone (DIS scale-down): not listed
			}
			part.LogStart, part.End = r.First, r.Next
			ends[name][p] = r.Next
			if sizer != nil {
				if n, err := sizer.PartitionBytes(st.Name, p); err == nil {
					part.Bytes = n
				}
			}
			k := metrics.PartitionKey{Topic: name, Partition: p}
			if old, ok := prevTraffic[k]; ok && dt > 0 {
				now := traffic[k]
				part.WriteBps = float64(now.BytesIn-old.BytesIn) / dt
				part.WriteRps = float64(now.RecordsIn-old.RecordsIn) / dt
				part.ReadBps = float64(now.BytesOut-old.BytesOut) / dt
			}
			part.WritePct = 100 * max(part.WriteBps/disWriteBytesPerSec, part.WriteRps/disWriteRecordsPerSec)
			part.ReadPct = 100 * part.ReadBps / disReadBytesPerSec
			t.Partitions = append(t.Partitions, part)
		}
		snap.Topics = append(snap.Topics, t)
	}

	if apps, err := b.ListApps(ctx); err == nil {
		for _, a := range apps {
			snap.Apps = append(snap.Apps, App{Name: a.Name, Group: a.GroupID, Created: a.CreatedAt})
		}
		sort.Slice(snap.Apps, func(i, j int) bool { return snap.Apps[i].Name < snap.Apps[j].Name })
	} else if snap.Err == "" {
		snap.Err = "list apps: " + err.Error()
	}

	gc := s.opts.Gateway.Coordinator()
	lreq := kmsg.NewPtrListGroupsRequest()
	lreq.Version = 5
	lresp := gc.ListGroups(ctx, lreq)
	if lresp.ErrorCode != 0 {
		if snap.Err == "" {
			snap.Err = "list groups: " + kerr.ErrorForCode(lresp.ErrorCode).Error()
		}
		return snap, traffic
	}
	ids := make([]string, 0, len(lresp.Groups))
	for _, g := range lresp.Groups {
		ids = append(ids, g.Group)
	}
	dreq := kmsg.NewPtrDescribeGroupsRequest()
	dreq.Version = 5
	dreq.Groups = ids
	desc := make(map[string]kmsg.DescribeGroupsResponseGroup)
	if len(ids) > 0 {
		for _, g := range gc.DescribeGroups(ctx, dreq).Groups {
			desc[g.Group] = g
		}
	}
	for _, lg := range lresp.Groups {
		g := Group{ID: lg.Group, State: lg.GroupState, ProtocolType: lg.ProtocolType}
		g.App, _ = disbackend.AppNameForGroup(lg.Group)
		if d, ok := desc[lg.Group]; ok {
			g.State, g.Protocol = d.State, d.Protocol
			for _, m := range d.Members {
				mem := Member{ID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost}
				if d.ProtocolType == "consumer" {
					var a kmsg.ConsumerMemberAssignment
					if a.ReadFrom(m.MemberAssignment) == nil {
						for _, t := range a.Topics {
							mem.Assigned = append(mem.Assigned, assignedText(t.Topic, t.Partitions))
						}
					}
				}
				g.Members = append(g.Members, mem)
			}
		}
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = lg.Group
		og := gc.FetchOffsets(ctx, rg)
		for _, t := range og.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 || p.Offset < 0 {
					continue
				}
				o := GroupOffset{Topic: t.Topic, Stream: streamOf[t.Topic], Partition: p.Partition, Committed: p.Offset, End: -1}
				if end, ok := ends[t.Topic][p.Partition]; ok {
					o.End = end
					o.Lag = max(end-p.Offset, 0)
					g.Lag += o.Lag
				}
				g.Offsets = append(g.Offsets, o)
			}
		}
		sort.Slice(g.Offsets, func(i, j int) bool {
			a, b := g.Offsets[i], g.Offsets[j]
			return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
		})
		snap.Groups = append(snap.Groups, g)
	}
	return snap, traffic
}

func assignedText(topic string, parts []int32) string {
	s := topic + "["
	for i, p := range parts {
		if i > 0 {
			s += " "
		}
		s += itoa(int64(p))
	}
	return s + "]"
}

func topicConfigs(c disbackend.StreamConfig) []KV {
	c = c.WithDefaults()
	ret := "-1"
	if c.Retention > 0 {
		ret = itoa(c.Retention.Milliseconds())
	}
	out := []KV{{"retention.ms", ret}, {"cleanup.policy", c.CleanupPolicy},
		{"max.message.bytes", itoa(int64(c.MaxMessageBytes))}, {"message.timestamp.type", c.TimestampType.String()}}
	if c.RecordFormat != "" {
		out = append(out, KV{"dis.record.format", c.RecordFormat})
	}
	return out
}
