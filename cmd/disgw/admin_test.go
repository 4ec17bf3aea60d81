package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// sample is one line of a Prometheus text exposition.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

var labelRE = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// scrape GETs url/metrics and parses the samples.
func scrape(t *testing.T, base string) []sample {
	t.Helper()
	body, code := httpGet(t, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", code, body)
	}
	var out []sample
	for _, line := range strings.Split(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("bad sample line %q", line)
		}
		s := sample{labels: map[string]string{}, value: v}
		head := line[:i]
		if j := strings.IndexByte(head, '{'); j >= 0 {
			s.name = head[:j]
			for _, m := range labelRE.FindAllStringSubmatch(head[j:], -1) {
				s.labels[m[1]] = m[2]
			}
		} else {
			s.name = head
		}
		out = append(out, s)
	}
	return out
}

// sum adds the values of the samples named name whose labels include want.
func sum(samples []sample, name string, want map[string]string) (total float64, n int) {
	for _, s := range samples {
		if s.name != name {
			continue
		}
		ok := true
		for k, v := range want {
			if s.labels[k] != v {
				ok = false
			}
		}
		if ok {
			total += s.value
			n++
		}
	}
	return total, n
}

func httpGet(t *testing.T, url string) (string, int) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), resp.StatusCode
}

// eventually retries check every 100 ms for up to 30 s; check returns ""
// when satisfied, else what is still wrong.
func eventually(t *testing.T, what string, check func() string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		msg := check()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s", what, msg)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// produceCounter counts the Produce requests a client wrote (OnBrokerWrite
// of API key 0 without an error).
type produceCounter struct{ n atomic.Int64 }

func (c *produceCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == 0 && err == nil {
		c.n.Add(1)
	}
}

// adminFixture is a running gateway with a topic of three partitions that
// got n records from franz-go, all consumed and committed by a group.
type adminFixture struct {
	gw       *gatewayProc
	kafka    string // Kafka address
	admin    string // http://HOST:PORT of the admin listener
	topic    string
	group    string
	produced int64 // Produce requests the producer wrote
}

const adminPartitions = 3

func startAdminFixture(t *testing.T, n int, extraArgs ...string) *adminFixture {
	t.Helper()
	gw := startGateway(t, gatewayOpts{env: []string{"DISGW_METRICS_LAG_INTERVAL=200ms", "DISGW_GROUP_INITIAL_REBALANCE_DELAY=100ms"},
		args: extraArgs})
	f := &adminFixture{gw: gw, kafka: gw.addr, topic: "ops.metrics-e2e", group: "ops-console-group"}
	started := gw.logLine(t, "started")
	addr, _ := started["admin_listen"].(string)
	if addr == "" {
		t.Fatalf("the started line has no admin_listen: %v", started)
	}
	f.admin = "http://" + addr

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm, err := kgo.NewClient(kgo.SeedBrokers(f.kafka))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if _, err := kadm.NewClient(adm).CreateTopic(ctx, adminPartitions, 1, nil, f.topic); err != nil {
		t.Fatal(err)
	}
	var counter produceCounter
	pcl, err := kgo.NewClient(kgo.SeedBrokers(f.kafka), kgo.DefaultProduceTopic(f.topic), kgo.WithHooks(&counter),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	produceN(t, ctx, pcl, n, "first")
	pcl.Close()
	f.produced = counter.n.Load()

	ccl, err := kgo.NewClient(kgo.SeedBrokers(f.kafka), kgo.ConsumerGroup(f.group), kgo.ConsumeTopics(f.topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for got < n {
		fs := ccl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", got, n, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		got += fs.NumRecords()
	}
	if err := ccl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	ccl.Close() // leaves the group: it stays, Empty, with its offsets
	return f
}

// produceN produces n records in batches of 7 (several Produce requests).
func produceN(t *testing.T, ctx context.Context, cl *kgo.Client, n int, prefix string) {
	t.Helper()
	for i := 0; i < n; {
		var rs []*kgo.Record
		for j := 0; j < 7 && i < n; j, i = j+1, i+1 {
			rs = append(rs, &kgo.Record{Value: []byte(fmt.Sprintf("%s-%d", prefix, i))})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAdminMetricsCountsAndLag: after franz-go produced exactly n records
// and a group consumed and committed them, /metrics shows
// disgw_records_in_total{topic} = n, Produce requests equal to those the
// client wrote (its OnBrokerWrite hook), and kafka_consumergroup_lag 0 on
// each partition; after m more records, the group's lag is m in total.
func TestAdminMetricsCountsAndLag(t *testing.T) {
	t.Parallel()
	const n, m = 50, 11
	f := startAdminFixture(t, n)

	if body, code := httpGet(t, f.admin+"/healthz"); code != 200 {
		t.Fatalf("/healthz: %d %s", code, body)
	}
	if body, code := httpGet(t, f.admin+"/readyz"); code != 200 {
		t.Fatalf("/readyz: %d %s", code, body)
	}
	s := scrape(t, f.admin)
	if v, k := sum(s, "disgw_records_in_total", map[string]string{"topic": f.topic}); k != 1 || v != n {
		t.Errorf("disgw_records_in_total{topic=%q} = %v (%d series), want %d", f.topic, v, k, n)
	}
	if v, _ := sum(s, "disgw_bytes_in_total", map[string]string{"topic": f.topic}); v <= 0 {
		t.Errorf("disgw_bytes_in_total{topic=%q} = %v, want > 0", f.topic, v)
	}
	if v, _ := sum(s, "disgw_requests_total", map[string]string{"api": "Produce"}); v != float64(f.produced) || f.produced == 0 {
		t.Errorf("disgw_requests_total{api=Produce} = %v, the producer wrote %d Produce requests", v, f.produced)
	}
	if v, _ := sum(s, "disgw_records_out_total", map[string]string{"topic": f.topic}); v < n {
		t.Errorf("disgw_records_out_total{topic=%q} = %v, want >= %d", f.topic, v, n)
	}
	if v, _ := sum(s, "disgw_rebalances_total", nil); v < 1 {
		t.Errorf("disgw_rebalances_total = %v, want >= 1", v)
	}
	for _, name := range []string{"disgw_request_duration_seconds_count", "disgw_connections", "disgw_groups"} {
		if _, k := sum(s, name, nil); k == 0 {
			t.Errorf("no %s in the scrape", name)
		}
	}

	lagSeries := func(want float64) func() string {
		return func() string {
			s := scrape(t, f.admin)
			total, k := sum(s, "kafka_consumergroup_lag", map[string]string{"consumergroup": f.group, "topic": f.topic})
			if k != adminPartitions {
				return fmt.Sprintf("%d kafka_consumergroup_lag series, want %d", k, adminPartitions)
			}
			if want == 0 {
				for p := range adminPartitions {
					if v, _ := sum(s, "kafka_consumergroup_lag", map[string]string{"consumergroup": f.group, "topic": f.topic, "partition": strconv.Itoa(p)}); v != 0 {
						return fmt.Sprintf("partition %d lag %v, want 0", p, v)
					}
				}
			}
			if total != want {
				return fmt.Sprintf("lag %v in total, want %v", total, want)
			}
			if cur, _ := sum(s, "kafka_topic_partition_current_offset", map[string]string{"topic": f.topic}); cur != n+want {
				return fmt.Sprintf("current offsets sum %v, want %v", cur, n+want)
			}
			return ""
		}
	}
	eventually(t, "lag after consuming everything", lagSeries(0))

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pcl, err := kgo.NewClient(kgo.SeedBrokers(f.kafka), kgo.DefaultProduceTopic(f.topic))
	if err != nil {
		t.Fatal(err)
	}
	produceN(t, ctx, pcl, m, "more")
	pcl.Close()
	eventually(t, "lag after m more records", lagSeries(m))
	if v, _ := sum(scrape(t, f.admin), "disgw_records_in_total", map[string]string{"topic": f.topic}); v != n+m {
		t.Errorf("disgw_records_in_total = %v, want %d", v, n+m)
	}

	// Read-only: anything but GET and HEAD is refused.
	resp, err := http.Post(f.admin+"/", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %d, want 405", resp.StatusCode)
	}
	if code := f.gw.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// TestAdminReadyzFollowsDIS: `disgw serve --backend dis` in front of
// `disgw dislocal`: /readyz is 200 while DIS answers, 503 (naming the
// backend) once dislocal is stopped, 200 again once it is back on the same
// address; /healthz stays 200 throughout. /metrics then shows DIS calls by
// operation and code, and PutRecords fill histograms.
func TestAdminReadyzFollowsDIS(t *testing.T) {
	t.Parallel()
	const ak, sk, project = "e2e-access-key", "e2e-secret-key-not-logged", "e2eproject"
	d := startDISLocal(t, disLocalOpts{account: disAccount{ak, sk, project}})

	// At debug, the effective configuration is logged on a line of its own.
	gw := startGateway(t, gatewayOpts{dis: d, env: []string{"DISGW_METRICS_LAG_INTERVAL=200ms", "DISGW_LOG_LEVEL=debug"}})
	kafka := gw.addr
	started := gw.logLine(t, "started")
	base := "http://" + started["admin_listen"].(string)
	cfg, _ := gw.logLine(t, "configuration")["config"].(map[string]any)
	if cfg["dis_sk"] != "******" || cfg["dis_ak"] != "******" || cfg["admin_listen"] != "127.0.0.1:0" {
		t.Errorf("started line's config: dis_ak %v, dis_sk %v, admin_listen %v; want masked secrets", cfg["dis_ak"], cfg["dis_sk"], cfg["admin_listen"])
	}
	if strings.Contains(gw.output(t), sk) {
		t.Fatal("the secret key is in the gateway's log")
	}

	readyz := func(want int) func() string {
		return func() string {
			body, code := httpGet(t, base+"/readyz")
			if code != want {
				return fmt.Sprintf("/readyz %d %q, want %d", code, body, want)
			}
			return ""
		}
	}
	eventually(t, "ready with DIS up", readyz(http.StatusOK))

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pcl, err := kgo.NewClient(kgo.SeedBrokers(kafka), kgo.DefaultProduceTopic("ops.dis-ready"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	produceN(t, ctx, pcl, 20, "dis")
	pcl.Close()
	s := scrape(t, base)
	if v, _ := sum(s, "disgw_backend_calls_total", map[string]string{"op": "PutRecords", "code": "OK"}); v < 1 {
		t.Errorf("disgw_backend_calls_total{op=PutRecords,code=OK} = %v, want >= 1", v)
	}
	if v, _ := sum(s, "disgw_dis_putrecords_records_sum", nil); v != 20 {
		t.Errorf("disgw_dis_putrecords_records_sum = %v, want 20", v)
	}
	if v, _ := sum(s, "disgw_records_in_total", map[string]string{"topic": "ops.dis-ready"}); v != 20 {
		t.Errorf("disgw_records_in_total = %v, want 20", v)
	}

	if code := d.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("dislocal exit code %d", code)
	}
	eventually(t, "unready with dislocal stopped", readyz(http.StatusServiceUnavailable))
	if body, code := httpGet(t, base+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz with DIS down: %d %s", code, body)
	}
	if body, _ := httpGet(t, base+"/readyz"); !strings.Contains(body, "backend") {
		t.Errorf("/readyz body %q does not name the backend", body)
	}
	d.restart(t) // on the same address
	eventually(t, "ready again with dislocal back", readyz(http.StatusOK))
	if v, _ := sum(scrape(t, base), "disgw_backend_calls_total", map[string]string{"code": "TRANSPORT"}); v < 1 {
		t.Errorf("no DIS call counted with code TRANSPORT while dislocal was down")
	}
	if code := gw.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("serve exit code %d", code)
	}
}
