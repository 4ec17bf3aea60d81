package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/disgw/disgw/compat/internal/scen"
)

// debezium-postgres: Debezium's PostgreSQL connector 3.6.1.Final (pgoutput,
// no extension) in a Kafka Connect 4.3.1 distributed worker, disgw its only
// bootstrap server, capturing a table of a PostgreSQL cluster the scenario
// runs itself (Debian's postgresql: initdb in a temporary directory, a free
// port, wal_level=logical, pg_ctl; as the postgres user when run as root).
// The scenario runs its own disgw (and dislocal on backend dis), as
// kafka-connect does, since it kills it. The table is items(id primary key,
// v, pad): v counts a row's updates, so every change event says which
// change it is. Steps, in the matrix's columns:
//
//   - create: the connector created with topic.creation.default.* (3
//     partitions, the broker's replication factor): the worker creates the
//     table's topic PREFIX.public.items and the heartbeat topic
//     __debezium-heartbeat.PREFIX itself; heartbeats arrive.
//   - produce: the initial snapshot of 10,000 rows (op r).
//   - consume: transactions of inserts, updates and deletes while it
//     streams (op c, u, d and the delete's tombstone).
//   - resume: the worker killed (SIGKILL) while transactions run, started
//     again.
//   - describe: the connector and its task RUNNING, the replication slot's
//     confirmed_flush_lsn moved past the snapshot.
//   - kill -9 disgw: disgw killed (SIGKILL) while transactions run, started
//     again on its data and port.
//   - restart postgres: pg_ctl stop -m immediate right after transactions
//     committed, start, more transactions.
//   - at-least-once: everything read again from the start.
//
// Each step ends with the same check, on every record the topic has from
// its start (franz-go, no group): after dropping duplicates (the same key,
// op and source.lsn), each key's events are exactly the changes made to
// its row, in order, none lost; a delete is followed by a tombstone; and
// the table a consumer builds (last event per key wins, deletes and
// tombstones remove) equals SELECT id, v FROM items. The last step says how
// many duplicates at-least-once delivery produced (worker and disgw kills,
// the PostgreSQL restart).
//
// debezium-postgres-eos is the same with the worker's
// exactly.once.source.support=enabled and the connector's
// exactly.once.support=required (KIP-618: each batch and its source offsets
// in one transaction), read with read_committed: its last step,
// exactly-once, wants every change event exactly once, no duplicate.
const (
	debeziumJarsDir = "debezium-3.6.1"
	// debeziumRows is the table's rows before the connector starts (its
	// initial snapshot).
	debeziumRows = 10000
	// debeziumTxs is the transactions a step runs; each inserts 2 rows,
	// updates 5 and deletes 1 (16 events with the tombstone).
	debeziumTxs = 200
	// debeziumTimeout is the scenario's time limit.
	debeziumTimeout = 6 * time.Minute
	// debeziumHot is the rows 1..debeziumHot that get most updates (many
	// events a key) and are never deleted.
	debeziumHot = 20
)

// debeziumExtraFor is the steps beyond the core ones of debezium-postgres
// (eos false) or debezium-postgres-eos.
func debeziumExtraFor(eos bool) []string {
	if eos {
		return []string{"kill -9 disgw", "restart postgres", "exactly-once"}
	}
	return []string{"kill -9 disgw", "restart postgres", "at-least-once"}
}

// pgCluster is a PostgreSQL cluster of the scenario's own.
type pgCluster struct {
	bin, dir, data string
	port           int
	asPostgres     bool // run initdb and pg_ctl as the postgres user (we are root)
}

// pgBinDir is the newest /usr/lib/postgresql/*/bin with a pg_ctl (Debian's
// postgresql package).
func pgBinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(dirs) == 0 {
		return "", fmt.Errorf("no /usr/lib/postgresql/*/bin/pg_ctl (apt-get install postgresql)")
	}
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(a))))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(b))))
		return va - vb
	})
	return filepath.Dir(dirs[len(dirs)-1]), nil
}

// startPostgres runs initdb in a directory under dir and starts the cluster
// on a free port, listening on 127.0.0.1 with trust authentication and
// wal_level=logical.
func startPostgres(dir string) (*pgCluster, error) {
	bin, err := pgBinDir()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	pg := &pgCluster{bin: bin, dir: filepath.Join(dir, "pg"), port: port, asPostgres: os.Geteuid() == 0}
	pg.data = filepath.Join(pg.dir, "data")
	if err := os.MkdirAll(pg.dir, 0o700); err != nil {
		return nil, err
	}
	if pg.asPostgres {
		// initdb and postgres refuse to run as root.
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root, and no postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, d := range []string{dir, pg.dir} {
			if err := os.Chown(d, uid, gid); err != nil {
				return nil, err
			}
		}
	}
	if out, err := pg.run(60*time.Second, "initdb", "-D", pg.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		return nil, fmt.Errorf("initdb: %v: %s", err, tail(out, 400))
	}
	conf := fmt.Sprintf("\nport = %d\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '%s'\n"+
		"wal_level = logical\nmax_wal_senders = 4\nmax_replication_slots = 4\nfsync = off\n", port, pg.dir)
	f, err := os.OpenFile(filepath.Join(pg.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	_, err = f.WriteString(conf)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	if err := pg.start(); err != nil {
		return nil, err
	}
	if _, err := pg.psql("postgres", "CREATE DATABASE compat;"); err != nil {
		return nil, err
	}
	return pg, nil
}

// run runs one of PostgreSQL's programs (as the postgres user when we are
// root) and returns its output.
func (pg *pgCluster) run(limit time.Duration, prog string, args ...string) (string, error) {
	name, argv := filepath.Join(pg.bin, prog), args
	if pg.asPostgres {
		name, argv = "runuser", append([]string{"-u", "postgres", "--", filepath.Join(pg.bin, prog)}, args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, argv...)
	cmd.Dir = pg.dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (pg *pgCluster) start() error {
	if out, err := pg.run(60*time.Second, "pg_ctl", "-D", pg.data, "-l", filepath.Join(pg.dir, "postgres.log"), "-w", "start"); err != nil {
		return fmt.Errorf("pg_ctl start: %v: %s", err, tail(out, 400))
	}
	return nil
}

// stop stops the cluster with pg_ctl stop -m mode (fast, immediate).
func (pg *pgCluster) stop(mode string) error {
	if out, err := pg.run(60*time.Second, "pg_ctl", "-D", pg.data, "-m", mode, "-w", "stop"); err != nil {
		return fmt.Errorf("pg_ctl stop -m %s: %v: %s", mode, err, tail(out, 400))
	}
	return nil
}

// psql runs sql in database db with psql over TCP (unaligned, tuples only)
// and returns its output.
func (pg *pgCluster) psql(db, sql string) (string, error) {
	out, errOut, err := runCmd(context.Background(), 2*time.Minute, sql, "psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
		"-h", "127.0.0.1", "-p", strconv.Itoa(pg.port), "-U", "postgres", "-d", db, "-f", "-")
	if err != nil {
		return out, fmt.Errorf("psql: %v: %s", err, tail(errOut, 400))
	}
	return out, nil
}

// table is SELECT id, v FROM items.
func (pg *pgCluster) table() (map[int]int, error) {
	out, err := pg.psql("compat", "SELECT id, v FROM items;")
	if err != nil {
		return nil, err
	}
	rows := map[int]int{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		a, b, ok := strings.Cut(l, "|")
		id, err1 := strconv.Atoi(a)
		v, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("psql: row %q", l)
		}
		rows[id] = v
	}
	return rows, nil
}

// dbzEvent is one change event of a row: op (r, c, u, d) and the row's v
// after it (-1 for a delete).
type dbzEvent struct {
	op byte
	v  int
}

func (e dbzEvent) String() string { return fmt.Sprintf("%c%d", e.op, e.v) }

// dbzModel is the changes the scenario made: each row's v, and the events
// each key must have, in order.
type dbzModel struct {
	rng   *rand.Rand
	v     map[int]int // live rows: id -> v
	live  []int       // live ids, not hot (the ones deletes pick from)
	next  int         // the next id to insert
	want  map[int][]dbzEvent
	tx    int // transactions made
	event int // change events the transactions made (tombstones not counted)
}

func newDbzModel(rows int) *dbzModel {
	m := &dbzModel{rng: rand.New(rand.NewSource(32)), v: map[int]int{}, next: rows + 1, want: map[int][]dbzEvent{}}
	for id := 1; id <= rows; id++ {
		m.v[id] = 0
		m.want[id] = []dbzEvent{{'r', 0}}
		if id > debeziumHot {
			m.live = append(m.live, id)
		}
	}
	return m
}

// batch returns n transactions of SQL (each: 2 inserts, 5 updates, a
// delete), sleep between them, and records their events.
func (m *dbzModel) batch(n int, sleep time.Duration) string {
	var b strings.Builder
	for range n {
		b.WriteString("BEGIN;\n")
		for range 2 {
			id := m.next
			m.next++
			fmt.Fprintf(&b, "INSERT INTO items VALUES (%d, 0, repeat('x', 100));\n", id)
			m.v[id] = 0
			m.live = append(m.live, id)
			m.want[id] = append(m.want[id], dbzEvent{'c', 0})
		}
		for range 5 {
			id := 1 + m.rng.Intn(debeziumHot)
			if m.rng.Intn(2) == 0 {
				id = m.live[m.rng.Intn(len(m.live))]
			}
			m.v[id]++
			fmt.Fprintf(&b, "UPDATE items SET v = v + 1 WHERE id = %d;\n", id)
			m.want[id] = append(m.want[id], dbzEvent{'u', m.v[id]})
		}
		i := m.rng.Intn(len(m.live))
		id := m.live[i]
		m.live[i] = m.live[len(m.live)-1]
		m.live = m.live[:len(m.live)-1]
		delete(m.v, id)
		fmt.Fprintf(&b, "DELETE FROM items WHERE id = %d;\n", id)
		m.want[id] = append(m.want[id], dbzEvent{'d', -1})
		b.WriteString("COMMIT;\n")
		if sleep > 0 {
			fmt.Fprintf(&b, "SELECT pg_sleep(%g);\n", sleep.Seconds())
		}
		m.tx++
		m.event += 8
	}
	return b.String()
}

// dbzReader reads the table's topic from its start, without a group, and
// keeps every record; read_committed (debezium-postgres-eos: an aborted
// transaction's records are not change events that happened; without
// transactions it reads the same as read_uncommitted).
type dbzReader struct {
	cl    *kgo.Client
	adm   *kadm.Client
	topic string
	recs  map[int32][]*kgo.Record
}

func newDbzReader(bootstrap, topic string) (*dbzReader, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return nil, err
	}
	return &dbzReader{cl: cl, adm: kadm.NewClient(cl), topic: topic, recs: map[int32][]*kgo.Record{}}, nil
}

// catchUp reads until it has every record the topic had when it was
// called.
func (r *dbzReader) catchUp(limit time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var ends kadm.ListedOffsets
	for {
		var err error
		if ends, err = r.adm.ListEndOffsets(ctx, r.topic); err == nil && ends.Error() == nil {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("ListOffsets of %s: %v", r.topic, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	behind := func() bool {
		b := false
		ends.Each(func(o kadm.ListedOffset) {
			rs := r.recs[o.Partition]
			if n := int64(0); len(rs) > 0 {
				n = rs[len(rs)-1].Offset + 1
				b = b || n < o.Offset
			} else {
				b = b || o.Offset > 0
			}
		})
		return b
	}
	for behind() {
		// A transaction's commit marker is the last offset of a partition
		// written with exactly.once.source.support: 2 s without a record
		// and the partition is where it would be.
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		fs := r.cl.PollFetches(pctx)
		pcancel()
		if ctx.Err() != nil {
			return fmt.Errorf("reading %s: not at its end offsets after %v", r.topic, limit)
		}
		n := 0
		fs.EachRecord(func(rec *kgo.Record) { r.recs[rec.Partition] = append(r.recs[rec.Partition], rec); n++ })
		if n == 0 && pctx.Err() != nil {
			return nil
		}
	}
	return nil
}

// dbzStats is what a check found.
type dbzStats struct {
	records, events, duplicates, tombstones, rows int
	valueBytes                                    int64 // of the events
}

// check compares what the topic holds with the model and the table (see
// the top of the file).
func (r *dbzReader) check(m *dbzModel, table map[int]int) (dbzStats, error) {
	var st dbzStats
	seen := map[string]bool{}
	got := map[int][]dbzEvent{}
	view := map[int]int{}
	tombstoned := map[int]bool{}
	for p, rs := range r.recs {
		for _, rec := range rs {
			st.records++
			var key struct{ ID *int }
			if err := json.Unmarshal(rec.Key, &key); err != nil || key.ID == nil {
				return st, fmt.Errorf("p%d@%d: key %q", p, rec.Offset, rec.Key)
			}
			id := *key.ID
			if rec.Value == nil {
				st.tombstones++
				tombstoned[id] = true
				delete(view, id)
				continue
			}
			var ev struct {
				Op     string
				After  *struct{ V int }
				Source struct {
					LSN  int64 `json:"lsn"`
					TxID *int64
				}
			}
			if err := json.Unmarshal(rec.Value, &ev); err != nil || len(ev.Op) != 1 {
				return st, fmt.Errorf("p%d@%d: value %s", p, rec.Offset, tail(string(rec.Value), 200))
			}
			st.events++
			st.valueBytes += int64(len(rec.Value))
			if ev.Op != "r" && ev.Source.TxID == nil {
				return st, fmt.Errorf("p%d@%d: %s event without source.txId", p, rec.Offset, ev.Op)
			}
			e := dbzEvent{ev.Op[0], -1}
			if ev.After != nil {
				e.v = ev.After.V
				view[id] = e.v
			} else {
				delete(view, id)
			}
			if e.op == 'd' {
				tombstoned[id] = false
			}
			dedup := fmt.Sprintf("%d/%c/%d", id, e.op, ev.Source.LSN)
			if seen[dedup] {
				st.duplicates++
				continue
			}
			seen[dedup] = true
			got[id] = append(got[id], e)
		}
	}
	for id, want := range m.want {
		if !slices.Equal(got[id], want) {
			return st, fmt.Errorf("key %d: events %v (duplicates dropped), want %v (of %d events, %d duplicates, in %d records)",
				id, got[id], want, st.events, st.duplicates, st.records)
		}
		if want[len(want)-1].op == 'd' && !tombstoned[id] {
			return st, fmt.Errorf("key %d: deleted, no tombstone after its delete", id)
		}
	}
	if len(got) != len(m.want) {
		return st, fmt.Errorf("events of %d keys, the scenario changed %d", len(got), len(m.want))
	}
	if len(view) != len(table) {
		return st, fmt.Errorf("a consumer's view has %d rows, the table %d", len(view), len(table))
	}
	for id, v := range table {
		if w, ok := view[id]; !ok || w != v {
			return st, fmt.Errorf("row %d: v=%d in the table, %d (present %v) in a consumer's view", id, v, w, ok)
		}
	}
	st.rows = len(table)
	return st, nil
}

// debeziumRun is the scenario's PostgreSQL, worker and disgw.
type debeziumRun struct {
	*connectRun
	pg     *pgCluster
	model  *dbzModel
	reader *dbzReader
	table  string // the table's topic
	eos    bool   // debezium-postgres-eos
}

func runDebezium(bin, backend, tools, topic string, eos bool) {
	steps := append(append([]string{}, scen.CoreSteps...), debeziumExtraFor(eos)...)
	fail := func(from int, why string) {
		scen.Report(steps[from], "fail", why)
		for _, s := range steps[from+1:] {
			scen.Report(s, "skip", "an earlier step failed")
		}
	}
	jars, plugins := filepath.Join(tools, connectJarsDir), filepath.Join(tools, debeziumJarsDir)
	for _, f := range []string{filepath.Join(jars, "connect-runtime-4.3.1.jar"),
		filepath.Join(plugins, "debezium-connector-postgres", "debezium-connector-postgres-3.6.1.Final.jar")} {
		if _, err := os.Stat(f); err != nil {
			fail(0, fmt.Sprintf("%s missing (run compat/setup)", f))
			return
		}
	}
	pgVersion, _, _ := runCmd(context.Background(), 10*time.Second, "", "psql", "--version")
	worker := "distributed"
	if eos {
		worker += ", exactly.once.source.support=enabled"
	}
	scen.Info("version", "Debezium PostgreSQL connector 3.6.1.Final (pgoutput) in Apache Kafka Connect 4.3.1 ("+worker+"), "+
		strings.TrimSpace(pgVersion)+", "+javaVersion(context.Background()))

	d, err := newDebeziumRun(bin, backend, jars, plugins, topic, eos)
	if d != nil {
		defer d.close()
	}
	if err != nil {
		fail(0, err.Error())
		return
	}
	// check waits (up to limit) until the topic holds every change made so
	// far, and says what it found.
	check := func(limit time.Duration) (dbzStats, error) {
		deadline := time.Now().Add(limit)
		for {
			st, err := d.check()
			if err == nil || time.Now().After(deadline) {
				return st, err
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	say := func(st dbzStats) string {
		return fmt.Sprintf("%d events, %d tombstones, %d duplicates; each key's events exactly its row's changes, in order; a consumer's view = the table (%d rows)",
			st.events, st.tombstones, st.duplicates, st.rows)
	}

	// create: the connector; the worker creates the table's topic.
	start := time.Now()
	if err := d.createConnector(); err != nil {
		fail(0, err.Error())
		return
	}
	parts, err := d.waitTableTopic()
	if err != nil {
		fail(0, err.Error())
		return
	}
	scen.Report(scen.StepCreate, "pass", fmt.Sprintf("the worker created its internal topics and, by topic.creation.default.*, %s", parts))

	// produce: the initial snapshot.
	if d.reader, err = newDbzReader(d.bootstrap(), d.table); err != nil {
		fail(1, err.Error())
		return
	}
	st, err := check(2 * time.Minute)
	if err != nil {
		fail(1, fmt.Sprintf("initial snapshot: %v; %s", err, d.workerLogTail()))
		return
	}
	scen.Report(scen.StepProduce, "pass", fmt.Sprintf("initial snapshot of %d rows (op r) all read %.1fs after the connector was created, %d bytes an event: %s",
		debeziumRows, time.Since(start).Seconds(), st.valueBytes/int64(max(st.events, 1)), say(st)))

	// consume: changes while it streams.
	if _, err := d.pg.psql("compat", d.model.batch(debeziumTxs, 0)); err != nil {
		fail(2, err.Error())
		return
	}
	if st, err = check(90 * time.Second); err != nil {
		fail(2, fmt.Sprintf("%v; %s", err, d.workerLogTail()))
		return
	}
	scen.Report(scen.StepConsume, "pass", fmt.Sprintf("%d transactions of inserts, updates, deletes streamed: %s", debeziumTxs, say(st)))

	// resume: the worker killed while transactions run.
	if err := d.whileChanging(func() error {
		if d.worker != nil {
			_ = d.worker.Process.Kill()
			<-d.workerDone
			d.worker = nil
		}
		return d.launchWorker(filepath.Join(d.dir, "worker.properties"), filepath.Join(d.dir, "log4j.properties"))
	}); err != nil {
		fail(3, err.Error())
		return
	}
	if st, err = check(2 * time.Minute); err != nil {
		fail(3, fmt.Sprintf("%v; %s", err, d.workerLogTail()))
		return
	}
	scen.Report(scen.StepResume, "pass", fmt.Sprintf("the worker killed (SIGKILL) during %d transactions, started again: %s", debeziumTxs, say(st)))

	// describe
	desc, err := d.describe()
	if err != nil {
		fail(4, err.Error())
		return
	}
	scen.Report(scen.StepDescribe, "pass", desc)

	// kill -9 disgw while transactions run.
	if err := d.whileChanging(d.restartDisgw); err != nil {
		fail(5, err.Error())
		return
	}
	if st, err = check(2 * time.Minute); err != nil {
		fail(5, fmt.Sprintf("%v; %s", err, d.workerLogTail()))
		return
	}
	scen.Report(steps[5], "pass", fmt.Sprintf("disgw killed (SIGKILL) during %d transactions, started again on its data and port: %s", debeziumTxs, say(st)))

	// restart postgres: stopped (immediate) right after transactions
	// committed, before the connector can have streamed them all.
	if _, err := d.pg.psql("compat", d.model.batch(debeziumTxs/2, 0)); err != nil {
		fail(6, err.Error())
		return
	}
	if err := d.pg.stop("immediate"); err != nil {
		fail(6, err.Error())
		return
	}
	time.Sleep(time.Second)
	if err := d.pg.start(); err != nil {
		fail(6, err.Error())
		return
	}
	if _, err := d.pg.psql("compat", d.model.batch(debeziumTxs/2, 0)); err != nil {
		fail(6, err.Error())
		return
	}
	if st, err = check(2 * time.Minute); err != nil {
		fail(6, fmt.Sprintf("%v; %s", err, d.workerLogTail()))
		return
	}
	scen.Report(steps[6], "pass", fmt.Sprintf("pg_ctl stop -m immediate right after %d transactions committed, start, %d more: %s",
		debeziumTxs/2, debeziumTxs/2, say(st)))

	// at-least-once: all of it again, from a fresh reader.
	d.reader.cl.Close()
	if d.reader, err = newDbzReader(d.bootstrap(), d.table); err != nil {
		fail(7, err.Error())
		return
	}
	if st, err = check(time.Minute); err != nil {
		fail(7, err.Error())
		return
	}
	if eos {
		if st.duplicates > 0 || st.events != debeziumRows+d.model.event {
			fail(7, fmt.Sprintf("read_committed from the start: %d change events for %d made, %d duplicates; want each exactly once",
				st.events, debeziumRows+d.model.event, st.duplicates))
			return
		}
		scen.Report(steps[7], "pass", fmt.Sprintf("read_committed from the start: %d change events for %d made (snapshot, %d transactions), "+
			"each exactly once through the kills and the restart, in order per key; view = table (%d rows)",
			st.events, debeziumRows+d.model.event, d.model.tx, st.rows))
		return
	}
	scen.Report(steps[7], "pass", fmt.Sprintf("read again from the start: %d change events for %d made (snapshot, %d transactions): "+
		"%d duplicates, none left after dropping same key+op+source.lsn; each key in order, none lost; view = table (%d rows)",
		st.events, debeziumRows+d.model.event, d.model.tx, st.duplicates, st.rows))
}

// newDebeziumRun starts PostgreSQL with the table, disgw (and dislocal)
// and the worker.
func newDebeziumRun(bin, backend, jars, plugins, topic string, eos bool) (*debeziumRun, error) {
	c := &connectRun{bin: bin, backend: backend, nodes: 1, jars: jars, topic: topic}
	var err error
	if c.dir, err = os.MkdirTemp("", "disgw-compat-debezium-"); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "logs: %s\n", c.dir)
	d := &debeziumRun{connectRun: c, model: newDbzModel(debeziumRows), table: topic + ".public.items", eos: eos}
	if d.pg, err = startPostgres(c.dir); err != nil {
		return d, err
	}
	if _, err := d.pg.psql("compat", fmt.Sprintf("CREATE TABLE items (id int PRIMARY KEY, v int NOT NULL, pad text NOT NULL);\n"+
		"INSERT INTO items SELECT g, 0, repeat('x', 100) FROM generate_series(1, %d) g;\n", debeziumRows)); err != nil {
		return d, err
	}
	c.disgwLog = filepath.Join(c.dir, "disgw.log")
	var disArgs []string
	if backend == "dis" {
		// DIS's per-partition limits (1 MB/s, 1,000 records/s) enforced.
		disArgs = []string{"--flow-control"}
	}
	if c.disgw, c.dataDir, err = startDisgwWith(bin, backend, c.disgwLog, disArgs, "DISGW_CLEANER_CHECK_INTERVAL=200ms"); err != nil {
		return d, err
	}
	c.workerProps = []string{
		"plugin.path=" + plugins,
		// A killed worker's successor gets the connector 6 s after it
		// joins (disgw's group_min_session_timeout), not Connect's 10 s.
		"session.timeout.ms=6000",
		"heartbeat.interval.ms=2000",
	}
	if eos {
		c.workerProps = append(c.workerProps, "exactly.once.source.support=enabled")
	}
	return d, c.startWorker("")
}

func (d *debeziumRun) close() {
	if d.reader != nil {
		d.reader.cl.Close()
	}
	d.connectRun.close()
	if d.pg != nil {
		_ = d.pg.stop("immediate")
		_ = os.RemoveAll(d.pg.data)
	}
}

// createConnector creates the Debezium connector as a user would: pgoutput,
// the table's publication made by Debezium, the topic created by the
// worker (topic.creation.default.*), JSON without schemas.
func (d *debeziumRun) createConnector() error {
	config := map[string]string{
		"connector.class":                   "io.debezium.connector.postgresql.PostgresConnector",
		"tasks.max":                         "1",
		"plugin.name":                       "pgoutput",
		"database.hostname":                 "127.0.0.1",
		"database.port":                     strconv.Itoa(d.pg.port),
		"database.user":                     "postgres",
		"database.password":                 "unused (trust)",
		"database.dbname":                   "compat",
		"topic.prefix":                      d.topic,
		"table.include.list":                "public.items",
		"slot.name":                         "compat_debezium",
		"publication.name":                  "compat_debezium",
		"publication.autocreate.mode":       "filtered",
		"topic.creation.default.partitions": "3",
		"topic.creation.default.replication.factor": "-1",
		"key.converter":                  "org.apache.kafka.connect.json.JsonConverter",
		"key.converter.schemas.enable":   "false",
		"value.converter":                "org.apache.kafka.connect.json.JsonConverter",
		"value.converter.schemas.enable": "false",
		// After PostgreSQL went away, the task is restarted after 2 s
		// (Debezium's default 10 s).
		"retriable.restart.connector.wait.ms": "2000",
		// A heartbeat a second into __debezium-heartbeat.PREFIX (created
		// by the worker too), as Debezium advises for PostgreSQL: the slot's
		// confirmed_flush_lsn moves even while the captured tables do not
		// change.
		"heartbeat.interval.ms": "1000",
	}
	if d.eos {
		// Each of the task's batches and its source offsets in one
		// transaction (the worker's exactly.once.source.support).
		config["exactly.once.support"] = "required"
	}
	return d.connectRun.createConnector("compat-debezium", config)
}

// waitTableTopic waits until the worker has created the table's topic and
// the heartbeat topic, and the heartbeat topic has records, and says how
// many partitions they have.
func (d *debeziumRun) waitTableTopic() (string, error) {
	adm, cl, err := d.admin()
	if err != nil {
		return "", err
	}
	defer cl.Close()
	heartbeat := "__debezium-heartbeat." + d.topic
	deadline := time.Now().Add(90 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		td, err := adm.ListTopics(ctx, d.table, heartbeat)
		var ends kadm.ListedOffsets
		if err == nil && td[d.table].Err == nil && td[heartbeat].Err == nil && len(td[heartbeat].Partitions) > 0 {
			ends, err = adm.ListEndOffsets(ctx, heartbeat)
		}
		cancel()
		if err == nil && ends != nil {
			var beats int64
			ends.Each(func(o kadm.ListedOffset) { beats += o.Offset })
			if beats > 0 {
				return fmt.Sprintf("%s %d partitions; %s %d partitions, %d heartbeats",
					d.table, len(td[d.table].Partitions), heartbeat, len(td[heartbeat].Partitions), beats), nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no topic %s, or %s empty, after 90s; %s", d.table, heartbeat, d.workerLogTail())
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// check reads the topic to its end and checks it against the model and the
// table.
func (d *debeziumRun) check() (dbzStats, error) {
	if err := d.reader.catchUp(30 * time.Second); err != nil {
		return dbzStats{}, err
	}
	table, err := d.pg.table()
	if err != nil {
		return dbzStats{}, err
	}
	if len(table) != len(d.model.v) {
		return dbzStats{}, fmt.Errorf("the table has %d rows, the scenario made %d", len(table), len(d.model.v))
	}
	return d.reader.check(d.model, table)
}

// whileChanging runs debeziumTxs transactions, 10 ms apart (a few
// seconds), and calls kill 1 s into them.
func (d *debeziumRun) whileChanging(kill func() error) error {
	sql := d.model.batch(debeziumTxs, 10*time.Millisecond)
	done := make(chan error, 1)
	go func() { _, err := d.pg.psql("compat", sql); done <- err }()
	time.Sleep(time.Second)
	kerr := kill()
	if err := <-done; err != nil {
		return err
	}
	return kerr
}

// describe checks the connector and its task are RUNNING and the
// replication slot confirmed a flush.
func (d *debeziumRun) describe() (string, error) {
	var st struct {
		Connector struct{ State string }
		Tasks     []struct{ State string }
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, err := d.get("/connectors/compat-debezium/status")
		if err == nil {
			err = json.Unmarshal(b, &st)
		}
		if err == nil && (st.Connector.State != "RUNNING" || len(st.Tasks) != 1 || st.Tasks[0].State != "RUNNING") {
			err = fmt.Errorf("compat-debezium: %s", b)
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return "", err
		}
		time.Sleep(500 * time.Millisecond)
	}
	slot, err := d.pg.psql("compat", "SELECT plugin, active, confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'compat_debezium';")
	if err != nil {
		return "", err
	}
	slot = strings.TrimSpace(slot)
	if !strings.HasPrefix(slot, "pgoutput|t|") {
		return "", fmt.Errorf("replication slot compat_debezium: %q, want pgoutput, active", slot)
	}
	return fmt.Sprintf("compat-debezium and its task RUNNING; replication slot compat_debezium (pgoutput, active) confirmed_flush_lsn %s",
		strings.TrimPrefix(slot, "pgoutput|t|")), nil
}
