package main

// The process fixtures of this package's tests. The tests run the disgw
// binary, built once per test run, as real processes listening on
// 127.0.0.1 ports the kernel picks (each writes the address it got to its
// ready file), and talk to them as clients do. Every start goes through
// here:
//
//   - startDISLocal runs `disgw dislocal`, the DIS emulator;
//   - startGateway runs `disgw serve` on the embedded store or, given a
//     dislocal, with --backend dis in front of it;
//   - forEachBackend runs one scenario as two parallel subtests, "local"
//     and "dis", each with a gateway of its own;
//   - start runs any disgw command line: what the others build on, and
//     what a test of the command line itself (a usage error) calls.
//
// A process's stdout and stderr go to a file, logged when the test fails;
// at cleanup a process still running is killed by its PID.

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// buildFlags are extra flags for building the binary; race_test.go adds
// -race when the tests themselves run with the race detector. The binary is
// always built with tag disgw_failpoints: the failpoints it adds act only
// when their environment variable is set (DISGW_FAILPOINT_BEFORE_PUT,
// disbackend/disrest/failpoint_on.go), which only tests do.
var buildFlags []string

const testVersion = "v0.0.0-e2e"

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// binary builds disgw once per test run and returns its path.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "disgw-bin-")
		if buildErr != nil {
			return
		}
		args := append([]string{"build", "-tags", "disgw_failpoints"}, buildFlags...)
		args = append(args, "-ldflags", "-X main.version="+testVersion, "-o", filepath.Join(buildDir, "disgw"), ".")
		out, err := exec.Command("go", args...).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(buildDir, "disgw")
}

// environ is the test's environment without DISGW_* variables, plus extra.
func environ(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DISGW_") {
			env = append(env, kv)
		}
	}
	// Gateways of parallel tests must not share the admin listener's
	// default port; a later DISGW_ADMIN_LISTEN in extra wins.
	env = append(env, "DISGW_ADMIN_LISTEN=127.0.0.1:0")
	return append(env, extra...)
}

// proc is one running disgw.
type proc struct {
	cmd    *exec.Cmd
	stderr string // path of the file holding its stdout and stderr
	done   chan struct{}
	err    error // of cmd.Wait, set before done closes
}

// start runs the binary with args in env. Its output is logged if the test
// fails; at cleanup it is killed if still running.
func start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	stderr := filepath.Join(t.TempDir(), "stderr")
	f, err := os.Create(stderr)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary(t), args...)
	cmd.Env = env
	cmd.Stderr = f
	cmd.Stdout = f
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatal(err)
	}
	f.Close()
	p := &proc{cmd: cmd, stderr: stderr, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("disgw %s output:\n%s", strings.Join(args, " "), p.output(t))
		}
	})
	return p
}

func (p *proc) output(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(p.stderr)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitReady waits for the ready file and returns the address in it.
func (p *proc) waitReady(t *testing.T, readyFile string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(readyFile); err == nil && len(b) > 0 {
			return strings.TrimSpace(string(b))
		}
		select {
		case <-p.done:
			t.Fatalf("disgw exited before it was ready: %v", p.err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatal("disgw did not write its ready file within 60s")
	return ""
}

// stop sends sig and returns the exit code.
func (p *proc) stop(t *testing.T, sig os.Signal) int {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	return p.wait(t)
}

func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatal("disgw did not exit within 60s")
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		t.Fatal(p.err)
	}
	return 0
}

// logLine returns the fields of the first JSON log line with message msg.
func (p *proc) logLine(t *testing.T, msg string) map[string]any {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(p.output(t)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == msg {
			return m
		}
	}
	t.Fatalf("no log line with msg %q", msg)
	return nil
}

// disAccount is a DIS account: the access key pair dislocal checks
// signatures with (--ak, DISGW_DISLOCAL_SK) in its project (--project-id),
// and a gateway signs with (DISGW_DIS_AK, DISGW_DIS_SK, --dis-project-id).
type disAccount struct{ ak, sk, project string }

// e2eAccount is the account of forEachBackend's dislocal when the test
// names none.
var e2eAccount = disAccount{"e2e-access-key", "e2e-secret-key-not-logged", "e2eproject"}

// disLocalOpts is how startDISLocal starts `disgw dislocal`.
type disLocalOpts struct {
	// account is what dislocal checks signatures with; each of its parts
	// is given only when set: the zero account checks none.
	account disAccount
	listen  string   // --listen; "" is 127.0.0.1:0
	data    string   // --data; "" is a new temporary directory's dis
	env     []string // added to the environment, after the account's SK
	args    []string // flags added after the others
	noWait  bool     // return without waiting for the ready file (a start expected to fail)
}

// disLocal is a running `disgw dislocal`.
type disLocal struct {
	*proc
	opts     disLocalOpts // as started, listen and data filled in
	ready    string       // its ready file
	addr     string       // HOST:PORT it listens on ("" with noWait)
	endpoint string       // http://HOST:PORT, a gateway's --dis-endpoint
}

// startDISLocal starts `disgw dislocal` and, unless o.noWait, waits until
// it listens.
func startDISLocal(t *testing.T, o disLocalOpts) *disLocal {
	t.Helper()
	dir := t.TempDir()
	if o.listen == "" {
		o.listen = "127.0.0.1:0"
	}
	if o.data == "" {
		o.data = filepath.Join(dir, "dis")
	}
	d := &disLocal{opts: o, ready: filepath.Join(dir, "dis-ready")}
	var env []string
	if o.account.sk != "" {
		env = append(env, "DISGW_DISLOCAL_SK="+o.account.sk)
	}
	args := []string{"dislocal", "--listen", o.listen, "--data", o.data}
	if o.account.ak != "" {
		args = append(args, "--ak", o.account.ak)
	}
	if o.account.project != "" {
		args = append(args, "--project-id", o.account.project)
	}
	args = append(args, "--ready-file", d.ready)
	d.proc = start(t, environ(append(env, o.env...)...), append(args, o.args...)...)
	if !o.noWait {
		d.addr = d.waitReady(t, d.ready)
		d.endpoint = "http://" + d.addr
	}
	return d
}

// restart starts d's command again, after d exited, on the address d
// listened on (the gateways in front of it keep their endpoint) and the
// same data directory; each change edits the options first.
func (d *disLocal) restart(t *testing.T, change ...func(o *disLocalOpts)) *disLocal {
	t.Helper()
	o := d.opts
	o.listen = d.addr
	for _, c := range change {
		c(&o)
	}
	return startDISLocal(t, o)
}

// gatewayOpts is how startGateway starts `disgw serve`.
type gatewayOpts struct {
	// dis puts the gateway on the DIS backend in front of that dislocal:
	// --backend dis --dis-endpoint, and the dislocal's account (unless
	// ownCredentials). nil: the embedded store.
	dis *disLocal
	// disEndpoint, with dis nil, puts the gateway on the DIS backend in
	// front of an endpoint where no dislocal runs (a start expected to
	// fail); the test gives the credentials.
	disEndpoint string
	// ownCredentials: on DIS, the test gives the credentials and the
	// project itself (env, args) instead of the dislocal's account.
	ownCredentials bool
	listen         string   // --listen; "" is 127.0.0.1:0
	listeners      string   // DISGW_LISTENERS, given in place of --listen
	data           string   // the embedded store's --data; "" is a new temporary directory's data
	ready          string   // --ready-file; "" is a new temporary directory's gw-ready
	env            []string // added to the environment, after the backend's
	args           []string // flags added after the others
	noWait         bool     // return without waiting for the ready file (a start expected to fail)
}

// gatewayProc is a running `disgw serve`.
type gatewayProc struct {
	*proc
	addr  string // the Kafka address of its ready file ("" with noWait)
	ready string // its ready file
	// env and args are its command line, for restart.
	env, args []string
}

// startGateway starts `disgw serve` and, unless o.noWait, waits until it
// listens.
func startGateway(t *testing.T, o gatewayOpts) *gatewayProc {
	t.Helper()
	var env []string
	args := []string{"serve"}
	if o.listeners != "" {
		env = append(env, "DISGW_LISTENERS="+o.listeners)
	} else {
		args = append(args, "--listen", cmp.Or(o.listen, "127.0.0.1:0"))
	}
	switch {
	case o.dis != nil:
		args = append(args, "--backend", "dis", "--dis-endpoint", o.dis.endpoint)
		if !o.ownCredentials {
			a := o.dis.opts.account
			if a.ak == "" || a.sk == "" || a.project == "" {
				t.Fatal("startGateway: the dislocal checks no account; give the gateway's credentials (ownCredentials)")
			}
			env = append(env, "DISGW_DIS_AK="+a.ak, "DISGW_DIS_SK="+a.sk)
			args = append(args, "--dis-project-id", a.project)
		}
	case o.disEndpoint != "":
		args = append(args, "--backend", "dis", "--dis-endpoint", o.disEndpoint)
	default:
		if o.data == "" {
			o.data = filepath.Join(t.TempDir(), "data")
		}
		args = append(args, "--data", o.data)
	}
	if o.ready == "" {
		o.ready = filepath.Join(t.TempDir(), "gw-ready")
	}
	args = append(args, "--ready-file", o.ready)
	g := &gatewayProc{ready: o.ready, env: environ(append(env, o.env...)...), args: append(args, o.args...)}
	g.proc = start(t, g.env, g.args...)
	if !o.noWait {
		g.addr = g.waitReady(t, g.ready)
	}
	return g
}

// restart starts g's command line again, after g exited, and waits until
// it listens. A gateway killed by SIGKILL leaves its ready file: it is
// removed first, so the address read is the new process's.
func (g *gatewayProc) restart(t *testing.T) *gatewayProc {
	t.Helper()
	if err := os.Remove(g.ready); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	n := &gatewayProc{ready: g.ready, env: g.env, args: g.args}
	n.proc = start(t, n.env, n.args...)
	n.addr = n.waitReady(t, n.ready)
	return n
}

// backendFixture is one backend of forEachBackend.
type backendFixture struct {
	name string    // "local" (the embedded store) or "dis": the subtest's name
	dis  *disLocal // on DIS, the subtest's dislocal; nil on the embedded store
}

// gateway starts a gateway on b: on the embedded store in a data directory
// of its own (o.data, if set), or in front of b's dislocal with its account.
func (b backendFixture) gateway(t *testing.T, o gatewayOpts) *gatewayProc {
	t.Helper()
	o.dis = b.dis
	return startGateway(t, o)
}

// onDIS returns flags on the DIS backend, nil on the embedded store.
func (b backendFixture) onDIS(flags ...string) []string {
	if b.dis == nil {
		return nil
	}
	return flags
}

// forEachBackend runs run as two parallel subtests, "local" on the
// embedded store and "dis" with a dislocal of its own, checking the
// signatures of account (the test's own, so that its secret key is its own
// to look for in logs; e2eAccount when none is given).
func forEachBackend(t *testing.T, run func(t *testing.T, b backendFixture), account ...disAccount) {
	t.Helper()
	acct := e2eAccount
	if len(account) > 0 {
		acct = account[0]
	}
	for _, name := range []string{"local", "dis"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := backendFixture{name: name}
			if name == "dis" {
				b.dis = startDISLocal(t, disLocalOpts{account: acct})
			}
			run(t, b)
		})
	}
}

// clusterOpts is how startGatewayCluster starts its nodes.
type clusterOpts struct {
	// dis is the dislocal every node is in front of, with its account.
	dis *disLocal
	// env is added to every node's environment after DISGW_CLUSTER and
	// DISGW_NODE_ID: the cluster's timings (DISGW_CLUSTER_LEASE,
	// DISGW_DIS_REQUEST_TIMEOUT, ...).
	env []string
	// args are flags added to every node's command line.
	args []string
}

// clusterNode is one node of a gatewayCluster: a `disgw serve --backend
// dis` in cluster mode with node id id, listening on and advertising addr,
// the same address across restarts.
type clusterNode struct {
	*gatewayProc
	id int32
}

// gatewayCluster is several nodes in cluster mode in front of one
// dislocal (docs/cluster.md).
type gatewayCluster struct {
	opts  clusterOpts
	nodes []*clusterNode
}

// startGatewayCluster starts n nodes in cluster mode in front of o.dis,
// with node ids 1 to n, each listening on and advertising a port of its own
// on 127.0.0.1, and waits until each listens (not until they hold a view).
func startGatewayCluster(t *testing.T, n int, o clusterOpts) *gatewayCluster {
	t.Helper()
	c := &gatewayCluster{opts: o}
	for i := range n {
		addr := freeAddr(t)
		env := append([]string{"DISGW_CLUSTER=true", fmt.Sprintf("DISGW_NODE_ID=%d", i+1)}, o.env...)
		g := startGateway(t, gatewayOpts{dis: o.dis, listen: addr, env: env, args: append([]string{"--advertise", addr}, o.args...)})
		c.nodes = append(c.nodes, &clusterNode{gatewayProc: g, id: int32(i + 1)})
	}
	return c
}

// freeAddr returns a 127.0.0.1 address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// addrs are the nodes' addresses, every client's seeds.
func (c *gatewayCluster) addrs() []string {
	a := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		a[i] = n.addr
	}
	return a
}

// node returns the node with node id id.
func (c *gatewayCluster) node(t *testing.T, id int32) *clusterNode {
	t.Helper()
	for _, n := range c.nodes {
		if n.id == id {
			return n
		}
	}
	t.Fatalf("no node %d", id)
	return nil
}

// restart starts node n's command line again, after it exited, on the
// same address, and waits until it listens; a port still held is tried
// again for a few seconds.
func (c *gatewayCluster) restart(t *testing.T, n *clusterNode) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		if err := os.Remove(n.ready); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		p := start(t, n.env, n.args...)
		deadline := time.Now().Add(60 * time.Second)
		for {
			if b, err := os.ReadFile(n.ready); err == nil && len(b) > 0 {
				n.proc = p
				return
			}
			select {
			case <-p.done:
				if attempt >= 20 {
					t.Fatalf("node %d exited before it was ready: %v\n%s", n.id, p.err, p.output(t))
				}
				time.Sleep(250 * time.Millisecond)
			case <-time.After(20 * time.Millisecond):
				if time.Now().Before(deadline) {
					continue
				}
				t.Fatalf("node %d not ready within 60s", n.id)
			}
			break
		}
	}
}
