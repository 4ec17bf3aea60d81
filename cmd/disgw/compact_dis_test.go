package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCompactedTopicOnDIS: a compacted topic through `disgw serve
// --backend dis` in front of `disgw dislocal --retention-unit 100ms`
// (a 168-hour stream keeps its records 16.8 s): 1,000 keys × 10 versions
// and 100 tombstones with franz-go. Until every original record has
// expired, and after, reading from the start yields every live key's
// latest value; the gateway is killed (SIGKILL) and started again, and once
// the copies made before the kill have expired too, the keys are all
// there and no tombstoned key is (delete.retention.ms 2 s). retention.ms
// -1 and the configs no stream tag holds read back as they are kept.
func TestCompactedTopicOnDIS(t *testing.T) {
	if testing.Short() {
		t.Skip("long: waits twice for records to expire in DIS (16.8 s a generation)")
	}
	t.Parallel()
	const ak, sk, project = "compact-access-key", "compact-secret-key", "compactproject"
	d := startDISLocal(t, disLocalOpts{account: disAccount{ak, sk, project}, args: []string{"--retention-unit", "100ms"}})
	gw := startGateway(t, gatewayOpts{dis: d})
	addr := gw.addr

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("compacted.dis"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	str := func(s string) *string { return &s }
	if _, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{
		"cleanup.policy": str("compact"), "delete.retention.ms": str("2000"), "min.compaction.lag.ms": str("1000"),
	}, "compacted.dis"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": str("-1")}, "forever"); err != nil {
		t.Fatal(err)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, "compacted.dis", "forever")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		"compacted.dis": {"cleanup.policy": "compact", "delete.retention.ms": "2000", "min.compaction.lag.ms": "1000", "retention.ms": "604800000"},
		"forever":       {"cleanup.policy": "delete", "retention.ms": "604800000"},
	}
	for _, rc := range rcs {
		for k, v := range want[rc.Name] {
			if got := configValue(rc.Configs, k); got != v {
				t.Fatalf("%s: %s = %q, want %q", rc.Name, k, got, v)
			}
		}
	}

	var records []*kgo.Record
	for v := range 10 {
		for k := range 1000 {
			records = append(records, &kgo.Record{Key: fmt.Appendf(nil, "key-%04d", k), Value: fmt.Appendf(nil, "key-%04d version %d", k, v)})
		}
	}
	for k := range 100 {
		records = append(records, &kgo.Record{Key: fmt.Appendf(nil, "key-%04d", k)}) // tombstones
	}
	if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, "compacted.dis")
	if err != nil {
		t.Fatal(err)
	}

	// check reads the topic from its start: every live key's last record
	// is its version 9, a tombstoned key's last is a tombstone (or, with
	// gone, it is not there). It returns whether every partition's start
	// has passed its end in past.
	check := func(addr string, past kadm.ListedOffsets, gone bool) (bool, error) {
		rs, err := readTopicErr(t, addr, "compacted.dis")
		if err != nil {
			return false, err // the start moved under the read: again
		}
		last := map[string][]byte{}
		present := map[string]bool{}
		for _, recs := range rs {
			for _, r := range recs {
				last[string(r.Key)], present[string(r.Key)] = r.Value, true
			}
		}
		for k := range 1000 {
			key := fmt.Sprintf("key-%04d", k)
			switch {
			case k >= 100 && string(last[key]) != key+" version 9":
				t.Fatalf("live key %s reads %q (present %v), want version 9", key, last[key], present[key])
			case k < 100 && last[key] != nil:
				t.Fatalf("tombstoned key %s reads %q", key, last[key])
			case k < 100 && gone && present[key]:
				return false, fmt.Errorf("tombstoned key %s still there", key)
			}
		}
		starts, err := adm.ListStartOffsets(ctx, "compacted.dis")
		if err != nil {
			return false, err
		}
		passed := true
		past.Each(func(o kadm.ListedOffset) {
			if s, ok := starts.Lookup("compacted.dis", o.Partition); !ok || s.Offset < o.Offset {
				passed = false
			}
		})
		return passed, nil
	}
	waitPassed := func(what, addr string, past kadm.ListedOffsets, gone bool) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for {
			passed, err := check(addr, past, gone)
			if passed && err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 90s: %v", what, err)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	waitPassed("the original records expire", addr, ends, false)

	// Kill the gateway: a new one restores the key index from DIS.
	if code := gw.stop(t, syscall.SIGKILL); code == 0 {
		t.Fatal("a killed gateway exited 0")
	}
	if err := os.Remove(gw.ready); err != nil {
		t.Fatal(err)
	}
	gw = gw.restart(t)
	addr = gw.addr
	cl2, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	adm = kadm.NewClient(cl2)
	ends, err = adm.ListEndOffsets(ctx, "compacted.dis")
	if err != nil {
		t.Fatal(err)
	}
	waitPassed("the copies made before the kill expire", addr, ends, true)
	out := gw.output(t)
	if strings.Count(out, `"msg":"compactor: key index restored from its snapshot"`) != 2 {
		t.Error("the restarted gateway did not restore both partitions' key indexes from their snapshots")
	}
	if strings.Contains(out, "live keys expired in DIS before they were copied") {
		t.Fatal("the compactor lost keys")
	}
	// A record without a key is refused, as Kafka refuses it.
	err = cl2.ProduceSync(ctx, &kgo.Record{Topic: "compacted.dis", Value: []byte("no key")}).FirstErr()
	if !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("keyless record to a compacted topic: %v, want INVALID_RECORD", err)
	}
}
