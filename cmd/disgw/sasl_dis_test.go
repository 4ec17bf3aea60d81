package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestScramOnDIS: with --backend dis (dislocal), SCRAM credentials live
// in DIS: a user of the users file and one added with kadm's
// AlterUserSCRAMs authenticate, also after the gateway restarts; their
// gateway-owned apps are not listed as consumer groups; a deleted user is
// refused.
func TestScramOnDIS(t *testing.T) {
	t.Parallel()
	const ak, sk, project = "e2e-access-key", "e2e-secret-key-not-logged", "e2eproject"
	dir := t.TempDir()
	d := startDISLocal(t, disLocalOpts{account: disAccount{ak, sk, project}})
	users := filepath.Join(dir, "users")
	if err := os.WriteFile(users, []byte("PLAIN admin admin-secret\nSCRAM-SHA-256 seeded seeded-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	gw := startGateway(t, gatewayOpts{dis: d, listeners: "SASL_PLAINTEXT://127.0.0.1:0", env: []string{"DISGW_SASL_USERS_FILE=" + users}})
	addr := gw.addr

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := func(addr string) *kadm.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return kadm.NewClient(cl)
	}
	auth := func(addr string, m kgo.Opt) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), m, kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		return err
	}
	seeded := kgo.SASL(scram.Auth{User: "seeded", Pass: "seeded-secret"}.AsSha256Mechanism())
	added := kgo.SASL(scram.Auth{User: "added", Pass: "added-secret"}.AsSha512Mechanism())
	if err := auth(addr, seeded); err != nil {
		t.Fatalf("seeded user: %v", err)
	}
	if res, err := admin(addr).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "added", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "added-secret"}}); err != nil || res.Error() != nil {
		t.Fatalf("alter: %v %v", err, res.Error())
	}
	if err := auth(addr, added); err != nil {
		t.Fatalf("added user: %v", err)
	}
	if code := gw.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if out := gw.output(t); strings.Contains(out, "seeded-secret") || strings.Contains(out, "added-secret") {
		t.Error("the log holds a password")
	}

	_ = os.Remove(gw.ready)
	gw = gw.restart(t)
	addr = gw.addr
	if err := auth(addr, added); err != nil {
		t.Fatalf("added user after a restart: %v", err)
	}
	desc, err := admin(addr).DescribeUserSCRAMs(ctx)
	if err != nil || desc.Error() != nil || len(desc) != 2 || len(desc["added"].CredInfos) != 1 || len(desc["seeded"].CredInfos) != 1 {
		t.Fatalf("describe: %v %v %+v", err, desc.Error(), desc)
	}
	groups, err := admin(addr).ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups.Groups() {
		if strings.Contains(g, "scram") {
			t.Errorf("ListGroups shows the credential app %s", g)
		}
	}
	if res, err := admin(addr).AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "added", Mechanism: kadm.ScramSha512}}, nil); err != nil || res.Error() != nil {
		t.Fatalf("delete: %v %v", err, res.Error())
	}
	if err := auth(addr, added); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("deleted user: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}
