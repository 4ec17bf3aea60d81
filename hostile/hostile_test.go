// Package hostile runs the attacks of a hostile client on 127.0.0.1 against
// the real disgw binary with its default configuration (issue 11): each
// test starts a fresh process under a memory cap (GOMEMLIMIT and ulimit -v),
// runs one attack while a well-behaved client asks for ApiVersions every
// 100 ms, and checks that the gateway stays up, answers the well-behaved
// client within 1 s throughout, and that its peak resident memory (VmHWM)
// stays under 512 MiB.
//
// The binary is built without the race detector, whose memory would drown
// what is measured.
package hostile

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/internal/bombtest"
	"github.com/disgw/disgw/kafkawire"
	"github.com/disgw/disgw/kafkawire/batch"
)

const (
	// maxHWM is the bound on the gateway's peak resident memory.
	maxHWM = 512 << 20
	// memLimit is the GOMEMLIMIT the gateway runs with and vmLimit its
	// address-space cap (ulimit -v): past them a regression dies (fatal
	// error: out of memory) instead of only growing.
	memLimit = "448MiB"
	vmLimit  = 3 << 30
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(probeEnv); addr != "" {
		runProbe(addr)
		return
	}
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

func disgwBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "disgw-hostile-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "disgw")
		out, err := exec.Command("go", "build", "-o", binPath, "../cmd/disgw").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// gateway is one disgw serve process on the embedded store.
type gateway struct {
	t    *testing.T
	cmd  *exec.Cmd
	pid  int
	addr string
	out  string
	done chan struct{}
	err  error
}

// start runs disgw serve with the default configuration (data in a temp
// dir, a free port) under the memory cap.
func start(t *testing.T, env ...string) *gateway {
	t.Helper()
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	out := filepath.Join(dir, "out")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("ulimit -v %d && exec %s serve --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --data %s --ready-file %s",
		vmLimit>>10, disgwBinary(t), filepath.Join(dir, "data"), ready)
	cmd := exec.Command("bash", "-c", script)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DISGW_") && !strings.HasPrefix(kv, "GOMEMLIMIT=") && !strings.HasPrefix(kv, "GOGC=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "GOMEMLIMIT="+memLimit)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	g := &gateway{t: t, cmd: cmd, pid: cmd.Process.Pid, out: out, done: make(chan struct{})}
	go func() { g.err = cmd.Wait(); close(g.done) }()
	t.Cleanup(func() {
		select {
		case <-g.done:
		default:
			_ = cmd.Process.Kill()
			<-g.done
		}
		if t.Failed() {
			b, _ := os.ReadFile(out)
			if len(b) > 20000 {
				b = b[len(b)-20000:]
			}
			t.Logf("disgw output (tail):\n%s", b)
		}
	})
	for deadline := time.Now().Add(60 * time.Second); ; {
		if b, err := os.ReadFile(ready); err == nil && len(b) > 0 {
			g.addr = strings.TrimSpace(string(b))
			break
		}
		select {
		case <-g.done:
			t.Fatalf("disgw exited before it was ready: %v", g.err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("disgw not ready within 60 s")
		}
	}
	return g
}

// hwm returns the process's VmHWM in bytes.
func (g *gateway) hwm() int64 {
	g.t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", g.pid))
	if err != nil {
		g.t.Fatalf("gateway gone: %v", err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	g.t.Fatal("no VmHWM in /proc status")
	return 0
}

// probe asks for ApiVersions every 100 ms from 127.0.0.2 (so that limits
// per client address do not apply to it) until stop; each must be answered
// within 1 s. It runs in a child process (this test binary, re-executed
// with probeEnv set) so that what it measures is the gateway: the attack's
// own load in the test process (frames of up to 300 MiB, the race
// detector, their garbage collection) once delayed an in-process probe's
// dial past its deadline while the gateway answered at once.
type probe struct {
	cmd    *exec.Cmd
	stdin  interface{ Close() error }
	done   chan struct{}
	ok     atomic.Int64
	failed atomic.Int64
	mu     sync.Mutex
	first  string
}

// probeEnv names the gateway address a re-executed test binary probes.
const probeEnv = "DISGW_HOSTILE_PROBE_ADDR"

// runProbe is the child process: one line per probe on stdout ("ok" or
// "fail <error>") until its stdin closes.
func runProbe(addr string) {
	stop := make(chan struct{})
	go func() { _, _ = bufio.NewReader(os.Stdin).ReadByte(); close(stop) }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	w := bufio.NewWriter(os.Stdout)
	for {
		if err := apiVersions(addr, time.Second); err != nil {
			fmt.Fprintf(w, "fail %v\n", strings.ReplaceAll(err.Error(), "\n", " "))
		} else {
			fmt.Fprintln(w, "ok")
		}
		_ = w.Flush()
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}

func (g *gateway) probe() *probe {
	g.t.Helper()
	exe, err := os.Executable()
	if err != nil {
		g.t.Fatal(err)
	}
	p := &probe{cmd: exec.Command(exe), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), probeEnv+"="+g.addr)
	p.cmd.Stderr = os.Stderr
	in, err := p.cmd.StdinPipe()
	if err != nil {
		g.t.Fatal(err)
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		g.t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		g.t.Fatal(err)
	}
	p.stdin = in
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			if line == "ok" {
				p.ok.Add(1)
				continue
			}
			p.failed.Add(1)
			p.mu.Lock()
			if p.first == "" {
				p.first = strings.TrimPrefix(line, "fail ")
			}
			p.mu.Unlock()
		}
	}()
	return p
}

// finish stops the probe and checks its answers.
func (p *probe) finish(t *testing.T) {
	t.Helper()
	_ = p.stdin.Close()
	<-p.done
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("probe process: %v", err)
	}
	if p.ok.Load()+p.failed.Load() == 0 {
		t.Errorf("the probe process sent no ApiVersions")
	}
	if n := p.failed.Load(); n > 0 {
		t.Errorf("%d of %d ApiVersions probes not answered within 1 s; first: %v", n, n+p.ok.Load(), p.first)
	}
}

// apiVersions dials from 127.0.0.2 and asks for ApiVersions v2 within d.
func apiVersions(addr string, d time.Duration) error {
	dl := net.Dialer{Timeout: d, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	c, err := dl.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(d))
	if _, err := c.Write(frame(18, 2, kmsg.NewPtrApiVersionsRequest())); err != nil {
		return err
	}
	resp, err := kafkawire.ReadFrame(c, 1<<20)
	if err != nil {
		return err
	}
	var r kmsg.ApiVersionsResponse
	r.SetVersion(2)
	if err := r.ReadFrom(resp[4:]); err != nil {
		return err
	}
	if r.ErrorCode != 0 {
		return fmt.Errorf("ApiVersions error %d", r.ErrorCode)
	}
	return nil
}

// frame encodes req as a size-prefixed request frame with correlation id 1.
func frame(key, version int16, req kmsg.Request) []byte {
	req.SetVersion(version)
	body := binary.BigEndian.AppendUint16(nil, uint16(key))
	body = binary.BigEndian.AppendUint16(body, uint16(version))
	body = binary.BigEndian.AppendUint32(body, 1)
	body = binary.BigEndian.AppendUint16(body, 7)
	body = append(body, "hostile"...)
	if req.IsFlexible() {
		body = append(body, 0)
	}
	body = req.AppendTo(body)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// emptyEntries is a size-prefixed frame of a non-flexible request header
// (key, version) followed by prefix, an array of n entries of the bytes
// entry each, and suffix: the shape of "many empty names".
func emptyEntries(key, version int16, prefix []byte, n int, entry, suffix []byte) []byte {
	body := binary.BigEndian.AppendUint16(nil, uint16(key))
	body = binary.BigEndian.AppendUint16(body, uint16(version))
	body = binary.BigEndian.AppendUint32(body, 1)
	body = binary.BigEndian.AppendUint16(body, 0) // client id ""
	body = append(body, prefix...)
	body = binary.BigEndian.AppendUint32(body, uint32(n))
	for range n {
		body = append(body, entry...)
	}
	body = append(body, suffix...)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// check waits for the attack's effects to settle, then checks that the
// gateway is up, its peak memory, and the probe.
func (g *gateway) check(t *testing.T, p *probe) {
	t.Helper()
	p.finish(t)
	select {
	case <-g.done:
		t.Fatalf("gateway died: %v", g.err)
	default:
	}
	if err := apiVersions(g.addr, time.Second); err != nil {
		t.Fatalf("gateway does not answer after the attack: %v", err)
	}
	hwm := g.hwm()
	t.Logf("peak resident memory (VmHWM) %d MiB", hwm>>20)
	if hwm > maxHWM {
		t.Fatalf("peak resident memory %d MiB, over %d MiB", hwm>>20, maxHWM>>20)
	}
}

// sendAndRead writes frame on a fresh connection and reads until the
// answer arrives or the gateway closes the connection (d at most).
func sendAndRead(t *testing.T, addr string, fr []byte, d time.Duration) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(d))
	go func() { _, _ = c.Write(fr) }()
	_, err = kafkawire.ReadFrame(bufio.NewReader(c), 1<<30)
	t.Logf("answer or close: %v", err)
}

// TestBigFramesQueue: 10 connections each send 100 MiB - 1 of a
// 100 MiB Produce frame and stall.
func TestBigFramesQueue(t *testing.T) {
	g := start(t)
	p := g.probe()
	const size = 100 << 20
	chunk := make([]byte, 1<<20)
	var wg sync.WaitGroup
	var conns []net.Conn
	for range 10 {
		c, err := net.Dial("tcp", g.addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			head := binary.BigEndian.AppendUint32(nil, size)
			head = binary.BigEndian.AppendUint16(head, 0)
			head = binary.BigEndian.AppendUint16(head, 9)
			if _, err := c.Write(head); err != nil {
				return
			}
			for sent := 4; sent < size-1; {
				n := min(len(chunk), size-1-sent)
				_ = c.SetWriteDeadline(time.Now().Add(20 * time.Second))
				if _, err := c.Write(chunk[:n]); err != nil {
					return
				}
				sent += n
			}
		}()
	}
	time.Sleep(8 * time.Second)
	for _, c := range conns {
		c.Close()
	}
	wg.Wait()
	g.check(t, p)
}

// TestRequestsOfEmptyEntries: requests whose arrays hold millions of empty
// entries (the review measured 190 times the frame's size in memory).
func TestRequestsOfEmptyEntries(t *testing.T) {
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		// Metadata v0: topics [string]; 20 MiB of empty names.
		{"metadata v0 20 MiB", emptyEntries(3, 0, nil, 10<<20, []byte{0, 0}, nil)},
		{"metadata v0 5 MiB", emptyEntries(3, 0, nil, 5<<19, []byte{0, 0}, nil)},
		// DescribeGroups v0: groups [string].
		{"describe groups v0 5 MiB", emptyEntries(15, 0, nil, 5<<19, []byte{0, 0}, nil)},
		// DeleteTopics v0: topics [string], timeout int32.
		{"delete topics v0 5 MiB", emptyEntries(20, 0, nil, 5<<19, []byte{0, 0}, []byte{0, 0, 0, 100})},
		// OffsetFetch v1: group string, topics [topic string, partitions [int32]].
		{"offset fetch v1 5 MiB", emptyEntries(9, 1, []byte{0, 1, 'g'}, 5<<18, []byte{0, 0, 0, 0, 0, 0}, nil)},
		// DescribeConfigs v0: resources [type int8, name string, config names nullable [string]].
		{"describe configs v0 5 MiB", emptyEntries(32, 0, nil, 5<<20/7, []byte{2, 0, 0, 0xff, 0xff, 0xff, 0xff}, nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := start(t)
			p := g.probe()
			var wg sync.WaitGroup
			for range 3 {
				wg.Add(1)
				go func() { defer wg.Done(); sendAndRead(t, g.addr, tc.frame, 60*time.Second) }()
			}
			wg.Wait()
			g.check(t, p)
		})
	}
}

// produceFrame is a Produce v9 request (acks all) of raw to partition p.
func produceFrame(topic string, p int32, raw []byte) []byte {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = p
	rp.Records = raw
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return frame(0, 9, req)
}

// produce sends a Produce frame made by produceFrame on a fresh connection
// and returns the partition's error code.
func produce(t *testing.T, addr string, fr []byte) int16 {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := c.Write(fr); err != nil {
		t.Fatal(err)
	}
	raw, err := kafkawire.ReadFrame(c, 1<<20)
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	var r kmsg.ProduceResponse
	r.SetVersion(9)
	if err := r.ReadFrom(raw[5:]); err != nil { // flexible header: a tag byte
		t.Fatal(err)
	}
	return r.Topics[0].Partitions[0].ErrorCode
}

// roundTrip sends req at version on a fresh connection and decodes the
// answer (within 60 s).
func roundTrip(t *testing.T, addr string, version int16, req kmsg.Request) kmsg.Response {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := c.Write(frame(req.Key(), version, req)); err != nil {
		t.Fatal(err)
	}
	raw, err := kafkawire.ReadFrame(c, 1<<30)
	if err != nil {
		t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	resp := req.ResponseKind()
	resp.SetVersion(version)
	body := raw[4:]
	if resp.IsFlexible() && req.Key() != 18 {
		body = body[1:] // the response header's tags
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	return resp
}

// createTopic creates topic with partitions through CreateTopics v4.
func createTopic(t *testing.T, addr, topic string, partitions int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
	req.Topics = append(req.Topics, rt)
	r := roundTrip(t, addr, 4, req).(*kmsg.CreateTopicsResponse)
	if ec := r.Topics[0].ErrorCode; ec != 0 {
		t.Fatalf("CreateTopics %s: error %d", topic, ec)
	}
}

// TestZstdBombs: zstd bombs of a few KB, 1 GiB of zeros and one record
// of 1 GiB, on 3 partitions over 8 connections.
func TestZstdBombs(t *testing.T) {
	g := start(t)
	createTopic(t, g.addr, "bombs", 3)
	bombs := [][]byte{
		bombtest.ZstdBatch(bombtest.RLEZstd(nil, 1<<30)),
		bombtest.OneRecord(1 << 30),
		bombtest.OneRecord(120 << 20),
	}
	t.Logf("bombs of %d, %d and %d bytes", len(bombs[0]), len(bombs[1]), len(bombs[2]))
	p := g.probe()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 4 {
				if ec := produce(t, g.addr, produceFrame("bombs", int32(i%3), bombs[i%3])); ec != kerr.InvalidRecord.Code {
					t.Errorf("bomb %d: error code %d, want INVALID_RECORD", i%3, ec)
				}
			}
		}()
	}
	wg.Wait()
	g.check(t, p)
}

// TestListOffsetsOfABomb: a few-KB batch holding one 99 MiB record (under
// max.decompressed.message.bytes, so it is stored), then 8 ListOffsets by
// timestamp at once, each of which finds the record in that batch.
func TestListOffsetsOfABomb(t *testing.T) {
	g := start(t)
	createTopic(t, g.addr, "bomb", 1)
	raw := bombtest.OneRecord(99 << 20)
	t.Logf("batch of one 99 MiB record: %d bytes", len(raw))
	p := g.probe()
	if ec := produce(t, g.addr, produceFrame("bomb", 0, raw)); ec != 0 {
		t.Fatalf("produce of the 99 MiB record: error code %d", ec)
	}

	lo := kmsg.NewPtrListOffsetsRequest()
	lo.ReplicaID = -1
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "bomb"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = 0 // the bomb's record is stamped 0 (its batch's first timestamp)
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	fr := frame(2, 4, lo)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", g.addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(60 * time.Second))
			if _, err := c.Write(fr); err != nil {
				t.Error(err)
				return
			}
			resp, err := kafkawire.ReadFrame(c, 1<<20)
			if err != nil {
				t.Errorf("ListOffsets: %v", err)
				return
			}
			var r kmsg.ListOffsetsResponse
			r.SetVersion(4)
			if err := r.ReadFrom(resp[4:]); err != nil {
				t.Error(err)
				return
			}
			if rp := r.Topics[0].Partitions[0]; rp.ErrorCode != 0 || rp.Offset != 0 {
				t.Errorf("ListOffsets by timestamp: error %d, offset %d, want 0 and 0", rp.ErrorCode, rp.Offset)
			}
		}()
	}
	wg.Wait()
	g.check(t, p)
}

// TestConnectionFlood: 3,000 connections from one address.
func TestConnectionFlood(t *testing.T) {
	g := start(t)
	p := g.probe()
	var conns []net.Conn
	for range 3000 {
		c, err := net.Dial("tcp", g.addr)
		if err != nil {
			break
		}
		conns = append(conns, c)
	}
	// Each refused connection is closed at once.
	closed := 0
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
			closed++
		}
	}
	t.Logf("%d connections, %d closed by the gateway", len(conns), closed)
	if closed < len(conns)-1024 {
		t.Errorf("%d of %d connections closed, want at least %d (max_connections_per_ip 1024)", closed, len(conns), len(conns)-1024)
	}
	for _, c := range conns {
		c.Close()
	}
	g.check(t, p)
}

// TestAutoCreateFlood: one Metadata request naming 100,000 new topics.
func TestAutoCreateFlood(t *testing.T) {
	g := start(t)
	p := g.probe()
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	for i := range 100000 {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(fmt.Sprintf("flood-%06d", i))
		req.Topics = append(req.Topics, rt)
	}
	sendAndRead(t, g.addr, frame(3, 4, req), 60*time.Second)
	// How many topics exist now.
	r := roundTrip(t, g.addr, 4, kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse)
	t.Logf("%d topics after the flood", len(r.Topics))
	if len(r.Topics) > 1000 {
		t.Errorf("one Metadata request auto-created %d topics", len(r.Topics))
	}
	g.check(t, p)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestCreateTopicsFlood: one CreateTopics of 450 topics of 10,000
// partitions each (7 KB), then a Metadata request for every topic.
func TestCreateTopicsFlood(t *testing.T) {
	g := start(t)
	p := g.probe()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	for i := range 450 {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = fmt.Sprintf("cq-%03d", i), 10000, 1
		req.Topics = append(req.Topics, rt)
	}
	sendAndRead(t, g.addr, frame(19, 7, req), 60*time.Second)
	r := roundTrip(t, g.addr, 4, kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse)
	parts := 0
	for _, t := range r.Topics {
		if !t.IsInternal { // __consumer_offsets is listed, not created
			parts += len(t.Partitions)
		}
	}
	t.Logf("%d topics, %d partitions after the flood", len(r.Topics), parts)
	if parts > 20000 {
		t.Errorf("one CreateTopics request created %d partitions", parts)
	}
	g.check(t, p)
}

// TestSnappyBatches: Produce requests of 50 partitions, each a snappy
// batch of one 20 MiB record (about 1 MiB sent per batch), on 8
// connections at once: 8 GiB decompressed in all, which the decompression
// budget must queue.
func TestSnappyBatches(t *testing.T) {
	g := start(t)
	createTopic(t, g.addr, "snappy", 50)
	h := batch.NewHeader(0)
	h.Attributes = int16(batch.CodecSnappy)
	raw, err := batch.Rewrite(h, []batch.Record{{Value: make([]byte, 20<<20)}}, -1)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "snappy"
	for p := range 50 {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = int32(p)
		rp.Records = raw
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	fr := frame(0, 9, req)
	t.Logf("%d-byte produce of 50 snappy batches of %d bytes", len(fr), len(raw))
	p := g.probe()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() { defer wg.Done(); sendAndRead(t, g.addr, fr, 120*time.Second) }()
	}
	wg.Wait()
	g.check(t, p)
}

// TestLongNames: requests at the entry ceiling with long names (262,000
// names of 300 bytes: 76 MiB frames) for DeleteTopics, DescribeConfigs and
// CreateTopics, 4 connections at once.
func TestLongNames(t *testing.T) {
	name := strings.Repeat("n", 298)
	var names []byte
	for i := range 262000 {
		names = binary.BigEndian.AppendUint16(names, 300)
		names = append(names, fmt.Sprintf("%s%02d", name, i%100)...)
	}
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		// DeleteTopics v0: topics [string], timeout int32.
		{"delete topics", append(emptyEntriesRaw(20, 0, 262000, names), 0, 0, 0, 100)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := start(t)
			fr := fixSize(tc.frame)
			p := g.probe()
			var wg sync.WaitGroup
			for range 4 {
				wg.Add(1)
				go func() { defer wg.Done(); sendAndRead(t, g.addr, fr, 120*time.Second) }()
			}
			wg.Wait()
			g.check(t, p)
		})
	}
}

// emptyEntriesRaw is a non-flexible request header (key, version) and an
// array of n entries whose bytes are entries, without the size prefix.
func emptyEntriesRaw(key, version int16, n int, entries []byte) []byte {
	body := binary.BigEndian.AppendUint16(nil, uint16(key))
	body = binary.BigEndian.AppendUint16(body, uint16(version))
	body = binary.BigEndian.AppendUint32(body, 1)
	body = binary.BigEndian.AppendUint16(body, 0)
	body = binary.BigEndian.AppendUint32(body, uint32(n))
	return append(body, entries...)
}

// fixSize prefixes body with its size.
func fixSize(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// TestLargeFetches: 64 MiB stored in one partition, then 16 connections
// each fetch it with max_bytes 55 MiB at once, and 16 more never read
// their response.
func TestLargeFetches(t *testing.T) {
	g := start(t)
	createTopic(t, g.addr, "big", 1)
	value := make([]byte, 1000)
	recs := make([]batch.Record, 1000)
	for i := range recs {
		recs[i] = batch.Record{OffsetDelta: int32(i), Value: value}
	}
	for range 64 { // batches of about 1 MiB
		if ec := produce(t, g.addr, produceFrame("big", 0, batch.Encode(batch.NewHeader(0), recs))); ec != 0 {
			t.Fatalf("produce: error %d", ec)
		}
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxBytes, req.MaxWaitMillis = -1, 55<<20, 100
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "big"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 55 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	fr := frame(1, 4, req)
	p := g.probe()
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", g.addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			if _, err := c.Write(fr); err != nil {
				t.Error(err)
				return
			}
			if i%2 == 1 {
				time.Sleep(5 * time.Second) // never reads its response
				return
			}
			_ = c.SetDeadline(time.Now().Add(60 * time.Second))
			if _, err := kafkawire.ReadFrame(bufio.NewReader(c), 1<<30); err != nil {
				t.Errorf("fetch: %v", err)
			}
		}()
	}
	wg.Wait()
	g.check(t, p)
}

// TestTinyBatches: Produce requests of 10,000 partitions each with a
// one-record batch, pipelined 16 deep on 2 connections (320,000 stored batches: the embedded store keeps an index entry and a cache entry of each in memory, about 300 bytes; see docs/limits.md).
func TestTinyBatches(t *testing.T) {
	g := start(t)
	createTopic(t, g.addr, "tiny", 10000)
	tiny := batch.Encode(batch.NewHeader(0), []batch.Record{{Value: []byte("v")}})
	req := kmsg.NewPtrProduceRequest()
	req.Acks = 1
	req.TimeoutMillis = 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "tiny"
	for p := range 10000 {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = int32(p)
		rp.Records = tiny
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	fr := frame(0, 9, req)
	p := g.probe()
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", g.addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(120 * time.Second))
			go func() {
				for range 16 {
					if _, err := c.Write(fr); err != nil {
						return
					}
				}
			}()
			br := bufio.NewReader(c)
			for range 16 {
				if _, err := kafkawire.ReadFrame(br, 1<<30); err != nil {
					t.Errorf("produce: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	g.check(t, p)
}
