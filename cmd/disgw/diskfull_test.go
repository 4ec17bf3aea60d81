package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDiskFullProcess: a gateway started with less free space than
// storage_min_free_bytes (a mark above the disk's size) comes up in the
// disk-full state: /readyz 503 with the reason, disgw_storage_full 1, the
// records stored before are fetched, a produce fails at its delivery
// timeout (its answers KAFKA_STORAGE_ERROR), and SIGTERM stops it within
// the shutdown grace.
func TestDiskFullProcess(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	gw := startGateway(t, gatewayOpts{data: data})
	cl, err := kgo.NewClient(kgo.SeedBrokers(gw.addr), kgo.DefaultProduceTopic("df"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "df"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	if code := gw.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d", code)
	}

	const grace = 3 * time.Second
	gw = startGateway(t, gatewayOpts{data: data,
		env: []string{"DISGW_STORAGE_MIN_FREE_BYTES=1152921504606846976", "DISGW_SHUTDOWN_GRACE=" + grace.String()}})
	started := gw.logLine(t, "started")
	admin, _ := started["admin_listen"].(string)
	full := gw.logLine(t, "disk full: refusing produces")
	if r, _ := full["reason"].(string); !strings.Contains(r, "below storage_min_free_bytes") {
		t.Fatalf("disk-full line %v", full)
	}
	body, code := httpGet(t, "http://"+admin+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "storage: disk full") {
		t.Fatalf("/readyz on a full disk: %d %q", code, body)
	}
	if body, _ := httpGet(t, "http://"+admin+"/metrics"); !strings.Contains(body, "\ndisgw_storage_full 1\n") {
		t.Fatal("/metrics has no disgw_storage_full 1")
	}

	cons, err := kgo.NewClient(kgo.SeedBrokers(gw.addr), kgo.ConsumeTopics("df"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	for got := 0; got < 3; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("fetch on a full disk: %v", err)
		}
		got += fs.NumRecords()
	}
	cons.Close()

	const delivery = 2 * time.Second
	pcl, err := kgo.NewClient(kgo.SeedBrokers(gw.addr), kgo.DefaultProduceTopic("df"), kgo.RecordDeliveryTimeout(delivery))
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	start := time.Now()
	err = pcl.ProduceSync(ctx, &kgo.Record{Value: []byte("refused")}).FirstErr()
	if !errors.Is(err, kgo.ErrRecordTimeout) && !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("produce on a full disk: %v, want its delivery timeout", err)
	}
	// franz-go retries KAFKA_STORAGE_ERROR after a metadata refresh, at
	// most every MetadataMinAge (5 s by default): the batch fails at the
	// first answer past its delivery timeout.
	if took := time.Since(start); took > delivery+5*time.Second+2*time.Second {
		t.Fatalf("produce on a full disk failed after %v, delivery timeout %v", took, delivery)
	}

	start = time.Now()
	if code := gw.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d after SIGTERM on a full disk", code)
	}
	if took := time.Since(start); took > grace+2*time.Second {
		t.Fatalf("SIGTERM on a full disk took %v, grace %v", took, grace)
	}
}
