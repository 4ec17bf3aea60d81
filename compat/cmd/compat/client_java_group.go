package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/compat/internal/scen"
)

// kafka-java-consumer-protocol: a consumer group of Kafka 4.4 Java
// consumers (kafka-clients 4.4.0) with group.protocol=consumer (KIP-848),
// each member a JVM running compat/java/group/GroupMember.java (compiled
// with javac into a temporary directory when the row starts). The topic
// and the records are made with franz-go; what is checked is the group:
//
//   - consume: members a, b and c start together and share the 6
//     partitions (2 each); 300 records are read and committed; then b is
//     killed (SIGKILL of its JVM, once the group has committed the end
//     offsets: it has nothing read and uncommitted), a closes (it leaves
//     the group) and d joins; 300 more records: c and d read them, b's
//     partitions once its session has expired (the coordinator's 45 s, as
//     Kafka's group.consumer.session.timeout.ms). Every record is read
//     exactly once across the members, with its key.
//   - resume: c and d close, 100 more records, a new member e starts: it
//     reads exactly those 100 (it starts at the group's commits).
//   - describe: ConsumerGroupDescribe: the group Empty with no member;
//     the committed offsets equal the end offsets (kadm).
const (
	javaGroupPartitions = 6
	javaGroupBatch      = 300
	javaGroupMore       = 100
	javaGroupClass      = "GroupMember"
)

// javaGroupMember is one GroupMember JVM and what it printed.
type javaGroupMember struct {
	name string
	out  string // its stdout (and stderr): REC, COMMITTED, ASSIGNED, ...
	cmd  *exec.Cmd
	done chan error
}

// javaGroupView is what a member printed so far: the records it read and
// the partitions it owns.
type javaGroupView struct {
	recs   []scen.Rec
	owned  map[int32]bool
	closed bool
}

func (m *javaGroupMember) view() javaGroupView {
	v := javaGroupView{owned: map[int32]bool{}}
	f, err := os.Open(m.out)
	if err != nil {
		return v
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) == 0 {
			continue
		}
		switch fs[0] {
		case "REC":
			if len(fs) != 4 {
				continue
			}
			p, err1 := strconv.Atoi(fs[1])
			o, err2 := strconv.ParseInt(fs[2], 10, 64)
			if err1 == nil && err2 == nil {
				v.recs = append(v.recs, scen.Rec{Partition: int32(p), Offset: o, Key: fs[3]})
			}
		case "ASSIGNED", "REVOKED", "LOST":
			for _, s := range fs[1:] {
				if p, err := strconv.Atoi(s); err == nil {
					if fs[0] == "ASSIGNED" {
						v.owned[int32(p)] = true
					} else {
						delete(v.owned, int32(p))
					}
				}
			}
		case "CLOSED":
			v.closed = true
		}
	}
	return v
}

func (m *javaGroupMember) stop(sig os.Signal) {
	if m.cmd != nil {
		stopProcess(m.cmd, m.done, sig, 30*time.Second)
		m.cmd = nil
	}
}

type javaGroupRun struct {
	broker, topic, group, jars, classes, dir string
	cl                                       *kgo.Client
	adm                                      *kadm.Client
	members                                  []*javaGroupMember
	produced                                 map[[2]int64]string // partition, offset: key
	next                                     int                 // the next record's index
}

func (r *javaGroupRun) start(name string) (*javaGroupMember, error) {
	return r.startAs(name, "")
}

// startAs starts member name with group.protocol protocol (consumer or
// classic; "" is GroupMember's default, consumer).
func (r *javaGroupRun) startAs(name, protocol string) (*javaGroupMember, error) {
	m := &javaGroupMember{name: name, out: filepath.Join(r.dir, name+".out"), done: make(chan error, 1)}
	f, err := os.Create(m.out)
	if err != nil {
		return nil, err
	}
	args := []string{"-Xshare:auto", "-XX:TieredStopAtLevel=1",
		"-cp", filepath.Join(r.jars, "*") + string(os.PathListSeparator) + r.classes,
		javaGroupClass, r.broker, r.topic, r.group, "compat-" + name}
	if protocol != "" {
		args = append(args, protocol)
	}
	m.cmd = exec.Command("java", args...)
	m.cmd.Stdout, m.cmd.Stderr = f, f
	if err := m.cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	go func() { m.done <- m.cmd.Wait(); f.Close() }()
	r.members = append(r.members, m)
	return m, nil
}

// produce writes n records (keys key-NNNN on from r.next) and notes where
// each went.
func (r *javaGroupRun) produce(ctx context.Context, n int) error {
	var rs []*kgo.Record
	for i := r.next; i < r.next+n; i++ {
		rs = append(rs, &kgo.Record{Topic: r.topic, Key: []byte(scen.Key(i)), Value: []byte(scen.Value(i))})
	}
	res := r.cl.ProduceSync(ctx, rs...)
	if err := res.FirstErr(); err != nil {
		return err
	}
	for _, pr := range res {
		r.produced[[2]int64{int64(pr.Record.Partition), pr.Record.Offset}] = string(pr.Record.Key)
	}
	r.next += n
	return nil
}

// check reads every member's records: each read once, with the key it was
// produced with; it returns how many were read and whether every produced
// record was.
func (r *javaGroupRun) check() (read int, all bool, err error) {
	seen := map[[2]int64]string{}
	for _, m := range r.members {
		for _, rec := range m.view().recs {
			k := [2]int64{int64(rec.Partition), rec.Offset}
			if by, ok := seen[k]; ok {
				return 0, false, fmt.Errorf("partition %d offset %d (%s) read twice: by %s and by %s", rec.Partition, rec.Offset, rec.Key, by, m.name)
			}
			want, ok := r.produced[k]
			if !ok {
				return 0, false, fmt.Errorf("%s read partition %d offset %d (%s), which was not produced", m.name, rec.Partition, rec.Offset, rec.Key)
			}
			if want != rec.Key {
				return 0, false, fmt.Errorf("%s read partition %d offset %d with key %s, produced with %s", m.name, rec.Partition, rec.Offset, rec.Key, want)
			}
			seen[k] = m.name
		}
	}
	return len(seen), len(seen) == len(r.produced), nil
}

// waitRead waits until every produced record has been read (once).
func (r *javaGroupRun) waitRead(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		read, all, err := r.check()
		if err != nil || all {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d records read after %s; %s", read, len(r.produced), limit, r.owners())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitFor polls cond every 200 ms until it holds or limit passes.
func waitFor(limit time.Duration, what string, cond func() bool, state func() string) error {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: not %s; %s", limit, what, state())
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil
}

// owners says which partitions each running member owns.
func (r *javaGroupRun) owners() string {
	var b []string
	for _, m := range r.members {
		if m.cmd == nil {
			continue
		}
		v := m.view()
		b = append(b, fmt.Sprintf("%s owns %v", m.name, slices.Sorted(maps.Keys(v.owned))))
	}
	return strings.Join(b, ", ")
}

// shareAll reports whether ms own every partition between them, none
// twice, each at least one.
func shareAll(ms ...*javaGroupMember) bool {
	owned := map[int32]bool{}
	for _, m := range ms {
		v := m.view()
		if len(v.owned) == 0 {
			return false
		}
		for p := range v.owned {
			if owned[p] {
				return false
			}
			owned[p] = true
		}
	}
	return len(owned) == javaGroupPartitions
}

// waitCommittedAtEnd waits up to 30 s until committedAtEnd holds; its
// error says the last difference.
func (r *javaGroupRun) waitCommittedAtEnd(ctx context.Context) error {
	var lastErr error
	return waitFor(30*time.Second, "the end offsets committed", func() bool {
		_, _, lastErr = r.committedAtEnd(ctx)
		return lastErr == nil
	}, func() string { return fmt.Sprint(lastErr) })
}

// committedAtEnd reports whether the group's committed offsets equal the
// topic's end offsets.
func (r *javaGroupRun) committedAtEnd(ctx context.Context) (map[int32]int64, map[int32]int64, error) {
	offs, err := r.adm.FetchOffsets(ctx, r.group)
	if err != nil {
		return nil, nil, err
	}
	ends, err := r.adm.ListEndOffsets(ctx, r.topic)
	if err != nil {
		return nil, nil, err
	}
	committed, end := map[int32]int64{}, map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { end[o.Partition] = o.Offset })
	for p := range end {
		if o, ok := offs.Lookup(r.topic, p); ok {
			committed[p] = o.At
		}
	}
	return committed, end, scen.CheckCommittedAtEnd(committed, end)
}

// logTail is the members' ERROR and Exception lines, for a failure's
// detail ("" if none).
func (r *javaGroupRun) logTail() string {
	var b []string
	for _, m := range r.members {
		out, _ := os.ReadFile(m.out)
		if errs := errorLines(out, "Exception"); len(errs) > 0 {
			b = append(b, m.name+": "+tail(strings.Join(errs, " | "), 300))
		}
	}
	if len(b) == 0 {
		return ""
	}
	return " (member errors: " + strings.Join(b, "; ") + ")"
}

// compileGroupMember compiles GroupMember.java with javac against the Kafka
// 4.4.0 jars into classes under a new temporary directory dir (named from
// prefix; the caller removes it).
func compileGroupMember(ctx context.Context, jars, prefix string) (dir, classes string, err error) {
	if _, err := os.Stat(filepath.Join(jars, "kafka-clients-4.4.0.jar")); err != nil {
		return "", "", fmt.Errorf("the Kafka 4.4.0 jars missing under %s (run compat/setup)", jars)
	}
	root, err := repoRoot()
	if err != nil {
		return "", "", err
	}
	dir, err = os.MkdirTemp("", prefix)
	if err != nil {
		return "", "", err
	}
	classes = filepath.Join(dir, "classes")
	if _, _, err := runCmd(ctx, 2*time.Minute, "", "javac", "-nowarn", "-cp", filepath.Join(jars, "*"), "-d", classes,
		filepath.Join(root, "compat", "java", "group", javaGroupClass+".java")); err != nil {
		os.RemoveAll(dir)
		return "", "", fmt.Errorf("javac: %v", err)
	}
	return dir, classes, nil
}

// newJavaGroupRun compiles GroupMember.java (into a directory named from
// prefix, the caller's to remove) and connects the franz-go client that
// makes the row's topic and records; protocols is shown in the row's
// version line. Errors: javac's and kgo.NewClient's.
func newJavaGroupRun(ctx context.Context, broker, topic, group, jars, prefix, protocols string) (*javaGroupRun, error) {
	start := time.Now()
	dir, classes, err := compileGroupMember(ctx, jars, prefix)
	if err != nil {
		return nil, err
	}
	scen.Info("version", "Apache Kafka 4.4.0 kafka-clients, "+protocols+", "+javaVersion(ctx))
	scen.Info("javac", since(start))
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(broker, ",")...))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &javaGroupRun{broker: broker, topic: topic, group: group, jars: jars, classes: classes, dir: dir,
		cl: cl, adm: kadm.NewClient(cl), produced: map[[2]int64]string{}}, nil
}

func runJavaGroup(broker, topic, group, jars string) {
	ctx := context.Background()
	fail := func(msg string) {
		for _, s := range scen.CoreSteps {
			scen.Report(s, "fail", msg)
		}
	}
	r, err := newJavaGroupRun(ctx, broker, topic, group, jars, "compat-java-group-", "group.protocol=consumer")
	if err != nil {
		fail(err.Error())
		return
	}
	defer r.cl.Close()
	defer os.RemoveAll(r.dir)
	defer func() {
		for _, m := range r.members {
			m.stop(os.Kill)
		}
	}()
	logTail := r.logTail

	scen.NA(scen.StepCreate, fmt.Sprintf("the topic (%d partitions) is created with franz-go (kadm): this row checks the Java consumer group", javaGroupPartitions))
	if _, err := r.adm.CreateTopic(ctx, javaGroupPartitions, 1, nil, topic); err != nil {
		for _, s := range scen.CoreSteps[1:] {
			scen.Report(s, "fail", "creating the topic with kadm: "+err.Error())
		}
		return
	}
	scen.NA(scen.StepProduce, "the records are produced with franz-go (kgo), in batches while the group runs")

	consumed := scen.Run(scen.StepConsume, func() (string, error) {
		start := time.Now()
		var abc []*javaGroupMember
		for _, n := range []string{"a", "b", "c"} {
			m, err := r.start(n)
			if err != nil {
				return "", err
			}
			abc = append(abc, m)
		}
		a, b, c := abc[0], abc[1], abc[2]
		if err := waitFor(90*time.Second, "a, b and c sharing the 6 partitions, 2 each", func() bool {
			return shareAll(a, b, c) && len(a.view().owned) == 2 && len(b.view().owned) == 2
		}, r.owners); err != nil {
			return "", fmt.Errorf("%v%s", err, logTail())
		}
		joined := time.Since(start)
		if err := r.produce(ctx, javaGroupBatch); err != nil {
			return "", fmt.Errorf("producing: %v", err)
		}
		if err := r.waitRead(60 * time.Second); err != nil {
			return "", fmt.Errorf("a, b and c: %v%s", err, logTail())
		}
		// Kill b only once the group has committed everything: then no
		// record is read and left uncommitted, and exactly once holds.
		if err := r.waitCommittedAtEnd(ctx); err != nil {
			return "", err
		}
		bOwned := slices.Sorted(maps.Keys(b.view().owned))
		killed := time.Now()
		b.stop(os.Kill)
		a.stop(os.Interrupt)
		if !a.view().closed {
			return "", fmt.Errorf("a did not close on SIGTERM%s", logTail())
		}
		d, err := r.start("d")
		if err != nil {
			return "", err
		}
		if err := r.produce(ctx, javaGroupBatch); err != nil {
			return "", fmt.Errorf("producing: %v", err)
		}
		if err := waitFor(2*time.Minute, "c and d sharing the 6 partitions", func() bool { return shareAll(c, d) }, r.owners); err != nil {
			return "", fmt.Errorf("after a left, b was killed and d joined: %v%s", err, logTail())
		}
		moved := time.Since(killed)
		if err := r.waitRead(60 * time.Second); err != nil {
			return "", fmt.Errorf("c and d: %v%s", err, logTail())
		}
		return fmt.Sprintf("a, b, c shared the 6 partitions (2 each, %.1fs after start) and read %d; b (owning %v) killed (SIGKILL), a closed (left), d joined: c and d own all 6 %.1fs after the kill and read %d more; every one of the %d records read once, with its key (%.1fs)",
			joined.Seconds(), javaGroupBatch, bOwned, moved.Seconds(), javaGroupBatch, len(r.produced), time.Since(start).Seconds()), nil
	})

	if !consumed {
		scen.Skip(scen.StepResume, "needs the group's commits (consume failed)")
	} else {
		scen.Run(scen.StepResume, func() (string, error) {
			for _, m := range r.members {
				if m.cmd != nil {
					m.stop(os.Interrupt)
					if !m.view().closed {
						return "", fmt.Errorf("%s did not close on SIGTERM%s", m.name, logTail())
					}
				}
			}
			before := map[[2]int64]bool{}
			for k := range r.produced {
				before[k] = true
			}
			if err := r.produce(ctx, javaGroupMore); err != nil {
				return "", fmt.Errorf("producing: %v", err)
			}
			e, err := r.start("e")
			if err != nil {
				return "", err
			}
			if err := r.waitRead(90 * time.Second); err != nil {
				return "", fmt.Errorf("e: %v%s", err, logTail())
			}
			for _, rec := range e.view().recs {
				if before[[2]int64{int64(rec.Partition), rec.Offset}] {
					return "", fmt.Errorf("e read partition %d offset %d (%s), committed before it started", rec.Partition, rec.Offset, rec.Key)
				}
			}
			if err := r.waitCommittedAtEnd(ctx); err != nil {
				return "", err
			}
			e.stop(os.Interrupt)
			if !e.view().closed {
				return "", fmt.Errorf("e did not close on SIGTERM%s", logTail())
			}
			return fmt.Sprintf("c and d closed, %d more records: a new member e started at the group's commits and read exactly those", javaGroupMore), nil
		})
	}

	scen.Run(scen.StepDescribe, func() (string, error) {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{group}
		resp, err := req.RequestWith(ctx, r.cl)
		if err != nil {
			return "", fmt.Errorf("ConsumerGroupDescribe: %v", err)
		}
		if len(resp.Groups) != 1 {
			return "", errors.New("ConsumerGroupDescribe: no group in the answer")
		}
		g := resp.Groups[0]
		if g.ErrorCode != 0 || g.State != "Empty" || len(g.Members) != 0 {
			return "", fmt.Errorf("ConsumerGroupDescribe: error %d, state %q, %d members; want Empty with none", g.ErrorCode, g.State, len(g.Members))
		}
		committed, _, err := r.committedAtEnd(ctx)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("ConsumerGroupDescribe: a consumer group, Empty, epoch %d; committed %s = end offsets (kadm)", g.Epoch, scen.FmtOffsets(committed)), nil
	})
}
