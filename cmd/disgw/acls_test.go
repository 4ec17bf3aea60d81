package main

import (
	"context"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaACLsRestart runs the binary with authorizer on (DISGW_AUTHORIZER,
// DISGW_SUPER_USERS=User:ANONYMOUS: the tools connect without SASL) on
// both backends (the embedded store; --backend dis in front of disgw
// dislocal): kafka-acls --add a consumer ACL on the prefix team-a. (Kafka
// 4.4's AclCommand where its jars are installed, else kadm), then
// kafka-acls --list shows exactly what was added, before and after a
// restart of the gateway.
func TestKafkaACLsRestart(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backendFixture) {
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		gw := b.gateway(t, gatewayOpts{env: []string{"DISGW_AUTHORIZER=true", "DISGW_SUPER_USERS=User:admin;User:ANONYMOUS"}})
		addr := gw.addr

		want := []string{
			"GROUP team-a- PREFIXED User:alice * READ ALLOW",
			"TOPIC team-a. PREFIXED User:alice * DESCRIBE ALLOW",
			"TOPIC team-a. PREFIXED User:alice * READ ALLOW",
		}
		java := kafkaTools(t)
		list := func(addr string) []string {
			t.Helper()
			if java != nil {
				return parseACLList(java(t, "org.apache.kafka.tools.AclCommand", "--bootstrap-server", addr, "--list"))
			}
			return kadmACLs(ctx, t, addr)
		}
		if java != nil {
			java(t, "org.apache.kafka.tools.AclCommand", "--bootstrap-server", addr, "--add", "--allow-principal", "User:alice",
				"--consumer", "--topic", "team-a.", "--group", "team-a-", "--resource-pattern-type", "prefixed")
		} else {
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
			if err != nil {
				t.Fatal(err)
			}
			adm := kadm.NewClient(cl)
			for _, b := range []*kadm.ACLBuilder{
				kadm.NewACLs().Topics("team-a.").ResourcePatternType(kadm.ACLPatternPrefixed).Allow("User:alice").AllowHosts("*").Operations(kadm.OpRead, kadm.OpDescribe),
				kadm.NewACLs().Groups("team-a-").ResourcePatternType(kadm.ACLPatternPrefixed).Allow("User:alice").AllowHosts("*").Operations(kadm.OpRead),
			} {
				if _, err := adm.CreateACLs(ctx, b); err != nil {
					t.Fatal(err)
				}
			}
			cl.Close()
		}
		if got := list(addr); !slices.Equal(got, want) {
			t.Fatalf("kafka-acls --list = %q, want %q", got, want)
		}
		if code := gw.stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("exit code after SIGTERM = %d, want 0", code)
		}
		gw = gw.restart(t)
		if got := list(gw.addr); !slices.Equal(got, want) {
			t.Fatalf("after a restart kafka-acls --list = %q, want %q", got, want)
		}
		if code := gw.stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("exit code after SIGTERM = %d, want 0", code)
		}
	}, disAccount{"acl-access-key", "acl-secret-key", "aclproject"})
}

// parseACLList reads kafka-acls --list's output:
//
//	Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=team-a., patternType=PREFIXED)`:
//	 	(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)
func parseACLList(out string) []string {
	var res, got []string
	field := func(s, k string) string {
		_, v, _ := strings.Cut(s, k+"=")
		v, _, _ = strings.Cut(v, ",")
		return strings.TrimRight(v, ")`:")
	}
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "Current ACLs for resource"):
			res = []string{field(line, "resourceType"), field(line, "name"), field(line, "patternType")}
		case strings.Contains(line, "(principal="):
			got = append(got, strings.Join(append(slices.Clone(res), field(line, "principal"), field(line, "host"),
				field(line, "operation"), field(line, "permissionType")), " "))
		}
	}
	sort.Strings(got)
	return got
}

// kadmACLs lists every ACL through kadm's DescribeACLs, a line per ACL as
// parseACLList gives them; opts are the client's (SASL).
func kadmACLs(ctx context.Context, t *testing.T, addr string, opts ...kgo.Opt) []string {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	res, err := kadm.NewClient(cl).DescribeACLs(ctx, kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).
		Operations(kadm.OpAny).Allow().Deny().AllowHosts().DenyHosts())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range res {
		for _, d := range r.Described {
			got = append(got, strings.Join([]string{d.Type.String(), d.Name, d.Pattern.String(), d.Principal, d.Host, d.Operation.String(), d.Permission.String()}, " "))
		}
	}
	sort.Strings(got)
	return slices.Compact(got)
}
