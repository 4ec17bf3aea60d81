package main

// Several gateway nodes (docs/cluster.md) as a platform team runs them:
// three `disgw serve --backend dis` nodes in cluster mode, each on its own
// 127.0.0.1 port, in front of one `disgw dislocal`, with short cluster
// timings (rollingTimings) so that a rebalance takes a couple of seconds.
// This file has the fixture (startRollCluster), a rolling restart under
// load and a TCP load balancer as every client's bootstrap;
// cluster_tools_test.go has kcat, the Python clients and admin writes
// through a node that is not the controller.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// The cluster timings of these tests (docs/cluster.md §2 and §4). After a
// clean shutdown a partition that moved is written again after about the
// join window + cluster_settle + cluster_lease + dis_request_timeout
// (docs/cluster.md §8): rcCleanFailover.
const (
	rcHeartbeat      = 200 * time.Millisecond
	rcJoinWindow     = time.Second
	rcSettle         = 500 * time.Millisecond
	rcLease          = time.Second
	rcRequestTimeout = 2 * time.Second
	rcMetadata       = time.Second // dis_metadata_refresh, unless a test sets its own
	rcCleanFailover  = rcJoinWindow + rcSettle + rcLease + rcRequestTimeout
)

var rollingTimings = []string{
	"DISGW_CLUSTER_HEARTBEAT=" + rcHeartbeat.String(),
	"DISGW_CLUSTER_JOIN_WINDOW=" + rcJoinWindow.String(),
	"DISGW_CLUSTER_SETTLE=" + rcSettle.String(),
	"DISGW_CLUSTER_LEASE=" + rcLease.String(),
	"DISGW_DIS_REQUEST_TIMEOUT=" + rcRequestTimeout.String(),
	"DISGW_DIS_METADATA_REFRESH=" + rcMetadata.String(),
}

// rollCluster is n cluster nodes in front of one dislocal.
type rollCluster struct {
	t     *testing.T
	dir   string
	dis   *disLocal
	nodes []*rollNode
}

// rollNode is one node of a rollCluster.
type rollNode struct {
	id     int32
	addr   string // its Kafka address, the same across restarts
	env    []string
	gw     *gatewayProc
	starts int
}

// rollClusterOpts is how startRollCluster starts its processes.
type rollClusterOpts struct {
	nodes   int      // 3 when 0
	env     []string // every node's environment, after the cluster settings
	disArgs []string // dislocal's flags, after the group timings
}

// rollAccount is the DIS account of the nodes' dislocal.
var rollAccount = disAccount{"cluster-access-key", "cluster-secret-key", "clusterproject"}

// startRollCluster starts dislocal (DIS's group session 3 s, its join
// window 1 s) and the nodes, with ids 1..n, and waits until every node
// answers Metadata with the same view of all of them.
func startRollCluster(t *testing.T, o rollClusterOpts) *rollCluster {
	t.Helper()
	if o.nodes == 0 {
		o.nodes = 3
	}
	c := &rollCluster{t: t, dir: t.TempDir()}
	c.dis = startDISLocal(t, disLocalOpts{account: rollAccount,
		args: append([]string{"--group-session-timeout", "3s", "--group-sync-delay", "1s"}, o.disArgs...)})
	for i := range o.nodes {
		n := &rollNode{id: int32(i + 1)}
		n.env = append([]string{"DISGW_CLUSTER=true", fmt.Sprintf("DISGW_NODE_ID=%d", n.id)}, rollingTimings...)
		n.env = append(n.env, o.env...)
		c.nodes = append(c.nodes, n)
		c.startNode(n)
	}
	c.waitView(0)
	return c
}

// addrs are the nodes' Kafka addresses.
func (c *rollCluster) addrs() []string {
	var a []string
	for _, n := range c.nodes {
		a = append(a, n.addr)
	}
	return a
}

// node is the node with id.
func (c *rollCluster) node(id int32) *rollNode {
	for _, n := range c.nodes {
		if n.id == id {
			return n
		}
	}
	c.t.Fatalf("no node %d", id)
	return nil
}

// startNode starts n, on its address once it had one, and waits until it
// listens. A port just freed by the node's previous process is taken
// again (SO_REUSEADDR); the start is retried a few times in case it is
// still held.
func (c *rollCluster) startNode(n *rollNode) {
	t := c.t
	t.Helper()
	listen := n.addr
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	for attempt := 0; ; attempt++ {
		n.starts++
		ready := filepath.Join(c.dir, fmt.Sprintf("node-%d-ready-%d", n.id, n.starts))
		n.gw = startGateway(t, gatewayOpts{dis: c.dis, listen: listen, ready: ready, env: n.env, noWait: true})
		deadline := time.Now().Add(60 * time.Second)
	wait:
		for {
			if b, err := os.ReadFile(ready); err == nil && len(b) > 0 {
				n.gw.ready, n.gw.addr = ready, strings.TrimSpace(string(b))
				if n.addr == "" {
					n.addr = n.gw.addr
				}
				return
			}
			select {
			case <-n.gw.done:
				if attempt >= 20 {
					t.Fatalf("node %d exited before it was ready: %v\n%s", n.id, n.gw.err, n.gw.output(t))
				}
				time.Sleep(250 * time.Millisecond)
				break wait
			case <-time.After(20 * time.Millisecond):
				if time.Now().After(deadline) {
					t.Fatalf("node %d not ready within 60s", n.id)
				}
			}
		}
	}
}

// restartNode stops n with SIGTERM (exit code 0 wanted) and starts it
// again on its address; it returns how long the stop took.
func (c *rollCluster) restartNode(n *rollNode) time.Duration {
	t := c.t
	t.Helper()
	start := time.Now()
	if code := n.gw.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("node %d: exit code after SIGTERM = %d, want 0", n.id, code)
	}
	stopped := time.Since(start)
	c.startNode(n)
	return stopped
}

// pinToNode makes a client connect every broker to addr: the client, whatever
// node it means, talks to that one node only. Its ApiVersions stops at v4:
// v5 (KIP-1242) tells the node which node id the client meant, and a node
// refuses a connection meant for another with REBOOTSTRAP_REQUIRED.
func pinToNode(addr string) []kgo.Opt {
	d := net.Dialer{Timeout: 5 * time.Second}
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(18, 4) // ApiVersions
	return []kgo.Opt{kgo.MaxVersions(versions), kgo.Dialer(func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	})}
}

// rollView is what one node's Metadata answers of the cluster.
type rollView struct {
	epoch      int32  // the leader epoch of its partitions (the cluster epoch)
	controller int32  // controller_id
	brokers    string // "id=host:port" sorted, space-separated
	leaders    string // "topic/partition=leader" of every topic, sorted
	topics     map[string]int
}

func (v rollView) String() string {
	return fmt.Sprintf("epoch %d, controller %d, brokers [%s], %d topics", v.epoch, v.controller, v.brokers, len(v.topics))
}

// rollMetadata asks addr's node alone for the metadata of every topic.
func rollMetadata(ctx context.Context, addr string) (rollView, error) {
	cl, err := kgo.NewClient(append(pinToNode(addr), kgo.SeedBrokers(addr), kgo.RequestRetries(0))...)
	if err != nil {
		return rollView{}, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return rollView{}, err
	}
	v := rollView{controller: resp.ControllerID, topics: map[string]int{}, epoch: -1}
	var bs, ls []string
	for _, b := range resp.Brokers {
		bs = append(bs, fmt.Sprintf("%d=%s", b.NodeID, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))))
	}
	for _, tp := range resp.Topics {
		if tp.ErrorCode != 0 || tp.Topic == nil {
			continue
		}
		v.topics[*tp.Topic] = len(tp.Partitions)
		for _, p := range tp.Partitions {
			ls = append(ls, fmt.Sprintf("%s/%d=%d", *tp.Topic, p.Partition, p.Leader))
			v.epoch = max(v.epoch, p.LeaderEpoch)
		}
	}
	sort.Strings(bs)
	sort.Strings(ls)
	v.brokers, v.leaders = strings.Join(bs, " "), strings.Join(ls, " ")
	return v, nil
}

// waitView waits until every node answers Metadata with one view, newer
// than epoch after, listing every node at its address, and returns it.
func (c *rollCluster) waitView(after int32) rollView {
	t := c.t
	t.Helper()
	var want []string
	for _, n := range c.nodes {
		want = append(want, fmt.Sprintf("%d=%s", n.id, n.addr))
	}
	sort.Strings(want)
	wantBrokers := strings.Join(want, " ")
	deadline := time.Now().Add(90 * time.Second)
	var last string
	for {
		var views []rollView
		last = ""
		for _, n := range c.nodes {
			v, err := rollMetadata(context.Background(), n.addr)
			switch {
			case err != nil:
				last = fmt.Sprintf("node %d: %v", n.id, err)
			case v.brokers != wantBrokers:
				last = fmt.Sprintf("node %d lists brokers [%s], want [%s]", n.id, v.brokers, wantBrokers)
			case v.epoch <= after:
				last = fmt.Sprintf("node %d answers epoch %d, want above %d", n.id, v.epoch, after)
			case len(views) > 0 && (v.epoch != views[0].epoch || v.controller != views[0].controller || v.leaders != views[0].leaders):
				last = fmt.Sprintf("node %d answers %v, node %d %v (leaders differ: %v)", n.id, v, c.nodes[0].id, views[0], v.leaders != views[0].leaders)
			}
			if last != "" {
				break
			}
			views = append(views, v)
		}
		if last == "" {
			return views[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no common view of the %d nodes within 90s: %s", len(c.nodes), last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// createTopic creates topic with partitions through the cluster (kadm
// sends it to the controller) and waits until every node leads its share.
func (c *rollCluster) createTopic(ctx context.Context, topic string, partitions int32) {
	t := c.t
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, -1, nil, topic); err != nil {
		t.Fatal(err)
	}
	eventually(t, "every node lists topic "+topic, func() string {
		for _, n := range c.nodes {
			v, err := rollMetadata(ctx, n.addr)
			if err != nil {
				return err.Error()
			}
			if v.topics[topic] != int(partitions) {
				return fmt.Sprintf("node %d: %d partitions", n.id, v.topics[topic])
			}
		}
		return ""
	})
}

// rcAt is where a record was acknowledged or read.
type rcAt struct {
	part   int32
	offset int64
}

// rcProducer is an idempotent franz-go producer (its defaults) writing
// uniquely valued records to a topic at a steady rate, remembering where
// each was acknowledged and the longest pause between acknowledgements.
type rcProducer struct {
	name string
	cl   *kgo.Client
	stop chan struct{}
	done chan struct{}

	mu        sync.Mutex
	acked     map[string]rcAt
	failed    int
	errs      []string
	lastAck   time.Time
	maxGap    time.Duration
	maxGapEnd time.Time
	partLast  map[int32]time.Time
	partGap   map[int32]time.Duration
}

// startRollProducer starts a producer seeded with seeds, sending a record every
// interval.
func startRollProducer(t *testing.T, name, topic string, seeds []string, interval time.Duration) *rcProducer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(5*time.Millisecond), kgo.ClientID(name))
	if err != nil {
		t.Fatal(err)
	}
	p := &rcProducer{name: name, cl: cl, stop: make(chan struct{}), done: make(chan struct{}),
		acked: map[string]rcAt{}, partLast: map[int32]time.Time{}, partGap: map[int32]time.Duration{}}
	t.Cleanup(cl.Close)
	go func() {
		defer close(p.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for seq := 0; ; seq++ {
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
			v := fmt.Sprintf("%s-%d", name, seq)
			cl.Produce(context.Background(), &kgo.Record{Key: []byte(v), Value: []byte(v)}, p.onAck)
		}
	}()
	return p
}

func (p *rcProducer) onAck(r *kgo.Record, err error) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.failed++
		if len(p.errs) < 10 {
			p.errs = append(p.errs, fmt.Sprintf("%s: %v", r.Value, err))
		}
		return
	}
	p.acked[string(r.Value)] = rcAt{r.Partition, r.Offset}
	if !p.lastAck.IsZero() && now.Sub(p.lastAck) > p.maxGap {
		p.maxGap, p.maxGapEnd = now.Sub(p.lastAck), now
	}
	p.lastAck = now
	if last, ok := p.partLast[r.Partition]; ok && now.Sub(last) > p.partGap[r.Partition] {
		p.partGap[r.Partition] = now.Sub(last)
	}
	p.partLast[r.Partition] = now
}

func (p *rcProducer) ackedCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked)
}

// finish stops sending and waits until every record sent is answered.
func (p *rcProducer) finish(t *testing.T) {
	t.Helper()
	close(p.stop)
	<-p.done
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := p.cl.Flush(ctx); err != nil {
		t.Fatalf("producer %s: flush: %v", p.name, err)
	}
}

// longestPartitionPause is the longest pause between two
// acknowledgements of one partition, and the partition.
func (p *rcProducer) longestPartitionPause() (time.Duration, int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var d time.Duration
	part := int32(-1)
	for k, g := range p.partGap {
		if g > d {
			d, part = g, k
		}
	}
	return d, part
}

// rcGroup is franz-go consumers of one group (classic protocol, its
// cooperative-sticky balancer), auto-committing every 500 ms, recording
// every record read, the generations their callbacks saw and the commits
// the coordinator refused.
type rcGroup struct {
	t       *testing.T
	group   string
	members []*kgo.Client
	wg      sync.WaitGroup
	ctx     context.Context
	cancel  context.CancelFunc

	mu           sync.Mutex
	read         map[string]int // value → times read
	readAt       map[string]rcAt
	reads        int
	events       []rcGroupEvent
	refused      int
	commits      int
	firstRefusal time.Time
	refusals     []string
	// logs are the members' own client logs (info and above), the last
	// lines of each, shown when the group rebalanced unexpectedly.
	logs []*clientLog
}

// clientLog keeps the last clientLogLines lines a kgo client logs.
type clientLog struct {
	mu    sync.Mutex
	lines []string
}

const clientLogLines = 300

func (l *clientLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, strings.TrimRight(string(p), "\n"))
	if len(l.lines) > clientLogLines {
		l.lines = slices.Delete(l.lines, 0, len(l.lines)-clientLogLines)
	}
	return len(p), nil
}

func (l *clientLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// rcGroupEvent is one rebalance callback of a member.
type rcGroupEvent struct {
	at         time.Time
	member     int
	kind       string // assigned, revoked, lost
	generation int32
	partitions int
}

// startRollGroup starts one member per seeds entry (each seeded with its
// entry's addresses) in group, reading topic from its start.
func startRollGroup(t *testing.T, group, topic string, seeds [][]string) *rcGroup {
	t.Helper()
	g := &rcGroup{t: t, group: group, read: map[string]int{}, readAt: map[string]rcAt{}}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	for i, s := range seeds {
		event := func(kind string) func(context.Context, *kgo.Client, map[string][]int32) {
			return func(_ context.Context, cl *kgo.Client, ps map[string][]int32) {
				_, gen := cl.GroupMetadata()
				n := 0
				for _, p := range ps {
					n += len(p)
				}
				g.mu.Lock()
				g.events = append(g.events, rcGroupEvent{time.Now(), i, kind, gen, n})
				g.mu.Unlock()
			}
		}
		logs := &clientLog{}
		g.logs = append(g.logs, logs)
		cl, err := kgo.NewClient(kgo.SeedBrokers(s...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.WithLogger(kgo.BasicLogger(logs, kgo.LogLevelInfo, func() string { return time.Now().Format("15:04:05.000 ") })),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AutoCommitInterval(500*time.Millisecond),
			kgo.FetchMaxWait(500*time.Millisecond), kgo.ClientID(fmt.Sprintf("%s-%d", group, i)),
			kgo.OnPartitionsAssigned(event("assigned")), kgo.OnPartitionsRevoked(event("revoked")),
			kgo.OnPartitionsLost(event("lost")), kgo.AutoCommitCallback(g.onCommit))
		if err != nil {
			t.Fatal(err)
		}
		g.members = append(g.members, cl)
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			for {
				fs := cl.PollFetches(g.ctx)
				if g.ctx.Err() != nil {
					return
				}
				g.mu.Lock()
				fs.EachRecord(func(r *kgo.Record) {
					g.reads++
					g.read[string(r.Value)]++
					g.readAt[string(r.Value)] = rcAt{r.Partition, r.Offset}
				})
				g.mu.Unlock()
			}
		}()
	}
	t.Cleanup(g.close)
	return g
}

func (g *rcGroup) onCommit(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.commits++
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			g.refused++
			g.refusals = append(g.refusals, err.Error())
		}
		return
	}
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if p.ErrorCode != 0 {
				if g.refused == 0 {
					g.firstRefusal = time.Now()
				}
				g.refused++
				if len(g.refusals) < 20 {
					g.refusals = append(g.refusals, fmt.Sprintf("%s[%d]: %v", tp.Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode)))
				}
			}
		}
	}
}

// close stops the members (each leaves the group, committing first).
func (g *rcGroup) close() {
	if g.ctx.Err() != nil {
		return
	}
	g.cancel()
	g.wg.Wait()
	for _, cl := range g.members {
		cl.Close()
	}
}

// waitRead waits until every value in want has been read.
func (g *rcGroup) waitRead(t *testing.T, want map[string]rcAt, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		g.mu.Lock()
		missing := 0
		var example string
		for v := range want {
			if g.read[v] == 0 {
				missing++
				example = v
			}
		}
		g.mu.Unlock()
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s: %d of %d acknowledged records never read (one: %s at %v)", g.group, missing, len(want), example, want[example])
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitStable waits until every member is assigned in one generation (its
// last assignment callback's, the client's current one) and returns it.
func (g *rcGroup) waitStable(t *testing.T, within time.Duration) int32 {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		_, evs := g.generations(time.Time{})
		last := map[int]int32{}
		for _, e := range evs {
			if e.kind == "assigned" {
				last[e.member] = e.generation
			}
		}
		gen, why := int32(-1), ""
		for i, m := range g.members {
			_, mgen := m.GroupMetadata()
			a, ok := last[i]
			switch {
			case !ok || a != mgen || mgen <= 0:
				why = fmt.Sprintf("member %d in generation %d, last assigned in %d", i, mgen, a)
			case gen != -1 && mgen != gen:
				why = fmt.Sprintf("members in generations %d and %d", gen, mgen)
			}
			gen = mgen
		}
		if why == "" {
			return gen
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s not Stable within %v: %s", g.group, within, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// generations are the generations the members' callbacks saw since
// (sorted, once each), and the callbacks.
func (g *rcGroup) generations(since time.Time) ([]int32, []rcGroupEvent) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var gens []int32
	var evs []rcGroupEvent
	for _, e := range g.events {
		if e.at.Before(since) {
			continue
		}
		evs = append(evs, e)
		if !slices.Contains(gens, e.generation) {
			gens = append(gens, e.generation)
		}
	}
	slices.Sort(gens)
	return gens, evs
}

// rollCommitWatch reads a group's committed offsets every 250 ms through the
// cluster and counts every offset that went backwards.
type rollCommitWatch struct {
	stop chan struct{}
	done chan struct{}

	mu        sync.Mutex
	max       map[int32]int64
	backwards []string
	reads     int
}

func watchRollCommits(t *testing.T, seeds []string, group string) *rollCommitWatch {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	w := &rollCommitWatch{stop: make(chan struct{}), done: make(chan struct{}), max: map[int32]int64{}}
	adm := kadm.NewClient(cl)
	go func() {
		defer close(w.done)
		defer cl.Close()
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			offs, err := adm.FetchOffsets(ctx, group)
			cancel()
			if err != nil {
				continue
			}
			w.mu.Lock()
			w.reads++
			offs.Each(func(o kadm.OffsetResponse) {
				if o.Err != nil {
					return
				}
				if prev, ok := w.max[o.Partition]; ok && o.At < prev {
					w.backwards = append(w.backwards, fmt.Sprintf("%s[%d] %d after %d", o.Topic, o.Partition, o.At, prev))
				}
				w.max[o.Partition] = max(w.max[o.Partition], o.At)
			})
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *rollCommitWatch) finish() (reads int, backwards []string) {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reads, w.backwards
}

// checkRollTopic reads topic in full through addr and checks that every
// acknowledged record is at the offset it was acknowledged with and that
// no value is stored twice; it returns how many records it read.
func checkRollTopic(t *testing.T, addr, topic string, acked map[string]rcAt) int {
	t.Helper()
	stored := map[string][]rcAt{}
	total := 0
	for part, recs := range readTopic(t, addr, topic) {
		for _, r := range recs {
			stored[string(r.Value)] = append(stored[string(r.Value)], rcAt{part, r.Offset})
			total++
		}
	}
	var dups, missing, moved int
	var odd []string
	for v, at := range stored {
		if len(at) > 1 {
			dups += len(at) - 1
			if len(odd) < 30 {
				odd = append(odd, fmt.Sprintf("%s stored at %v", v, at))
			}
		}
	}
	for v, a := range acked {
		at := stored[v]
		switch {
		case len(at) == 0:
			missing++
			if len(odd) < 30 {
				odd = append(odd, fmt.Sprintf("%s acknowledged at %v, not stored", v, a))
			}
		case at[0] != a:
			moved++
			if len(odd) < 30 {
				odd = append(odd, fmt.Sprintf("%s acknowledged at %v, stored at %v", v, a, at))
			}
		}
	}
	for _, o := range odd {
		t.Log(o)
	}
	if dups > 0 || missing > 0 || moved > 0 {
		t.Errorf("topic %s: %d records stored, %d acknowledged: %d duplicates, %d acknowledged records missing, %d acknowledged at another offset",
			topic, total, len(acked), dups, missing, moved)
	}
	return total
}

// TestClusterRollingRestart: three nodes; two idempotent franz-go
// producers seeded with all three write a record every 4 ms each to a
// topic of 6 partitions, and a group of 3 franz-go consumers (each seeded
// at another node) reads and commits. Once the group is Stable, each node
// in turn is stopped with SIGTERM (it leaves the nodes' group), started
// again on its address, and the next waits until every node answers with
// a view of all three. Then: every acknowledged record is stored once, at
// the offset its producer was told; the group read them all and did not
// rebalance (its coordinator moved with its state); no committed offset
// went backwards; no record failed. It logs the longest pause between two
// acknowledgements of one producer (and of one partition) beside
// docs/cluster.md §8's failover after a clean shutdown. Subtest "fast" has
// dislocal answer at once, "latency" after 100 ms + 0-200 ms.
func TestClusterRollingRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("long: a rolling restart of three nodes under load")
	}
	t.Parallel()
	t.Run("fast", func(t *testing.T) { testRollingRestart(t, nil) })
	t.Run("latency", func(t *testing.T) {
		testRollingRestart(t, []string{"--fault-latency", "100ms", "--fault-jitter", "200ms"})
	})
}

func testRollingRestart(t *testing.T, disArgs []string) {
	c := startRollCluster(t, rollClusterOpts{disArgs: disArgs})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const topic, group = "rolling", "rolling-group"
	c.createTopic(ctx, topic, 6)
	view := c.waitView(0)
	t.Logf("cluster up: %v", view)

	all := c.addrs()
	prods := []*rcProducer{
		startRollProducer(t, "p0", topic, all, 4*time.Millisecond),
		startRollProducer(t, "p1", topic, all, 4*time.Millisecond),
	}
	var seeds [][]string
	for _, a := range all {
		seeds = append(seeds, []string{a})
	}
	g := startRollGroup(t, group, topic, seeds)
	watch := watchRollCommits(t, all, group)

	acked := func() int { return prods[0].ackedCount() + prods[1].ackedCount() }
	gen := g.waitStable(t, 60*time.Second)
	stable := time.Now()
	t.Logf("group %s Stable in generation %d with 3 members", group, gen)
	time.Sleep(2 * time.Second)
	if acked() == 0 {
		t.Fatal("nothing acknowledged before the restarts")
	}
	for _, n := range c.nodes {
		before := acked()
		start := time.Now()
		stop := c.restartNode(n)
		listening := time.Since(start)
		view = c.waitView(view.epoch)
		t.Logf("node %d restarted: stopped in %v, listening again after %v, view with it after %v (%v); %d records acknowledged meanwhile",
			n.id, stop.Round(time.Millisecond), listening.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), view, acked()-before)
		time.Sleep(3 * time.Second)
	}
	time.Sleep(2 * time.Second)
	for _, p := range prods {
		p.finish(t)
	}
	want := map[string]rcAt{}
	for _, p := range prods {
		p.mu.Lock()
		for v, a := range p.acked {
			want[v] = a
		}
		pause, pauseEnd := p.maxGap, p.maxGapEnd
		failed, errs, n := p.failed, p.errs, len(p.acked)
		p.mu.Unlock()
		partPause, part := p.longestPartitionPause()
		t.Logf("producer %s: %d acknowledged, %d failed; longest pause between acknowledgements %v (ended %s), of one partition %v (partition %d)",
			p.name, n, failed, pause.Round(time.Millisecond), pauseEnd.Format("15:04:05.000"), partPause.Round(time.Millisecond), part)
		if failed > 0 {
			t.Errorf("producer %s: %d records failed: %q", p.name, failed, errs)
		}
	}
	t.Logf("docs/cluster.md §8, failover after a clean shutdown on these timings: join window %v + cluster_settle %v + cluster_lease %v + dis_request_timeout %v = %v",
		rcJoinWindow, rcSettle, rcLease, rcRequestTimeout, rcCleanFailover)

	g.waitRead(t, want, 90*time.Second)
	time.Sleep(time.Second) // a last auto-commit
	reads, backwards := watch.finish()
	gens, evs := g.generations(stable) // before the members leave
	g.close()
	for _, e := range evs {
		t.Logf("group callback at %s: member %d %s in generation %d, %d partitions", e.at.Format("15:04:05.000"), e.member, e.kind, e.generation, e.partitions)
	}
	g.mu.Lock()
	t.Logf("group %s: %d records read for %d acknowledged (%d read more than once), generations since Stable %v, %d commits, %d refused (first at %s) %q; %d reads of the committed offsets, %d backwards",
		group, g.reads, len(want), g.reads-len(g.read), gens, g.commits, g.refused, g.firstRefusal.Format("15:04:05.000"), g.refusals, reads, len(backwards))
	g.mu.Unlock()
	if len(backwards) > 0 {
		t.Errorf("committed offsets went backwards %d times: %q", len(backwards), backwards)
	}
	if len(evs) > 0 {
		// Each coordinator that took the group over restored it from
		// __disgw_groups (docs/cluster.md §6): its members go on in
		// their generation, as in Kafka when a coordinator moves.
		t.Errorf("the group rebalanced during the rolling restart (generations %v), it was Stable in %d", gens, gen)
		for i, l := range g.logs {
			t.Logf("member %d's client log (last %d lines):\n%s", i, clientLogLines, l)
		}
	}
	n := checkRollTopic(t, all[0], topic, want)
	t.Logf("topic %s: %d records stored, %d acknowledged", topic, n, len(want))
}

// tcpLB is a TCP load balancer: each connection it accepts goes to the
// next backend, round-robin.
type tcpLB struct {
	ln       net.Listener
	backends []string
	next     atomic.Uint64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]bool
	closed   bool
}

func startTCPLB(t *testing.T, backends []string) *tcpLB {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lb := &tcpLB{ln: ln, backends: backends, conns: map[net.Conn]bool{}}
	lb.wg.Add(1)
	go func() {
		defer lb.wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			b := backends[(lb.next.Add(1)-1)%uint64(len(backends))]
			lb.wg.Add(1)
			go func() {
				defer lb.wg.Done()
				lb.pipe(in, b)
			}()
		}
	}()
	t.Cleanup(lb.close)
	return lb
}

func (lb *tcpLB) addr() string { return lb.ln.Addr().String() }

// accepted is how many connections the balancer took.
func (lb *tcpLB) accepted() uint64 { return lb.next.Load() }

func (lb *tcpLB) track(c net.Conn, on bool) bool {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if on && lb.closed {
		return false
	}
	if on {
		lb.conns[c] = true
	} else {
		delete(lb.conns, c)
	}
	return true
}

func (lb *tcpLB) pipe(in net.Conn, backend string) {
	if !lb.track(in, true) {
		in.Close()
		return
	}
	defer lb.track(in, false)
	defer in.Close()
	out, err := net.DialTimeout("tcp", backend, 5*time.Second)
	if err != nil {
		return
	}
	if !lb.track(out, true) {
		out.Close()
		return
	}
	defer lb.track(out, false)
	defer out.Close()
	done := make(chan struct{}, 2)
	go func() { io.Copy(out, in); done <- struct{}{} }()
	go func() { io.Copy(in, out); done <- struct{}{} }()
	<-done
}

func (lb *tcpLB) close() {
	lb.ln.Close()
	lb.mu.Lock()
	lb.closed = true
	for c := range lb.conns {
		c.Close()
	}
	lb.mu.Unlock()
	lb.wg.Wait()
}

// TestClusterLoadBalancer: three nodes, each advertising its own address,
// behind a round-robin TCP load balancer that is every client's only
// bootstrap. A producer writes through it and a group of 3 franz-go
// consumers reads; once the group is Stable with its 3 members, for 20 s
// in which no member comes or goes the group stays in that generation
// (DescribeGroups and the members' callbacks), no commit is refused, and
// every acknowledged record is read.
func TestClusterLoadBalancer(t *testing.T) {
	if testing.Short() {
		t.Skip("long: a consumer group behind a TCP load balancer for 20 s")
	}
	t.Parallel()
	c := startRollCluster(t, rollClusterOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topic, group = "balanced", "balanced-group"
	c.createTopic(ctx, topic, 6)
	view := c.waitView(0)
	lb := startTCPLB(t, c.addrs())
	bootstrap := []string{lb.addr()}

	// The load balancer answers Metadata of whichever node it picked: the
	// same brokers, each at its own address.
	for i := range 3 {
		v, err := rollMetadata(ctx, lb.addr())
		if err != nil {
			t.Fatal(err)
		}
		if v.brokers != view.brokers || v.leaders != view.leaders {
			t.Fatalf("Metadata through the load balancer (connection %d): %v, want %v", i, v, view)
		}
	}

	prod := startRollProducer(t, "lbp", topic, bootstrap, 10*time.Millisecond)
	g := startRollGroup(t, group, topic, [][]string{bootstrap, bootstrap, bootstrap})
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	describe := func() (kadm.DescribedGroup, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		ds, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return kadm.DescribedGroup{}, err
		}
		d := ds[group]
		return d, d.Err
	}
	// Stable with 3 members, each in the generation its last assignment
	// came with (DescribeGroups has no generation: its members' ids stand
	// for it, a new generation after a member left or came gives new ones
	// or changes the set).
	members := func(d kadm.DescribedGroup) string {
		var ids []string
		for _, m := range d.Members {
			ids = append(ids, m.MemberID)
		}
		sort.Strings(ids)
		return strings.Join(ids, " ")
	}
	var stable kadm.DescribedGroup
	var gen int32
	eventually(t, "group Stable with 3 members, each assigned in one generation", func() string {
		d, err := describe()
		if err != nil {
			return err.Error()
		}
		if d.State != "Stable" || len(d.Members) != 3 {
			return fmt.Sprintf("%s with %d members", d.State, len(d.Members))
		}
		_, evs := g.generations(time.Time{})
		last := map[int]rcGroupEvent{}
		for _, e := range evs {
			if e.kind == "assigned" {
				last[e.member] = e
			}
		}
		gen = -1
		for i, m := range g.members {
			id, mgen := m.GroupMetadata()
			if !strings.Contains(members(d), id) || last[i].generation != mgen {
				return fmt.Sprintf("member %d (%s, generation %d) not yet assigned in the described group [%s]", i, id, mgen, members(d))
			}
			if gen != -1 && mgen != gen {
				return fmt.Sprintf("members in generations %d and %d", gen, mgen)
			}
			gen = mgen
		}
		stable = d
		return ""
	})
	g.mu.Lock()
	refusedBefore, commitsBefore := g.refused, g.commits
	g.mu.Unlock()
	mark := time.Now()
	t.Logf("group Stable in generation %d with members [%s] after %d connections through the load balancer", gen, members(stable), lb.accepted())

	// 20 s with nobody coming or going.
	deadline := time.Now().Add(20 * time.Second)
	describes := 0
	for time.Now().Before(deadline) {
		time.Sleep(time.Second)
		d, err := describe()
		if err != nil {
			t.Logf("DescribeGroups: %v", err)
			continue
		}
		describes++
		if d.State != "Stable" || members(d) != members(stable) {
			t.Errorf("group %s %s with members [%s], was Stable with [%s]", group, d.State, members(d), members(stable))
			break
		}
		for i, m := range g.members {
			if _, mgen := m.GroupMetadata(); mgen != gen {
				t.Errorf("member %d in generation %d, was %d", i, mgen, gen)
			}
		}
	}
	prod.finish(t)
	prod.mu.Lock()
	want := maps.Clone(prod.acked)
	failed, errs := prod.failed, prod.errs
	prod.mu.Unlock()
	if failed > 0 {
		t.Errorf("%d records failed: %q", failed, errs)
	}
	g.waitRead(t, want, 60*time.Second)
	gens, evs := g.generations(mark)
	allGens, _ := g.generations(time.Time{})
	g.mu.Lock()
	refused, commits, refusals := g.refused-refusedBefore, g.commits-commitsBefore, g.refusals
	reads, distinct := g.reads, len(g.read)
	g.mu.Unlock()
	t.Logf("generations seen by the members: %v; after Stable: %v (%d callbacks, %d DescribeGroups alike); commits after Stable %d, refused %d (in all %d refused: %q); %d records read for %d acknowledged (%d distinct); %d connections through the load balancer",
		allGens, gens, len(evs), describes, commits, refused, g.refused, refusals, reads, len(want), distinct, lb.accepted())
	if len(evs) > 0 {
		t.Errorf("rebalance callbacks after the group was Stable in generation %d: %+v", gen, evs)
	}
	if describes < 10 {
		t.Errorf("only %d of 20 DescribeGroups answered", describes)
	}
	if refused > 0 {
		t.Errorf("%d commits refused after the group was Stable: %q", refused, refusals)
	}
	if commits == 0 {
		t.Error("no commit after the group was Stable")
	}
	checkRollTopic(t, c.nodes[0].addr, topic, want)
}
