package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/gateway"
)

// fastGroups makes groups quick for tests: a short initial rebalance delay
// and session timeouts down to 100 ms.
func fastGroups(c *gateway.Config) {
	c.GroupInitialRebalanceDelay = 50 * time.Millisecond
	c.GroupMinSessionTimeout = 100 * time.Millisecond
}

// groupOpts are kgo consumer-group options with short timeouts.
func groupOpts(group string, topics ...string) []kgo.Opt {
	return []kgo.Opt{
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(1500 * time.Millisecond),
		kgo.HeartbeatInterval(100 * time.Millisecond),
		kgo.RebalanceTimeout(5 * time.Second),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.AutoCommitInterval(100 * time.Millisecond),
	}
}

// crashDialer lets a test cut a client off as if its process died: kill
// closes its connections and refuses new ones, so it sends no LeaveGroup.
type crashDialer struct {
	mu     sync.Mutex
	conns  []net.Conn
	killed bool
}

func (d *crashDialer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.killed {
		return nil, errors.New("crashed")
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, host)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

func (d *crashDialer) kill() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.killed = true
	for _, c := range d.conns {
		c.Close()
	}
}

// consumer runs a kgo group consumer's poll loop, recording what it reads
// and what it is assigned.
type consumer struct {
	cl       *kgo.Client
	mu       sync.Mutex
	assigned map[int32]bool
	seen     map[[2]int64]bool // partition, offset
	again    int               // records read again by this consumer
	cancel   context.CancelFunc
	done     chan struct{}
}

func startConsumer(t *testing.T, g *testGateway, opts ...kgo.Opt) *consumer {
	t.Helper()
	c := &consumer{assigned: map[int32]bool{}, seen: map[[2]int64]bool{}, done: make(chan struct{})}
	opts = append([]kgo.Opt{kgo.SeedBrokers(g.addr),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, ps := range m {
				for _, p := range ps {
					c.assigned[p] = true
				}
			}
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, ps := range m {
				for _, p := range ps {
					delete(c.assigned, p)
				}
			}
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, ps := range m {
				for _, p := range ps {
					delete(c.assigned, p)
				}
			}
		}),
	}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	c.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) {
				c.mu.Lock()
				k := [2]int64{int64(r.Partition), r.Offset}
				if c.seen[k] {
					c.again++
				}
				c.seen[k] = true
				c.mu.Unlock()
			})
		}
	}()
	t.Cleanup(c.stop)
	return c
}

// stop ends the poll loop and closes the client (leaving the group).
func (c *consumer) stop() {
	c.cancel()
	<-c.done
	c.cl.Close()
}

func (c *consumer) partitions() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int32
	for p := range c.assigned {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (c *consumer) saw(p int32, o int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen[[2]int64{int64(p), o}]
}

// eventually polls cond every 20 ms until it holds or the deadline passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func produceN(t *testing.T, cl *kgo.Client, topic string, parts, perPartition int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var rs []*kgo.Record
	for p := range parts {
		for i := range perPartition {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(p), Value: []byte(fmt.Sprintf("p%d-%d", p, i))})
		}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestGroupFranzCrashedMember: three franz-go consumers share six
// partitions; one is cut off without LeaveGroup, and after its session
// timeout the other two own all six and consume everything produced
// afterwards, and the committed offsets reach the end of every partition.
func TestGroupFranzCrashedMember(t *testing.T) {
	g := startGateway(t, fastGroups)
	ctx := context.Background()
	const topic, group, parts = "crash.topic", "crash-group", 6
	adm := kadm.NewClient(g.client(t))
	if _, err := adm.CreateTopic(ctx, parts, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	prod := g.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))

	var d crashDialer
	victim := startConsumer(t, g, append(groupOpts(group, topic), kgo.Dialer(d.dial), kgo.RetryTimeout(time.Second))...)
	a := startConsumer(t, g, groupOpts(group, topic)...)
	b := startConsumer(t, g, groupOpts(group, topic)...)
	all := []*consumer{victim, a, b}
	eventually(t, 30*time.Second, "each of 3 consumers owns 2 partitions", func() bool {
		for _, c := range all {
			if len(c.partitions()) != 2 {
				return false
			}
		}
		return true
	})
	produceN(t, prod, topic, parts, 20)
	eventually(t, 30*time.Second, "the first 120 records are consumed", func() bool {
		for p := range int32(parts) {
			for o := range int64(20) {
				if !victim.saw(p, o) && !a.saw(p, o) && !b.saw(p, o) {
					return false
				}
			}
		}
		return true
	})
	victimParts := victim.partitions()
	d.kill()
	eventually(t, 30*time.Second, "the two survivors own all 6 partitions", func() bool {
		pa, pb := a.partitions(), b.partitions()
		own := map[int32]bool{}
		for _, p := range append(pa, pb...) {
			own[p] = true
		}
		return len(pa) == 3 && len(pb) == 3 && len(own) == parts
	})
	produceN(t, prod, topic, parts, 20) // offsets 20..39
	eventually(t, 30*time.Second, "the survivors consume every later record, the victim's old partitions too", func() bool {
		for p := range int32(parts) {
			for o := int64(20); o < 40; o++ {
				if !a.saw(p, o) && !b.saw(p, o) {
					return false
				}
			}
		}
		return true
	})
	eventually(t, 30*time.Second, "committed offsets reach 40 on every partition", func() bool {
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return false
		}
		for p := range int32(parts) {
			o, ok := offs.Lookup(topic, p)
			if !ok || o.At != 40 {
				return false
			}
		}
		return true
	})
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	dg := described[group]
	if dg.State != "Stable" || len(dg.Members) != 2 {
		t.Fatalf("group %s with %d members, want Stable with 2", dg.State, len(dg.Members))
	}
	t.Logf("victim owned %v before it crashed", victimParts)
}

// TestGroupCommitRestartResume: offsets committed by a group member survive
// a gateway restart; a new consumer resumes exactly at them. Meanwhile the
// group, with commits and no members, is listed and described as Empty.
func TestGroupCommitRestartResume(t *testing.T) {
	g := startGateway(t, fastGroups)
	ctx := context.Background()
	const topic, group, parts = "resume.topic", "resume.group", 3
	adm := kadm.NewClient(g.client(t))
	if _, err := adm.CreateTopic(ctx, parts, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	produceN(t, g.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner())), topic, parts, 10)

	c1 := startConsumer(t, g, append(groupOpts(group, topic), kgo.DisableAutoCommit())...)
	eventually(t, 30*time.Second, "all 30 records consumed", func() bool {
		for p := range int32(parts) {
			if !c1.saw(p, 9) {
				return false
			}
		}
		return true
	})
	want := map[int32]int64{0: 4, 1: 7, 2: 10}
	commit := map[string]map[int32]kgo.EpochOffset{topic: {}}
	for p, o := range want {
		commit[topic][p] = kgo.EpochOffset{Epoch: -1, Offset: o}
	}
	var commitErr error
	c1.cl.CommitOffsetsSync(ctx, commit, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
		if err == nil {
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if rp.ErrorCode != 0 {
						commitErr = fmt.Errorf("partition %d: error %d", rp.Partition, rp.ErrorCode)
					}
				}
			}
		}
	})
	if commitErr != nil {
		t.Fatal(commitErr)
	}
	c1.stop()

	g.stop(t)
	g = startGatewayAt(t, g.dir, fastGroups)
	adm = kadm.NewClient(g.client(t))
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if st := described[group].State; st != "Empty" {
		t.Fatalf("after restart the group is %q, want Empty", st)
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lg, ok := listed[group]; !ok || lg.State != "Empty" {
		t.Fatalf("ListGroups: %+v", listed)
	}
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	for p, o := range want {
		if got, _ := offs.Lookup(topic, p); got.At != o {
			t.Fatalf("partition %d: committed %d, want %d", p, got.At, o)
		}
	}

	first := map[int32]int64{}
	var mu sync.Mutex
	c2cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(g.addr)}, append(groupOpts(group, topic), kgo.DisableAutoCommit())...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer c2cl.Close()
	produceN(t, g.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner())), topic, parts, 1) // offset 10 everywhere
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for len(first) < parts {
		fs := c2cl.PollFetches(pctx)
		if pctx.Err() != nil {
			t.Fatalf("first offsets after restart: %v", first)
		}
		fs.EachRecord(func(r *kgo.Record) {
			mu.Lock()
			if _, ok := first[r.Partition]; !ok {
				first[r.Partition] = r.Offset
			}
			mu.Unlock()
		})
	}
	for p, o := range want {
		if first[p] != o {
			t.Fatalf("partition %d resumed at %d, want %d (all: %v)", p, first[p], o, first)
		}
	}
}

// TestGroupStaticRestart: a static member (group.instance.id) that restarts
// within its session gets its old partitions back with no rebalance: the
// generation does not change and the other member keeps its partitions.
func TestGroupStaticRestart(t *testing.T) {
	g := startGateway(t, fastGroups)
	ctx := context.Background()
	const topic, group, parts = "static.topic", "static-group", 4
	adm := kadm.NewClient(g.client(t))
	if _, err := adm.CreateTopic(ctx, parts, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	opts := func(inst string) []kgo.Opt {
		return append(groupOpts(group, topic), kgo.InstanceID(inst), kgo.SessionTimeout(10*time.Second))
	}
	a := startConsumer(t, g, opts("worker-a")...)
	b := startConsumer(t, g, opts("worker-b")...)
	eventually(t, 30*time.Second, "two static members own 2 partitions each", func() bool {
		return len(a.partitions()) == 2 && len(b.partitions()) == 2
	})
	_, genBefore := a.cl.GroupMetadata()
	// Restart b, then a: one of them leads the group, and a restarted
	// static leader gets SkipAssignment (JoinGroup v9, KIP-814).
	members := map[string]*consumer{"worker-a": a, "worker-b": b}
	for _, inst := range []string{"worker-b", "worker-a"} {
		old, other := members[inst], members["worker-a"]
		if inst == "worker-a" {
			other = members["worker-b"]
		}
		oldParts, otherParts := old.partitions(), other.partitions()
		old.stop() // a static member closing sends no LeaveGroup
		restarted := startConsumer(t, g, opts(inst)...)
		members[inst] = restarted
		eventually(t, 30*time.Second, inst+" has its partitions back", func() bool {
			return fmt.Sprint(restarted.partitions()) == fmt.Sprint(oldParts)
		})
		_, genNew := restarted.cl.GroupMetadata()
		_, genOther := other.cl.GroupMetadata()
		if genNew != genBefore || genOther != genBefore {
			t.Fatalf("restart of %s: generation %d before, %d/%d after: a rebalance happened", inst, genBefore, genNew, genOther)
		}
		if got := other.partitions(); fmt.Sprint(got) != fmt.Sprint(otherParts) {
			t.Fatalf("restart of %s: the other member's partitions moved: %v, then %v", inst, otherParts, got)
		}
	}
	a, b2, aParts, bParts := members["worker-a"], members["worker-b"], members["worker-a"].partitions(), members["worker-b"].partitions()
	produceN(t, g.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner())), topic, parts, 1)
	eventually(t, 30*time.Second, "both members consume their partitions", func() bool {
		for _, p := range aParts {
			if !a.saw(p, 0) {
				return false
			}
		}
		for _, p := range bParts {
			if !b2.saw(p, 0) {
				return false
			}
		}
		return true
	})
}
