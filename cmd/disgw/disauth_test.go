package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// disAuthLines returns the JSON log lines of out that name code, and fails
// the test if the secret key sk is anywhere in out.
func disAuthLines(t *testing.T, out, code, sk string) []map[string]any {
	t.Helper()
	if strings.Contains(out, sk) {
		t.Fatal("a secret key is in the gateway's log")
	}
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if strings.Contains(sc.Text(), code) && json.Unmarshal(sc.Bytes(), &m) == nil {
			lines = append(lines, m)
		}
	}
	return lines
}

// TestServeOnDISWrongSecretKey: `disgw serve --backend dis` with a wrong SK
// in front of dislocal with signatures on. The gateway lists the streams
// before it listens, so it does not start: it exits 1 with one error line
// naming DIS.4100 and saying what to check, and never writes its ready file.
func TestServeOnDISWrongSecretKey(t *testing.T) {
	t.Parallel()
	const ak, sk, project = "e2e-access-key", "e2e-secret-key", "e2eproject"
	d := startDISLocal(t, disLocalOpts{account: disAccount{ak, sk, project}})

	const wrong = "wrong-secret-key-not-logged"
	gw := startGateway(t, gatewayOpts{dis: d, ownCredentials: true, env: []string{"DISGW_DIS_AK=" + ak, "DISGW_DIS_SK=" + wrong},
		args: []string{"--dis-project-id", project}, noWait: true})
	if code := gw.wait(t); code != exitError {
		t.Fatalf("serve with a wrong SK: exit code %d, want %d", code, exitError)
	}
	lines := disAuthLines(t, gw.output(t), "DIS.4100", wrong)
	if len(lines) != 1 || lines[0]["level"] != "error" || !strings.Contains(lines[0]["error"].(string), "credentials") {
		t.Fatalf("want one error line naming DIS.4100 and the credentials, got %v", lines)
	}
}

// TestServeOnDISCredentialsRejected: the gateway started with good
// credentials, then DIS stops taking them (dislocal restarted with another
// SK, as when a key is rotated). A franz-go producer gets an error, not a
// hang, well within its delivery timeout; the gateway logs an error line
// naming DIS.4100.
func TestServeOnDISCredentialsRejected(t *testing.T) {
	t.Parallel()
	const ak, sk, project = "e2e-access-key", "e2e-secret-key", "e2eproject"
	d := startDISLocal(t, disLocalOpts{account: disAccount{ak, sk, project}})

	gw := startGateway(t, gatewayOpts{dis: d})
	addr := gw.addr

	const deliveryTimeout = 20 * time.Second
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("auth.topic"), kgo.AllowAutoTopicCreation(),
		kgo.RecordDeliveryTimeout(deliveryTimeout))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatalf("produce with good credentials: %v", err)
	}

	if code := d.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("dislocal exit code %d", code)
	}
	// On the same address and data, with another SK.
	d.restart(t, func(o *disLocalOpts) { o.account.sk = "rotated-" + sk })

	begin := time.Now()
	err = cl.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr()
	took := time.Since(begin)
	if !errors.Is(err, kerr.UnknownServerError) {
		t.Fatalf("produce after the key changed: %v after %v, want UNKNOWN_SERVER_ERROR", err, took)
	}
	if took > deliveryTimeout/2 {
		t.Fatalf("produce failed only after %v (delivery timeout %v)", took, deliveryTimeout)
	}
	// The first error-level line: background work (the DIS compactor's
	// first sweep of the groups stream, which may come after the key
	// changed) can log DIS.4100 at info or warn before it.
	lines := disAuthLines(t, gw.output(t), "DIS.4100", sk)
	var first map[string]any
	for _, l := range lines {
		if l["level"] == "error" {
			first = l
			break
		}
	}
	if first == nil || !strings.Contains(first["error"].(string), "credentials") {
		t.Fatalf("want an error line naming DIS.4100 and the credentials, got %v", lines)
	}
	if code := gw.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("serve exit code after SIGTERM = %d", code)
	}
}
