package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/disgw/disgw/compat/internal/scen"
)

// kafka-java-migration: the online migration of a group of 3 Kafka 4.4
// Java consumers (kafka-clients 4.4.0, GroupMember.java as in
// kafka-java-consumer-protocol) from the classic protocol to the consumer
// protocol (KIP-848) and back, one member at a time
// (docs/consumer-protocol.md §8). The classic members keep Java's default
// assignors (range, then cooperative-sticky). Before each step 60 records
// are produced, and each step waits until they are read and the group has
// committed the end offsets, so that stopping a member (SIGTERM: it
// closes and leaves the group) leaves no record read and uncommitted.
//
//   - consume: a, b and c start with group.protocol=classic and share the 6
//     partitions (2 each): ListGroups shows a classic group, Stable. Then a,
//     b and c are replaced one at a time by d, e and f with
//     group.protocol=consumer: stop one, start its replacement, wait until
//     the running members own the 6 partitions between them and ListGroups
//     shows the group Stable and of type consumer (from d's join on, the
//     group is a consumer group), produce, read, commit.
//   - resume: d, e and f are replaced the same way by g, h and i with
//     group.protocol=classic: the group stays a consumer group while d, e
//     or f remains, and is a classic group again once f (the last
//     consumer-protocol member) has left, before i joins.
//   - describe: g, h and i close: DescribeGroups and ListGroups show a
//     classic group, Empty, with no member; the committed offsets equal
//     the end offsets. Across the steps every record was read exactly once
//     across the members, with its key, none missed.
//
// With -broker kafka the scenario starts an Apache Kafka 4.4.0 broker
// (kafkabroker.go) and runs against it instead: what the row expects is
// Kafka's behaviour.
const javaMigrationBatch = 60

// javaMigrationStep replaces member stop by start, of protocol, after which
// the group's type is want.
type javaMigrationStep struct {
	stop, start, protocol, want string
}

var (
	javaMigrationUp = []javaMigrationStep{
		{"a", "d", "consumer", "consumer"},
		{"b", "e", "consumer", "consumer"},
		{"c", "f", "consumer", "consumer"},
	}
	javaMigrationDown = []javaMigrationStep{
		{"d", "g", "classic", "consumer"},
		{"e", "h", "classic", "consumer"},
		{"f", "i", "classic", "classic"},
	}
)

// listed is the group as ListGroups shows it: its type and state ("" when
// it is not listed).
func (r *javaGroupRun) listed(ctx context.Context) (typ, state string, err error) {
	ls, err := r.adm.ListGroups(ctx)
	if err != nil {
		return "", "", err
	}
	g, ok := ls[r.group]
	if !ok {
		return "", "", nil
	}
	return g.GroupType, g.State, nil
}

// running is the members not stopped.
func (r *javaGroupRun) running() []*javaGroupMember {
	var ms []*javaGroupMember
	for _, m := range r.members {
		if m.cmd != nil {
			ms = append(ms, m)
		}
	}
	return ms
}

// memberByName is the member called name.
func (r *javaGroupRun) memberByName(name string) *javaGroupMember {
	for _, m := range r.members {
		if m.name == name {
			return m
		}
	}
	return nil
}

// waitSettled waits until the running members own the 6 partitions between
// them and ListGroups shows the group Stable and of type want.
func (r *javaGroupRun) waitSettled(ctx context.Context, want string, limit time.Duration) error {
	var typ, state string
	var lerr error
	return waitFor(limit, fmt.Sprintf("the running members owning the %d partitions and the group Stable, type %q", javaGroupPartitions, want), func() bool {
		if !shareAll(r.running()...) {
			return false
		}
		typ, state, lerr = r.listed(ctx)
		return lerr == nil && typ == want && state == "Stable"
	}, func() string {
		return fmt.Sprintf("%s; ListGroups: type %q, state %q, error %v%s", r.owners(), typ, state, lerr, r.logTail())
	})
}

// batch produces javaMigrationBatch records and waits until they are read
// (every record so far read once) and the group has committed the end
// offsets.
func (r *javaGroupRun) batch(ctx context.Context) error {
	if err := r.produce(ctx, javaMigrationBatch); err != nil {
		return fmt.Errorf("producing: %v", err)
	}
	if err := r.waitRead(30 * time.Second); err != nil {
		return fmt.Errorf("%v%s", err, r.logTail())
	}
	return r.waitCommittedAtEnd(ctx)
}

// roll runs steps: each stops a member gracefully (SIGTERM: it closes and
// leaves the group), starts its replacement, waits until the group is
// settled with the type wanted, and reads and commits a batch.
func (r *javaGroupRun) roll(ctx context.Context, steps []javaMigrationStep) ([]string, error) {
	var done []string
	for _, s := range steps {
		t := time.Now()
		m := r.memberByName(s.stop)
		m.stop(syscall.SIGTERM)
		if !m.view().closed {
			return done, fmt.Errorf("%s did not close on SIGTERM%s", m.name, r.logTail())
		}
		// The last consumer-protocol member gone, the group is classic
		// again before the replacement joins (§8.2, online downgrade).
		if s.protocol == "classic" && s.want == "classic" {
			var typ, state string
			var lerr error
			if err := waitFor(15*time.Second, "a classic group once the last consumer-protocol member left", func() bool {
				typ, state, lerr = r.listed(ctx)
				return lerr == nil && typ == "classic"
			}, func() string {
				return fmt.Sprintf("ListGroups: type %q, state %q, error %v", typ, state, lerr)
			}); err != nil {
				return done, fmt.Errorf("%s stopped: %v", s.stop, err)
			}
		}
		if _, err := r.startAs(s.start, s.protocol); err != nil {
			return done, err
		}
		if err := r.waitSettled(ctx, s.want, 60*time.Second); err != nil {
			return done, fmt.Errorf("%s stopped, %s (%s) started: %v", s.stop, s.start, s.protocol, err)
		}
		settled := time.Since(t)
		if err := r.batch(ctx); err != nil {
			return done, fmt.Errorf("%s stopped, %s (%s) started: %v", s.stop, s.start, s.protocol, err)
		}
		done = append(done, fmt.Sprintf("%s->%s (%s): %s Stable in %.1fs", s.stop, s.start, s.protocol, s.want, settled.Seconds()))
	}
	return done, nil
}

func runJavaMigration(broker, topic, group, jars, tools string) {
	ctx := context.Background()
	fail := func(msg string) {
		for _, s := range scen.CoreSteps {
			scen.Report(s, "fail", msg)
		}
	}
	if broker == "kafka" {
		kb, err := startKafkaBroker(tools)
		if err != nil {
			fail("starting the Apache Kafka 4.4.0 broker: " + err.Error())
			return
		}
		defer kb.Stop()
		scen.Info("broker", "Apache Kafka 4.4.0 at "+kb.Addr+", log "+kb.Log)
		broker = kb.Addr
	}
	r, err := newJavaGroupRun(ctx, broker, topic, group, jars, "compat-java-migration-", "group.protocol=classic and consumer")
	if err != nil {
		fail(err.Error())
		return
	}
	defer r.cl.Close()
	dir := r.dir
	ok := true
	defer func() {
		for _, m := range r.members {
			m.stop(os.Kill)
		}
		if ok {
			os.RemoveAll(dir)
		} else {
			scen.Info("members' output", dir)
		}
	}()

	scen.NA(scen.StepCreate, fmt.Sprintf("the topic (%d partitions) is created with franz-go (kadm): this row checks the Java consumer group", javaGroupPartitions))
	if _, err := r.adm.CreateTopic(ctx, javaGroupPartitions, 1, nil, topic); err != nil {
		ok = false
		for _, s := range scen.CoreSteps[1:] {
			scen.Report(s, "fail", "creating the topic with kadm: "+err.Error())
		}
		return
	}
	scen.NA(scen.StepProduce, fmt.Sprintf("the records are produced with franz-go (kgo), %d before each step", javaMigrationBatch))

	upgraded := scen.Run(scen.StepConsume, func() (string, error) {
		t := time.Now()
		var abc []*javaGroupMember
		for _, n := range []string{"a", "b", "c"} {
			m, err := r.startAs(n, "classic")
			if err != nil {
				return "", err
			}
			abc = append(abc, m)
		}
		if err := r.waitSettled(ctx, "classic", 60*time.Second); err != nil {
			return "", fmt.Errorf("a, b and c (classic): %v", err)
		}
		for _, m := range abc {
			if n := len(m.view().owned); n != 2 {
				return "", fmt.Errorf("a, b and c (classic, range): %s owns %d partitions, want 2; %s", m.name, n, r.owners())
			}
		}
		joined := time.Since(t)
		if err := r.batch(ctx); err != nil {
			return "", fmt.Errorf("a, b and c (classic): %v", err)
		}
		done, err := r.roll(ctx, javaMigrationUp)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("a, b, c classic: a classic group, Stable, 2 partitions each (%.1fs); rolled to group.protocol=consumer one at a time: %s; %d records read once each, committed (%.1fs)",
			joined.Seconds(), strings.Join(done, ", "), len(r.produced), time.Since(t).Seconds()), nil
	})
	ok = ok && upgraded

	downgraded := false
	if !upgraded {
		scen.Skip(scen.StepResume, "needs the group rolled to the consumer protocol (consume failed)")
	} else {
		downgraded = scen.Run(scen.StepResume, func() (string, error) {
			t := time.Now()
			done, err := r.roll(ctx, javaMigrationDown)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("rolled back to group.protocol=classic one at a time: %s (a classic group once f, the last consumer-protocol member, left); each new member started at the group's commits; %d records read once each, committed (%.1fs)",
				strings.Join(done, ", "), len(r.produced), time.Since(t).Seconds()), nil
		})
	}
	ok = ok && downgraded

	ok = scen.Run(scen.StepDescribe, func() (string, error) {
		for _, m := range r.running() {
			m.stop(syscall.SIGTERM)
			if !m.view().closed {
				return "", fmt.Errorf("%s did not close on SIGTERM%s", m.name, r.logTail())
			}
		}
		if _, all, err := r.check(); err != nil || !all {
			return "", fmt.Errorf("not every record read exactly once: %v", err)
		}
		dg, err := r.adm.DescribeGroups(ctx, group)
		if err != nil {
			return "", fmt.Errorf("DescribeGroups: %v", err)
		}
		g, found := dg[group]
		if !found || g.Err != nil || g.State != "Empty" || len(g.Members) != 0 || g.ProtocolType != "consumer" {
			return "", fmt.Errorf("DescribeGroups: %+v; want a classic group (protocol type consumer), Empty, with no member", g)
		}
		typ, state, err := r.listed(ctx)
		if err != nil || typ != "classic" || state != "Empty" {
			return "", fmt.Errorf("ListGroups: type %q, state %q, error %v; want classic, Empty", typ, state, err)
		}
		committed, _, err := r.committedAtEnd(ctx)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("g, h, i closed: DescribeGroups and ListGroups show a classic group, Empty, no member; committed %s = end offsets (kadm); each of the %d records read exactly once across the 9 members",
			scen.FmtOffsets(committed), len(r.produced)), nil
	}) && ok
}
