package main

// Rows on several nodes (compat -backend dis -nodes N, make compat-cluster):
// for each row one `disgw dislocal` and N `disgw serve --backend dis` nodes
// in cluster mode in front of it (docs/cluster.md), node ids 0 to N-1, each
// on its own free port and advertising it, with cluster timings short
// enough for a test (clusterNodeEnv, clusterDisArgs). The driver waits
// until every node answers Metadata with all N brokers and one controller,
// then runs the row's scenario with the nodes' addresses as its bootstrap
// (a row marked seedOne gets one node's address only, so its client must
// follow Metadata to the others); the scenario gets every node's address
// in DISGW_COMPAT_NODES.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// clusterNodesEnv names, in a scenario's environment, every node's
// HOST:PORT (comma-separated, node 0 first) on a row with several nodes.
const clusterNodesEnv = "DISGW_COMPAT_NODES"

// clusterNodes is the value of clusterNodesEnv: nil on one node.
func clusterNodes() []string {
	v := os.Getenv(clusterNodesEnv)
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// clusterNodeEnv are the settings of every node beyond its node id: cluster
// mode, a heartbeat of 500 ms, a join window and a settle time of 1 s (DIS
// documents about 20 s for the window), the default 3 s lease, and a DIS
// request timeout of 10 s (a partition that moves is written by its new
// leader lease + request timeout after the rebalance: 13 s, not 33 s).
var clusterNodeEnv = []string{
	"DISGW_CLUSTER=true",
	"DISGW_CLUSTER_HEARTBEAT=500ms",
	"DISGW_CLUSTER_JOIN_WINDOW=1s",
	"DISGW_CLUSTER_SETTLE=1s",
	"DISGW_CLUSTER_LEASE=3s",
	"DISGW_DIS_REQUEST_TIMEOUT=10s",
}

// clusterDisArgs are added to dislocal's command line on a row with several
// nodes: a member of the nodes' group (and of a DIS Kafka Adapter's) is
// dropped after 6 s without a heartbeat (DIS: about 1 minute), so a node
// killed with SIGKILL loses what it owned within seconds.
var clusterDisArgs = []string{"--group-session-timeout", "6s"}

// clusterViewTimeout bounds the wait for the nodes' first common view.
const clusterViewTimeout = 60 * time.Second

// disgwCluster is one dislocal and the nodes in front of it.
type disgwCluster struct {
	bin      string
	dir      string // the data directories and ready files
	logBase  string // a node's log is logBase.nodeI.disgw.log (.restarted-K after a restart)
	extraEnv []string
	dis      *disgwProc
	nodes    []*disgwProc
	restarts int
}

// startCluster starts dislocal (clusterDisArgs, then disArgs) and n nodes
// at once, and waits until every node answers Metadata with all n brokers
// (waitClusterView). logPath is where one disgw's log would go
// (X.disgw.log): the nodes log to X.nodeI.disgw.log, dislocal to
// X.dislocal.log. extraEnv is added to every node's environment. On an
// error the processes started are stopped; dir, when not "", is to be
// removed by the caller.
func startCluster(bin string, n int, logPath string, disArgs []string, extraEnv ...string) (*disgwCluster, string, error) {
	dir, err := os.MkdirTemp("", "disgw-compat-cluster-")
	if err != nil {
		return nil, "", err
	}
	base := strings.TrimSuffix(logPath, ".disgw.log")
	c := &disgwCluster{bin: bin, dir: dir, logBase: base, extraEnv: extraEnv, nodes: make([]*disgwProc, n)}
	c.dis, err = spawn(bin, append(append([]string{"dislocal", "--listen", "127.0.0.1:0", "--data", filepath.Join(dir, "dislocal"),
		"--ak", compatDISAK, "--project-id", compatDISProject, "--ready-file", filepath.Join(dir, "dis-ready")}, clusterDisArgs...), disArgs...),
		[]string{"DISGW_DISLOCAL_SK=" + compatDISSK}, filepath.Join(dir, "dis-ready"), base+".dislocal.log")
	if err != nil {
		return nil, dir, err
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.nodes[i], errs[i] = c.spawnNode(i, "127.0.0.1:0", c.nodeLog(i))
		}()
	}
	wg.Wait()
	if err := firstErr(errs...); err != nil {
		c.stop()
		return nil, dir, err
	}
	if err := waitClusterView(c.addrs(), clusterViewTimeout); err != nil {
		c.stop()
		return nil, dir, fmt.Errorf("%w (logs %s.node*.disgw.log)", err, base)
	}
	return c, dir, nil
}

func (c *disgwCluster) nodeLog(i int) string {
	if c.restarts == 0 {
		return fmt.Sprintf("%s.node%d.disgw.log", c.logBase, i)
	}
	return fmt.Sprintf("%s.node%d.restarted-%d.disgw.log", c.logBase, i, c.restarts)
}

// spawnNode starts node i listening on listen.
func (c *disgwCluster) spawnNode(i int, listen, logPath string) (*disgwProc, error) {
	ready := filepath.Join(c.dir, fmt.Sprintf("ready%d", i))
	_ = os.Remove(ready)
	args := []string{"serve", "--listen", listen, "--admin-listen", "127.0.0.1:0", "--data", filepath.Join(c.dir, fmt.Sprintf("node%d", i)),
		"--ready-file", ready, "--backend", "dis", "--log-level", "info",
		"--dis-endpoint", "http://" + c.dis.addr, "--dis-project-id", compatDISProject}
	env := append(slices.Clone(c.extraEnv), clusterNodeEnv...)
	env = append(env, "DISGW_NODE_ID="+strconv.Itoa(i), "DISGW_DIS_AK="+compatDISAK, "DISGW_DIS_SK="+compatDISSK)
	return spawn(c.bin, args, env, ready, logPath)
}

// addrs are the nodes' HOST:PORT, node 0 first.
func (c *disgwCluster) addrs() []string {
	out := make([]string, len(c.nodes))
	for i, p := range c.nodes {
		out[i] = p.addr
	}
	return out
}

// bootstrap is every node's address, comma-separated.
func (c *disgwCluster) bootstrap() string { return strings.Join(c.addrs(), ",") }

// disEndpoint is dislocal's URL.
func (c *disgwCluster) disEndpoint() string { return "http://" + c.dis.addr }

// stop stops the nodes (SIGTERM, all at once), then dislocal; it returns
// the problems to report, as disgwProc.stop does.
func (c *disgwCluster) stop() string {
	problems := make([]string, len(c.nodes))
	var wg sync.WaitGroup
	for i, p := range c.nodes {
		if p == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if pr := p.stop1(); pr != "" {
				problems[i] = fmt.Sprintf("node %d: %s", i, pr)
			}
		}()
	}
	wg.Wait()
	if c.dis != nil {
		if pr := c.dis.stop1(); pr != "" {
			problems = append(problems, "dislocal: "+pr)
		}
	}
	return strings.Join(slices.DeleteFunc(problems, func(s string) bool { return s == "" }), "; ")
}

// kill kills node i with SIGKILL and waits until it exited.
func (c *disgwCluster) kill(i int) {
	_ = c.nodes[i].cmd.Process.Kill()
	<-c.nodes[i].exited
}

// restart starts node i again (after kill) on its address and data
// directory, and waits until every node answers with all of them again.
func (c *disgwCluster) restart(i int) error {
	c.restarts++
	var p *disgwProc
	var err error
	for range 20 { // the port may take a moment to be free again
		if p, err = c.spawnNode(i, c.nodes[i].addr, c.nodeLog(i)); err == nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	c.nodes[i] = p
	return waitClusterView(c.addrs(), clusterViewTimeout)
}

// clusterMetadata is what one node's Metadata says of the cluster.
type clusterMetadata struct {
	brokers    map[int32]string // node id → HOST:PORT
	controller int32
}

// metadataOf asks addr alone for Metadata without topics.
func metadataOf(ctx context.Context, addr string) (clusterMetadata, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return clusterMetadata{}, err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	resp, err := req.RequestWith(ctx, cl.SeedBrokers()[0])
	if err != nil {
		return clusterMetadata{}, err
	}
	md := clusterMetadata{brokers: map[int32]string{}, controller: resp.ControllerID}
	for _, b := range resp.Brokers {
		md.brokers[b.NodeID] = fmt.Sprintf("%s:%d", b.Host, b.Port)
	}
	return md, nil
}

// waitClusterView waits until the Metadata of every node in addrs (node i
// at addrs[i]) lists exactly these nodes with their ids and addresses and
// names the same controller, one of them: every node holds a view of all.
func waitClusterView(addrs []string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var last string
	for {
		ok := true
		var controller int32 = -2
		for _, a := range addrs {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			md, err := metadataOf(ctx, a)
			cancel()
			if err != nil {
				ok, last = false, fmt.Sprintf("Metadata of %s: %v", a, err)
				break
			}
			same := len(md.brokers) == len(addrs)
			for i, want := range addrs {
				same = same && md.brokers[int32(i)] == want
			}
			if !same || md.controller < 0 || int(md.controller) >= len(addrs) || controller != -2 && md.controller != controller {
				ok, last = false, fmt.Sprintf("Metadata of %s: brokers %v, controller %d", a, md.brokers, md.controller)
				break
			}
			controller = md.controller
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the nodes hold no common view after %v: %s", limit, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// clusterSettingsText is clusterNodeEnv as settings, for the matrix's page.
func clusterSettingsText() string {
	var out []string
	for _, kv := range clusterNodeEnv {
		k, v, _ := strings.Cut(kv, "=")
		out = append(out, "`"+strings.ToLower(strings.TrimPrefix(k, "DISGW_"))+": "+v+"`")
	}
	return strings.Join(out, ", ")
}
