package main

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/compat/internal/scen"
)

// kafka-diff, the differential harness: the same request sequences, encoded
// with kmsg at pinned versions over raw connections, sent to an Apache
// Kafka 4.4.0 broker (KRaft, one node, started here: kafkabroker.go) and to
// disgw; the answers decoded with kmsg and compared field by field by
// reflection (diffwire.go). Differences are failures unless diffkept.go
// keeps them. Every API disgw's ApiVersions lists is exercised at the lowest
// and highest version both servers serve; versions below Kafka 4.4's lowest
// (removed by KIP-896, still served by disgw) are compared with Kafka's
// answer at its lowest version re-encoded at the old version (what a 3.x
// broker answered: the same, less the fields the old version lacks). Its
// steps: one per sequence, then "tools" (difftools.go).

var diffSteps = []string{"ApiVersions", "topics", "configs", "records", "groups", "consumer-groups", "consumer-migration", "admin", "txns", "coverage", "tools"}

// diffTarget is one server a sequence runs against.
type diffTarget struct {
	name string // "Kafka" or "disgw"
	w    *wireConn
	pick func(key int16) int16 // the version to send; -1: not served
	// v is the version a sequence builds its requests for: disgw's in
	// every run, so that both servers get the same requests (in the old
	// run Kafka gets them at its lowest version).
	v    func(key int16) int16
	node int32 // its node id (Metadata)
	mu   sync.Mutex
	ex   []*exchange
}

// exchange is one recorded request and its answer.
type exchange struct {
	label string
	key   int16
	ver   int16
	resp  kmsg.Response
	err   error
}

// do sends req at the run's version of its API and records the answer
// under label. It returns nil when the API is not served or the request
// failed. An answer with a retriable error anywhere (nothing was done) is
// asked again for up to 10 s, as a client would, and the last recorded.
func (t *diffTarget) do(label string, req kmsg.Request) kmsg.Response {
	return t.doRetry(label, req, anyRetriable)
}

// anyRetriable returns the first retriable ErrorCode in resp, or 0.
func anyRetriable(resp kmsg.Response) int16 {
	var find func(v reflect.Value) int16
	find = func(v reflect.Value) int16 {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				return find(v.Elem())
			}
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				f := v.Type().Field(i)
				if f.Name == "ErrorCode" && f.Type.Kind() == reflect.Int16 && retriable[int16(v.Field(i).Int())] {
					return int16(v.Field(i).Int())
				}
				if f.IsExported() {
					if c := find(v.Field(i)); c != 0 {
						return c
					}
				}
			}
		case reflect.Slice:
			if v.Type().Elem().Kind() != reflect.Uint8 {
				for i := 0; i < v.Len(); i++ {
					if c := find(v.Index(i)); c != 0 {
						return c
					}
				}
			}
		}
		return 0
	}
	return find(reflect.ValueOf(resp))
}

// retriable are the errors a client retries after a topic's creation or
// the coordinator's start (Kafka elects leaders and loads coordinators
// asynchronously): NOT_LEADER_FOR_PARTITION, LEADER_NOT_AVAILABLE,
// COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE.
var retriable = map[int16]bool{6: true, 5: true, 14: true, 15: true}

// doRetry is do, resending req for up to 20 s while errCode of its answer
// is retriable (a retriable error means nothing was done), as a client
// would; the last answer is recorded.
func (t *diffTarget) doRetry(label string, req kmsg.Request, errCode func(kmsg.Response) int16) kmsg.Response {
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, v, err := t.send(req)
		if err != nil || errCode(resp) == 0 || time.Now().After(deadline) {
			t.mu.Lock()
			t.ex = append(t.ex, &exchange{label: label, key: req.Key(), ver: v, resp: resp, err: err})
			t.mu.Unlock()
			return resp
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// send sends req unrecorded (waits, retries).
func (t *diffTarget) send(req kmsg.Request) (kmsg.Response, int16, error) {
	v := t.pick(req.Key())
	if v < 0 {
		return nil, v, fmt.Errorf("%s not served", kmsg.NameForKey(req.Key()))
	}
	req.SetVersion(v)
	resp, err := t.w.do(req)
	return resp, v, err
}

// versions of one API on both servers.
type apiRange struct{ kmin, kmax, dmin, dmax int16 }

func (r apiRange) kafka() bool { return r.kmax >= 0 }
func (r apiRange) disgw() bool { return r.dmax >= 0 }

func fetchVersions(w *wireConn) (map[int16][2]int16, *kmsg.ApiVersionsResponse, error) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "disgw-compat-diff", "1"
	r, err := w.do(req)
	if err != nil {
		return nil, nil, err
	}
	resp := r.(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 {
		return nil, nil, kerr.ErrorForCode(resp.ErrorCode)
	}
	m := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		m[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	return m, resp, nil
}

// diffRun is one pass of every sequence: lo, hi or old.
type diffRun struct {
	name         string
	kafka, disgw func(int16) int16
}

func runDiff(broker, tools, backend string) {
	steps := append([]string{}, diffSteps...)
	for _, s := range scen.CoreSteps {
		scen.NA(s, "the differential harness reports its own steps")
	}
	fail := func(why string) {
		for _, s := range steps {
			scen.Report(s, "fail", why)
		}
	}
	fmt.Println("kept differences (compat/cmd/compat/diffkept.go):")
	fmt.Print(printKept())
	start := time.Now()
	kb, err := startKafkaBroker(tools, "group.initial.rebalance.delay.ms=3000")
	if err != nil {
		fail("starting Apache Kafka 4.4.0: " + err.Error())
		return
	}
	defer func() { kb.Stop(); _ = os.RemoveAll(kb.Dir) }()
	scen.Info("Kafka", fmt.Sprintf("Apache Kafka 4.4.0 broker started in %s", since(start)))
	if broker == "kafka" {
		// compat scenario kafka-diff -broker kafka: a second Kafka broker in
		// disgw's place, the harness's own check (every difference it then
		// reports is one the kept list misses or a harness fault).
		kb2, err := startKafkaBroker(tools, "group.initial.rebalance.delay.ms=3000")
		if err != nil {
			fail("starting the second Apache Kafka 4.4.0: " + err.Error())
			return
		}
		defer func() { kb2.Stop(); _ = os.RemoveAll(kb2.Dir) }()
		broker = kb2.Addr
	}

	kw, err := dialWire(kb.Addr)
	if err != nil {
		fail(err.Error())
		return
	}
	defer kw.Close()
	dw, err := dialWire(broker)
	if err != nil {
		fail(err.Error())
		return
	}
	defer dw.Close()
	kv, kresp, err := fetchVersions(kw)
	if err != nil {
		fail("Kafka's ApiVersions: " + err.Error())
		return
	}
	dv, dresp, err := fetchVersions(dw)
	if err != nil {
		fail("disgw's ApiVersions: " + err.Error())
		return
	}
	ranges := map[int16]apiRange{}
	for k, v := range kv {
		ranges[k] = apiRange{v[0], v[1], -1, -1}
	}
	for k, v := range dv {
		r, ok := ranges[k]
		if !ok {
			r = apiRange{-1, -1, 0, 0}
		}
		r.dmin, r.dmax = v[0], v[1]
		ranges[k] = r
	}
	rep := newDiffReport()
	rep.backend = backend
	flattenBatches = backend == "dis"

	// ApiVersions itself, at v3 (as fetched): ranges and features.
	rep.compare("ApiVersions", &exchange{label: "ApiVersions v3", key: 18, ver: 3, resp: kresp}, &exchange{label: "ApiVersions v3", key: 18, ver: 3, resp: dresp})
	for _, v := range []int16{0, ranges[18].kmax} {
		a, b := exchangeOnce(kw, dw, kmsg.NewPtrApiVersionsRequest(), v)
		rep.compare("ApiVersions", a, b)
	}
	scen.Report("ApiVersions", rep.status("ApiVersions"), rep.detail("ApiVersions"))

	lo := func(k int16) int16 {
		r := ranges[k]
		switch {
		case r.kafka() && r.disgw():
			return max(r.kmin, r.dmin)
		case r.kafka():
			return r.kmin
		}
		return r.dmin
	}
	hi := func(k int16) int16 {
		r := ranges[k]
		switch {
		case r.kafka() && r.disgw():
			return min(r.kmax, r.dmax)
		case r.kafka():
			return r.kmax
		}
		return r.dmax
	}
	servedBy := func(f func(int16) int16, d bool) func(int16) int16 {
		return func(k int16) int16 {
			r := ranges[k]
			if (d && !r.disgw()) || (!d && !r.kafka()) {
				return -1
			}
			return f(k)
		}
	}
	old := func(k int16) int16 {
		r := ranges[k]
		if r.disgw() && r.kafka() && r.dmin < r.kmin {
			return r.dmin
		}
		return lo(k)
	}
	runs := []diffRun{
		{"lo", servedBy(lo, false), servedBy(lo, true)},
		{"hi", servedBy(hi, false), servedBy(hi, true)},
		{"old", servedBy(lo, false), servedBy(old, true)},
	}
	used := map[int16]map[string]bool{}
	seqs := []struct {
		step string
		fn   func(t *diffTarget, prefix string)
	}{
		{"topics", seqTopics}, {"configs", seqConfigs}, {"records", seqRecords}, {"groups", seqGroups}, {"consumer-groups", seqConsumerGroups}, {"consumer-migration", seqConsumerMigration}, {"admin", seqAdmin},
		{"txns", seqTxns},
	}
	only := os.Getenv("DISGW_DIFF_ONLY") // one sequence's step, for working on it
	for _, s := range seqs {
		if only != "" && s.step != only {
			scen.NA(s.step, "DISGW_DIFF_ONLY="+only)
			continue
		}
		for _, run := range runs {
			prefix := fmt.Sprintf("diff-%s-%s-", s.step, run.name)
			branch := func(k int16) int16 {
				if v := run.disgw(k); v >= 0 {
					return v
				}
				return run.kafka(k)
			}
			kt := &diffTarget{name: "Kafka", w: kw, pick: run.kafka, v: branch}
			dt := &diffTarget{name: "disgw", w: dw, pick: run.disgw, v: branch}
			var wg sync.WaitGroup
			for _, t := range []*diffTarget{kt, dt} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer func() {
						if p := recover(); p != nil {
							t.mu.Lock()
							t.ex = append(t.ex, &exchange{label: "sequence", err: fmt.Errorf("panic: %v", p)})
							t.mu.Unlock()
						}
					}()
					t.node = nodeID(t)
					s.fn(t, prefix)
				}()
			}
			wg.Wait()
			rep.compareRun(s.step, run.name, kt.ex, dt.ex, used)
			dumpExchanges(s.step, run.name, kt.ex, dt.ex)
		}
		scen.Report(s.step, rep.status(s.step), rep.detail(s.step))
	}

	if only != "" {
		scen.NA("coverage", "DISGW_DIFF_ONLY="+only)
		scen.NA("tools", "DISGW_DIFF_ONLY="+only)
		rep.printAll()
		return
	}
	// coverage: every API disgw serves that no sequence used gets its
	// default request at the lowest and highest common versions.
	var keys []int
	for k := range ranges {
		keys = append(keys, int(k))
	}
	sort.Ints(keys)
	var covered []string
	for _, k16 := range keys {
		k := int16(k16)
		r := ranges[k]
		if !r.disgw() || k == 18 {
			continue
		}
		if !r.kafka() {
			rep.fail("coverage", fmt.Sprintf("%s: disgw serves v%d-%d, Kafka 4.4 does not serve it", kmsg.NameForKey(k), r.dmin, r.dmax))
			continue
		}
		for _, run := range []string{"lo", "hi"} {
			if used[k][run] {
				continue
			}
			v := lo(k)
			if run == "hi" {
				v = hi(k)
			}
			req := kmsg.RequestForKey(k)
			a, b := exchangeOnce(kw, dw, req, v)
			rep.compare("coverage", a, b)
			covered = append(covered, fmt.Sprintf("%s v%d", kmsg.NameForKey(k), v))
		}
	}
	for _, k16 := range keys {
		k := int16(k16)
		if issueAPIs[k] && !ranges[k].disgw() {
			rep.fail("coverage", fmt.Sprintf("%s: Kafka serves v%d-%d, disgw does not serve it (issue 13 asks for it)", kmsg.NameForKey(k), ranges[k].kmin, ranges[k].kmax))
		}
	}
	if len(covered) > 0 {
		rep.note("coverage", "default requests for "+strings.Join(covered, ", "))
	}
	scen.Report("coverage", rep.status("coverage"), rep.detail("coverage"))

	runDiffTools("tools", rep, kb.Addr, broker, tools, backend)
	scen.Report("tools", rep.status("tools"), rep.detail("tools"))
	rep.printAll()
}

// exchangeOnce sends the same request at version v to both servers.
func exchangeOnce(kw, dw *wireConn, req kmsg.Request, v int16) (*exchange, *exchange) {
	label := fmt.Sprintf("%s v%d default request", kmsg.NameForKey(req.Key()), v)
	one := func(w *wireConn) *exchange {
		r := kmsg.RequestForKey(req.Key())
		r.SetVersion(v)
		resp, err := w.do(r)
		return &exchange{label: label, key: req.Key(), ver: v, resp: resp, err: err}
	}
	return one(kw), one(dw)
}

// diffReport collects each step's failures and kept differences.
type diffReport struct {
	mu    sync.Mutex
	fails map[string][]string
	kept  map[string]map[string]int // step -> category -> count
	notes map[string][]string
	count map[string]int // exchanges compared
	// backend is disgw's backend, "local" or "dis" (or "kafka" in the
	// self-check), for the kept differences of one backend only.
	backend string
}

func newDiffReport() *diffReport {
	return &diffReport{fails: map[string][]string{}, kept: map[string]map[string]int{}, notes: map[string][]string{}, count: map[string]int{}}
}

func (r *diffReport) fail(step, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fails[step] = append(r.fails[step], msg)
}

func (r *diffReport) note(step, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes[step] = append(r.notes[step], msg)
}

// compareRun matches the exchanges of one run by label and compares them.
func (r *diffReport) compareRun(step, run string, kex, dex []*exchange, used map[int16]map[string]bool) {
	dm := map[string]*exchange{}
	for _, e := range dex {
		dm[e.label] = e
	}
	seen := map[string]bool{}
	for _, a := range kex {
		seen[a.label] = true
		b, ok := dm[a.label]
		if !ok {
			r.fail(step, fmt.Sprintf("[%s] %s: Kafka's answer led to this request, disgw's did not", run, a.label))
			continue
		}
		if a.err == nil && b.err == nil {
			if used[a.key] == nil {
				used[a.key] = map[string]bool{}
			}
			used[a.key][run] = true
			if run == "old" && b.ver < a.ver {
				used[a.key]["old"] = true
			}
		}
		r.compareTagged(step, run, a, b)
	}
	for _, b := range dex {
		if !seen[b.label] {
			r.fail(step, fmt.Sprintf("[%s] %s: disgw's answer led to this request, Kafka's did not", run, b.label))
		}
	}
}

func (r *diffReport) compare(step string, a, b *exchange) { r.compareTagged(step, "", a, b) }

func (r *diffReport) compareTagged(step, run string, a, b *exchange) {
	api := kmsg.NameForKey(a.key)
	where := fmt.Sprintf("%s v%d %s", api, b.ver, a.label)
	if run != "" {
		where = "[" + run + "] " + where
	}
	r.mu.Lock()
	r.count[step]++
	r.mu.Unlock()
	switch {
	case a.err != nil && b.err != nil:
		if addrRE.ReplaceAllString(a.err.Error(), "HOST:PORT") != addrRE.ReplaceAllString(b.err.Error(), "HOST:PORT") {
			r.fail(step, fmt.Sprintf("%s: Kafka: %v; disgw: %v", where, a.err, b.err))
		}
		return
	case a.err != nil:
		r.fail(step, fmt.Sprintf("%s: Kafka: %v; disgw answered", where, a.err))
		return
	case b.err != nil:
		r.fail(step, fmt.Sprintf("%s: disgw: %v (Kafka v%d answered)", where, b.err, a.ver))
		return
	}
	ka := a.resp
	if b.ver != a.ver {
		d, err := downconvert(a.resp, b.ver)
		if err != nil {
			r.fail(step, fmt.Sprintf("%s: re-encoding Kafka's v%d answer at v%d: %v", where, a.ver, b.ver, err))
			return
		}
		if fix := kafka3x[a.key]; fix != nil {
			fix(a.resp, d)
		}
		ka = d
		where += fmt.Sprintf(" (against Kafka's v%d answer as 3.x gave it at v%d)", a.ver, b.ver)
	}
	for _, d := range compareResponses(ka, b.resp) {
		if k := keep(api, r.backend, b.ver, &d); k != nil {
			r.mu.Lock()
			if r.kept[step] == nil {
				r.kept[step] = map[string]int{}
			}
			r.kept[step][k.Category]++
			r.mu.Unlock()
			continue
		}
		r.fail(step, fmt.Sprintf("%s: %s: Kafka %s, disgw %s", where, d.Path, errName(d.Path, d.Kafka), errName(d.Path, d.Disgw)))
	}
}

// errName adds the error's name to an ErrorCode value.
func errName(path, v string) string {
	if !strings.HasSuffix(path, "ErrorCode") {
		return v
	}
	var c int16
	if _, err := fmt.Sscan(v, &c); err != nil || c == 0 {
		return v
	}
	if e := kerr.ErrorForCode(c); e != nil {
		if ke, ok := e.(*kerr.Error); ok {
			return v + " " + ke.Message
		}
	}
	return v
}

func (r *diffReport) status(step string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.fails[step]) > 0 {
		return "fail"
	}
	return "pass"
}

func (r *diffReport) keptSummary(step string) string {
	var cats []string
	for c, n := range r.kept[step] {
		cats = append(cats, fmt.Sprintf("%s %d", c, n))
	}
	sort.Strings(cats)
	if len(cats) == 0 {
		return "none kept"
	}
	return "kept: " + strings.Join(cats, ", ")
}

func (r *diffReport) detail(step string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.fails[step]
	s := fmt.Sprintf("%d answers compared, %d differences (%s)", r.count[step], len(f), r.keptSummary(step))
	if len(f) > 0 {
		s += "; first: " + strings.Join(f[:min(len(f), 3)], " | ")
	}
	return s
}

// printAll prints every failure (the step lines carry the first few).
func (r *diffReport) printAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range diffSteps {
		fmt.Printf("== diff %s: %d answers, %d differences, %s\n", s, r.count[s], len(r.fails[s]), r.keptSummary(s))
		for _, n := range r.notes[s] {
			fmt.Printf("   note: %s\n", n)
		}
		for _, f := range r.fails[s] {
			fmt.Printf("   DIFF %s\n", f)
		}
	}
}

// dumpExchanges appends both servers' answers, as JSON, to the file
// $DISGW_DIFF_DUMP names (for reading a difference in full).
func dumpExchanges(step, run string, kex, dex []*exchange) {
	path := os.Getenv("DISGW_DIFF_DUMP")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for _, side := range []struct {
		name string
		ex   []*exchange
	}{{"Kafka", kex}, {"disgw", dex}} {
		for _, e := range side.ex {
			_ = enc.Encode(map[string]any{"step": step, "run": run, "server": side.name, "label": e.label, "version": e.ver, "response": e.resp, "error": fmt.Sprint(e.err)})
		}
	}
}

// kafka3x fills, in Kafka's answer re-encoded at a version Kafka 4 removed,
// the fields only that version has, as Kafka 3.x set them.
var kafka3x = map[int16]func(orig, old kmsg.Response){
	// DescribeConfigs v0's is_default: true when the value is the default
	// (Kafka 3.x: source DEFAULT_CONFIG).
	32: func(orig, old kmsg.Response) {
		o, d := orig.(*kmsg.DescribeConfigsResponse), old.(*kmsg.DescribeConfigsResponse)
		for i := range d.Resources {
			for j := range d.Resources[i].Configs {
				d.Resources[i].Configs[j].IsDefault = o.Resources[i].Configs[j].Source == kmsg.ConfigSourceDefaultConfig
			}
		}
	},
}
