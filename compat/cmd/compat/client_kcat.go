package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/disgw/disgw/compat/internal/scen"
)

// kcat (Debian's, librdkafka 2.0.2). It has no admin API (the topic is
// auto-created by the first produce) and no group describe. -H applies one
// set of headers to a whole run, so its records carry only the header
// client=kcat.
const kcatFormat = `%p\t%o\t%T\t%k\t%s\t%h\n`

type kcatRec struct {
	scen.Rec
	TS int64
}

func parseKcat(out string) ([]kcatRec, error) {
	var recs []kcatRec
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.SplitN(line, "\t", 6)
		if len(f) != 6 {
			return nil, fmt.Errorf("kcat output line %q: want 6 tab-separated fields", line)
		}
		p, err1 := strconv.Atoi(f[0])
		o, err2 := strconv.ParseInt(f[1], 10, 64)
		ts, err3 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("kcat output line %q: bad partition, offset or timestamp", line)
		}
		r := kcatRec{Rec: scen.Rec{Partition: int32(p), Offset: o, Key: f[3], Value: f[4], Headers: map[string]string{}}, TS: ts}
		if f[5] != "" {
			for _, kv := range strings.Split(f[5], ",") {
				k, v, _ := strings.Cut(kv, "=")
				r.Headers[k] = v
			}
		}
		recs = append(recs, r)
	}
	return recs, nil
}

func plain(rs []kcatRec) []scen.Rec {
	out := make([]scen.Rec, len(rs))
	for i, r := range rs {
		out[i] = r.Rec
	}
	return out
}

func runKcat(broker, topic, group string) {
	scen.ClientHeaderOnly = true
	ctx := context.Background()
	if out, _, err := runCmd(ctx, 10*time.Second, "", "kcat", "-V"); err == nil {
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "Version ") {
				scen.Info("version", "kcat "+strings.TrimPrefix(l, "Version "))
			}
		}
	}
	base := []string{"-b", broker}
	sec := scen.SecurityFromEnv().LibrdkafkaConfig()
	for _, k := range slices.Sorted(maps.Keys(sec)) {
		base = append(base, "-X", k+"="+sec[k])
	}
	kcat := func(timeout time.Duration, stdin string, args ...string) (string, error) {
		out, _, err := runCmd(ctx, timeout, stdin, "kcat", append(slices.Clone(base), args...)...)
		return out, err
	}
	lines := func(from, to int) string {
		var b strings.Builder
		for i := from; i < to; i++ {
			fmt.Fprintf(&b, "%s:%s\n", scen.Key(i), scen.Value(i))
		}
		return b.String()
	}
	produce := func(from, to int) error {
		_, err := kcat(60*time.Second, lines(from, to), "-P", "-t", topic, "-K", ":", "-H", "client=kcat")
		return err
	}

	scen.NA(scen.StepCreate, "kcat has no admin API: -P auto-creates the topic")
	produced := scen.Run(scen.StepProduce, func() (string, error) {
		if err := produce(0, scen.N); err != nil {
			return "", err
		}
		return fmt.Sprintf("kcat -P -K: -H client=kcat: %d lines, exit 0", scen.N), nil
	})

	scen.Run("kcat -L", func() (string, error) {
		if nodes := clusterNodes(); nodes != nil {
			return kcatListCluster(ctx, base, broker, topic, nodes)
		}
		out, err := kcat(20*time.Second, "", "-L", "-J", "-t", topic)
		if err != nil {
			return "", err
		}
		md, err := parseKcatMetadata(out)
		if err != nil {
			return "", err
		}
		if len(md.Brokers) != 1 || md.Brokers[0].Name != broker {
			return "", fmt.Errorf("kcat -L brokers %+v, want one broker %s", md.Brokers, broker)
		}
		if len(md.Topics) != 1 || md.Topics[0].Topic != topic || len(md.Topics[0].Partitions) == 0 || md.Topics[0].Err != nil {
			return "", fmt.Errorf("kcat -L topics %s", tail(out, 400))
		}
		return fmt.Sprintf("broker %s, topic with %d partition(s)", broker, len(md.Topics[0].Partitions)), nil
	})

	var all []kcatRec
	readAll := scen.Run("kcat -C -e", func() (string, error) {
		if !produced {
			return "", fmt.Errorf("nothing produced")
		}
		out, err := kcat(30*time.Second, "", "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", kcatFormat)
		if err != nil {
			return "", err
		}
		recs, err := parseKcat(out)
		if err != nil {
			return "", err
		}
		if err := scen.CheckFirst(plain(recs), "kcat", true); err != nil {
			return "", err
		}
		if len(recs) != scen.N {
			return "", fmt.Errorf("kcat -C -e read %d records, want %d", len(recs), scen.N)
		}
		all = recs
		return fmt.Sprintf("read all %d records with keys, values, header client=kcat", scen.N), nil
	})

	ends := map[int32]int64{}
	for _, r := range all {
		if r.Offset+1 > ends[r.Partition] {
			ends[r.Partition] = r.Offset + 1
		}
	}

	scen.Run("kcat -o -1", func() (string, error) {
		if !readAll {
			return "", fmt.Errorf("needs kcat -C -e")
		}
		out, err := kcat(30*time.Second, "", "-C", "-t", topic, "-o", "-1", "-e", "-q", "-f", kcatFormat)
		if err != nil {
			return "", err
		}
		recs, err := parseKcat(out)
		if err != nil {
			return "", err
		}
		got := map[int32]int64{}
		for _, r := range recs {
			if _, dup := got[r.Partition]; dup {
				return "", fmt.Errorf("partition %d: more than one record from -o -1", r.Partition)
			}
			got[r.Partition] = r.Offset + 1
		}
		if scen.FmtOffsets(got) != scen.FmtOffsets(ends) {
			return "", fmt.Errorf("-o -1 read the records ending at %s, want the last of each partition %s", scen.FmtOffsets(got), scen.FmtOffsets(ends))
		}
		return fmt.Sprintf("one record per partition, the last (%s)", scen.FmtOffsets(ends)), nil
	})

	scen.Run("kcat -o s@TS", func() (string, error) {
		if !readAll {
			return "", fmt.Errorf("needs kcat -C -e")
		}
		// The timestamp of the middle record; expect in each partition
		// everything from the first record at or after it.
		byTS := append([]kcatRec(nil), all...)
		sort.Slice(byTS, func(i, j int) bool { return byTS[i].TS < byTS[j].TS })
		ts := byTS[len(byTS)/2].TS
		want := map[int32]int64{}
		for _, r := range all {
			if r.TS >= ts {
				if o, ok := want[r.Partition]; !ok || r.Offset < o {
					want[r.Partition] = r.Offset
				}
			}
		}
		out, err := kcat(30*time.Second, "", "-C", "-t", topic, "-o", "s@"+strconv.FormatInt(ts, 10), "-e", "-q", "-f", kcatFormat)
		if err != nil {
			return "", err
		}
		recs, err := parseKcat(out)
		if err != nil {
			return "", err
		}
		first := map[int32]int64{}
		n := 0
		for _, r := range recs {
			if _, ok := first[r.Partition]; !ok {
				first[r.Partition] = r.Offset
			}
			n++
		}
		if scen.FmtOffsets(first) != scen.FmtOffsets(want) {
			return "", fmt.Errorf("-o s@%d started at %s, want %s (first record with timestamp >= %d per partition)", ts, scen.FmtOffsets(first), scen.FmtOffsets(want), ts)
		}
		return fmt.Sprintf("-o s@%d started at %s and read %d records", ts, scen.FmtOffsets(first), n), nil
	})

	group1 := func(args ...string) ([]scen.Rec, error) {
		out, err := kcat(consumeTimeout, "", append([]string{"-G", group, "-X", "auto.offset.reset=earliest", "-e", "-q", "-f", kcatFormat}, append(args, topic)...)...)
		recs, perr := parseKcat(out)
		if err == nil {
			err = perr
		}
		return plain(recs), err
	}

	var first []scen.Rec
	consumed := scen.Run(scen.StepConsume, func() (string, error) {
		recs, err := group1()
		first = recs
		if err != nil {
			return "", fmt.Errorf("kcat -G %s -e (read %d records): %v", group, len(recs), err)
		}
		if err := scen.CheckFirst(recs, "kcat", true); err != nil {
			return "", err
		}
		if len(recs) != scen.N {
			return "", fmt.Errorf("kcat -G -e read %d records, want %d", len(recs), scen.N)
		}
		return fmt.Sprintf("kcat -G -e read all %d records; offsets committed on exit", scen.N), nil
	})
	if !consumed {
		scen.Skip(scen.StepResume, "needs a committed first consumer (consume failed)")
	} else {
		scen.Run(scen.StepResume, func() (string, error) {
			if err := produce(scen.N, scen.N+scen.More); err != nil {
				return "", fmt.Errorf("producing %d more records: %v", scen.More, err)
			}
			committed := scen.Committed(first)
			recs, err := group1()
			if cerr := scen.CheckResume(first, committed, recs, scen.N+scen.More, "kcat", true); cerr != nil {
				if err != nil {
					return "", fmt.Errorf("%v (kcat: %v)", cerr, err)
				}
				return "", cerr
			}
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("after %d more records, kcat -G resumed at %s and read exactly those", scen.More, scen.FmtOffsets(committed)), nil
		})
	}
	scen.NA(scen.StepDescribe, "kcat has no group describe")
}

// kcatMetadata is kcat -L -J's output.
type kcatMetadata struct {
	Controller int `json:"controllerid"`
	Brokers    []struct {
		ID   int    `json:"id"`
		Name string `json:"name"`
	} `json:"brokers"`
	Topics []struct {
		Topic      string `json:"topic"`
		Err        any    `json:"error"`
		Partitions []struct {
			Partition int `json:"partition"`
			Leader    int `json:"leader"`
		} `json:"partitions"`
	} `json:"topics"`
}

func parseKcatMetadata(out string) (kcatMetadata, error) {
	var md kcatMetadata
	if err := json.Unmarshal([]byte(out), &md); err != nil {
		return md, fmt.Errorf("kcat -L -J output: %v: %s", err, tail(out, 300))
	}
	return md, nil
}

// kcatListCluster is kcat -L with several nodes (nodes: node i at
// nodes[i]): kcat -L -J of the topic through the bootstrap, then through
// each node alone. Each must list every node as a broker with its id and
// address, the same controller (one of them), and the topic with the same
// leader of each partition, every leader a node; the detail names how many
// partitions each node leads.
func kcatListCluster(ctx context.Context, base []string, bootstrap, topic string, nodes []string) (string, error) {
	var first *kcatMetadata
	firstFrom := ""
	for _, b := range append([]string{bootstrap}, nodes...) {
		args := append(slices.Clone(base), "-L", "-J", "-t", topic)
		args[1] = b // base is -b BOOTSTRAP, then the security settings
		out, _, err := runCmd(ctx, 20*time.Second, "", "kcat", args...)
		if err != nil {
			return "", err
		}
		md, err := parseKcatMetadata(out)
		if err != nil {
			return "", err
		}
		got := map[int]string{}
		for _, br := range md.Brokers {
			got[br.ID] = br.Name
		}
		same := len(got) == len(nodes)
		for i, a := range nodes {
			same = same && got[i] == a
		}
		if !same {
			return "", fmt.Errorf("kcat -b %s -L: brokers %v, want the %d nodes %v", b, got, len(nodes), nodes)
		}
		if md.Controller < 0 || md.Controller >= len(nodes) {
			return "", fmt.Errorf("kcat -b %s -L: controller %d, not a node", b, md.Controller)
		}
		if len(md.Topics) != 1 || md.Topics[0].Topic != topic || len(md.Topics[0].Partitions) == 0 || md.Topics[0].Err != nil {
			return "", fmt.Errorf("kcat -b %s -L topics %s", b, tail(out, 400))
		}
		for _, p := range md.Topics[0].Partitions {
			if p.Leader < 0 || p.Leader >= len(nodes) {
				return "", fmt.Errorf("kcat -b %s -L: partition %d led by %d, not a node", b, p.Partition, p.Leader)
			}
		}
		if first == nil {
			first, firstFrom = &md, b
			continue
		}
		if md.Controller != first.Controller {
			return "", fmt.Errorf("kcat -b %s -L: controller %d, kcat -b %s -L: %d", b, md.Controller, firstFrom, first.Controller)
		}
		if fmt.Sprint(md.Topics[0].Partitions) != fmt.Sprint(first.Topics[0].Partitions) {
			return "", fmt.Errorf("kcat -b %s -L: partitions (partition, leader) %v, kcat -b %s -L: %v", b, md.Topics[0].Partitions, firstFrom, first.Topics[0].Partitions)
		}
	}
	led := make([]int, len(nodes))
	for _, p := range first.Topics[0].Partitions {
		led[p.Leader]++
	}
	return fmt.Sprintf("through the bootstrap %s and each node alone: the %d nodes as brokers, controller %d, "+
		"the same leaders of the topic's %d partitions (partitions led by node 0, 1, ...: %v)",
		bootstrap, len(nodes), first.Controller, len(first.Topics[0].Partitions), led), nil
}
