package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// opsNode is one `disgw serve` of an ops cluster and its admin listener.
type opsNode struct {
	*gatewayProc
	id    int
	admin string // http://HOST:PORT
}

// startOpsNode starts node id in cluster mode in front of d, with the
// short timings of the ops tests (dislocal's session and join window
// given by startOpsDIS) and the admin listener's snapshot every 200 ms.
func startOpsNode(t *testing.T, d *disLocal, id int) *opsNode {
	t.Helper()
	gw := startGateway(t, gatewayOpts{dis: d, env: []string{
		"DISGW_CLUSTER=true", fmt.Sprintf("DISGW_NODE_ID=%d", id),
		"DISGW_CLUSTER_HEARTBEAT=200ms", "DISGW_CLUSTER_JOIN_WINDOW=1s", "DISGW_CLUSTER_SETTLE=1s", "DISGW_CLUSTER_LEASE=1500ms",
		"DISGW_DIS_REQUEST_TIMEOUT=5s", "DISGW_METRICS_LAG_INTERVAL=200ms", "DISGW_GROUP_INITIAL_REBALANCE_DELAY=100ms"}})
	addr, _ := gw.logLine(t, "started")["admin_listen"].(string)
	if addr == "" {
		t.Fatal("the started line has no admin_listen")
	}
	return &opsNode{gatewayProc: gw, id: id, admin: "http://" + addr}
}

// startOpsDIS starts dislocal with a group session of 3 s and a join
// window of 500 ms.
func startOpsDIS(t *testing.T) *disLocal {
	t.Helper()
	return startDISLocal(t, disLocalOpts{account: e2eAccount,
		args: []string{"--group-session-timeout", "3s", "--group-sync-delay", "500ms"}})
}

// TestClusterOps: three `disgw serve --backend dis` nodes in cluster mode
// in front of one dislocal. /readyz is 503 before a node's first view
// and 200 once the three agree; each node's /metrics shows three members,
// one controller among them, one epoch; the partitions each node leads
// add up to the topic's and the groups each owns to the groups; every
// node counts its ownership moves. The console of each node shows the
// three nodes with their addresses, its share and the controller (in
// Chromium when it is installed). A node stopped (SIGSTOP) past DIS's
// session answers 503 when it resumes, until it is in a view again.
func TestClusterOps(t *testing.T) {
	t.Parallel()
	d := startOpsDIS(t)
	first := startOpsNode(t, d, 1)
	body, code := httpGet(t, first.admin+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "cluster: no cluster view yet") {
		t.Errorf("/readyz of node 1 right after its start: %d %q; want 503 before its first view", code, body)
	}
	nodes := []*opsNode{first, startOpsNode(t, d, 2), startOpsNode(t, d, 3)}
	var seeds []string
	for _, n := range nodes {
		seeds = append(seeds, n.addr)
	}

	// The three agree: each has three members, one epoch, one controller.
	var epoch float64
	eventually(t, "three nodes in one view", func() string {
		var controllers float64
		epochs := map[float64]bool{}
		for _, n := range nodes {
			s := scrape(t, n.admin)
			if v, _ := sum(s, "disgw_cluster_members", nil); v != 3 {
				return fmt.Sprintf("node %d: %v members", n.id, v)
			}
			e, _ := sum(s, "disgw_cluster_view_epoch", nil)
			epochs[e] = true
			epoch = e
			c, _ := sum(s, "disgw_cluster_is_controller", nil)
			controllers += c
		}
		if len(epochs) != 1 || controllers != 1 {
			return fmt.Sprintf("epochs %v, %v controllers", epochs, controllers)
		}
		return ""
	})
	for _, n := range nodes {
		if body, code := httpGet(t, n.admin+"/readyz"); code != http.StatusOK {
			t.Errorf("/readyz of node %d in the view: %d %q", n.id, code, body)
		}
	}

	// A topic and three groups, through the cluster.
	const topic, parts = "ops.cluster", 8
	groups := []string{"ops-a", "ops-b", "ops-c"}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, parts, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	pcl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	produceN(t, ctx, pcl, 3*parts, "ops")
	pcl.Close()
	for _, g := range groups {
		var off kadm.Offsets
		off.Add(kadm.Offset{Topic: topic, Partition: 0, At: 1, LeaderEpoch: -1})
		if err := adm.CommitAllOffsets(ctx, g, off); err != nil {
			t.Fatalf("commit of group %s: %v", g, err)
		}
	}

	eventually(t, "partitions led and groups owned adding up", func() string {
		var led, owned float64
		var each []string
		for _, n := range nodes {
			s := scrape(t, n.admin)
			l, nl := sum(s, "disgw_cluster_partitions_led", nil)
			o, no := sum(s, "disgw_cluster_groups_owned", nil)
			if nl != 1 || no != 1 {
				return fmt.Sprintf("node %d has no disgw_cluster_partitions_led or disgw_cluster_groups_owned", n.id)
			}
			led += l
			owned += o
			each = append(each, fmt.Sprintf("node %d: %v partitions, %v groups", n.id, l, o))
		}
		if led != parts || owned != float64(len(groups)) {
			return fmt.Sprintf("%v partitions led, %v groups owned, want %d and %d (%s)", led, owned, parts, len(groups), strings.Join(each, "; "))
		}
		return ""
	})
	for _, n := range nodes {
		s := scrape(t, n.admin)
		if _, k := sum(s, "disgw_cluster_moves_total", nil); k != 4 {
			t.Errorf("node %d: %d series of disgw_cluster_moves_total, want 4 (partition and group, gained and lost)", n.id, k)
		}
		if _, k := sum(s, "disgw_cluster_intents_refused_total", nil); k != 1 {
			t.Errorf("node %d has no disgw_cluster_intents_refused_total", n.id)
		}
		page, _ := httpGet(t, n.admin+"/")
		for _, want := range append([]string{`id="cluster"`, fmt.Sprintf("this node %d", n.id), fmt.Sprintf("epoch %v", epoch), "held ("},
			seeds...) {
			if !strings.Contains(page, want) {
				t.Errorf("node %d's overview does not show %q:\n%s", n.id, want, page[:min(len(page), 3000)])
			}
		}
	}

	t.Run("chromium", func(t *testing.T) {
		chromium := chromiumPath(t)
		opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(chromium), chromedp.Flag("headless", true), chromedp.NoSandbox,
			chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
			chromedp.WindowSize(1366, 768)}
		actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
		defer acancel()
		bctx, bcancel := chromedp.NewContext(actx)
		defer bcancel()
		dir := artefactDir(t)
		for _, n := range nodes {
			if err := chromedp.Do(bctx, chromedp.Navigate(n.admin+"/"), chromedp.WaitVisible(chromedp.CSS("#cluster"))); err != nil {
				t.Fatalf("node %d: %v", n.id, err)
			}
			rows, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("#cluster tr[data-cluster-node]").length`))
			if err != nil || rows != 3 {
				t.Errorf("node %d: %d nodes shown (%v), want 3", n.id, rows, err)
			}
			shown, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector("[data-partitions-led]").textContent`))
			led, _ := sum(scrape(t, n.admin), "disgw_cluster_partitions_led", nil)
			if err != nil || shown != fmt.Sprint(led) {
				t.Errorf("node %d: partitions led shown %q (%v), /metrics %v", n.id, shown, err, led)
			}
			width, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
			if err != nil || width > 1366 {
				t.Errorf("node %d: scrollWidth %d (%v)", n.id, width, err)
			}
			shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, fmt.Sprintf("overview-node-%d.png", n.id)), shot, 0o644)
			}
			if err != nil {
				t.Errorf("node %d: screenshot: %v", n.id, err)
			}
		}
	})

	// A node stopped past DIS's session (a zombie) answers 503 when it
	// resumes, its lease lapsed or refused, until it is back in a view.
	zombie := nodes[2]
	if err := zombie.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a view without the stopped node", func() string {
		for _, n := range nodes[:2] {
			if v, _ := sum(scrape(t, n.admin), "disgw_cluster_members", nil); v != 2 {
				return fmt.Sprintf("node %d: %v members", n.id, v)
			}
		}
		return ""
	})
	if err := zombie.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	body, code = httpGet(t, zombie.admin+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "cluster lease") {
		t.Errorf("/readyz of node %d resumed after DIS's session: %d %q; want 503, its lease lapsed or refused", zombie.id, code, body)
	}
	eventually(t, "the resumed node ready again", func() string {
		if body, code := httpGet(t, zombie.admin+"/readyz"); code != http.StatusOK {
			return fmt.Sprintf("/readyz %d %q", code, body)
		}
		return ""
	})
	if v, _ := sum(scrape(t, zombie.admin), "disgw_cluster_members", nil); v != 3 {
		t.Errorf("node %d ready again with %v members in its view", zombie.id, v)
	}

	for _, n := range nodes {
		if code := n.stop(t, syscall.SIGTERM); code != 0 {
			t.Errorf("node %d: exit code %d", n.id, code)
		}
	}
}
