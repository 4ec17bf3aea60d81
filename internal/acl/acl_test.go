package acl

import (
	"context"
	"sync"
	"testing"

	"github.com/disgw/disgw/disbackend"
)

func lit(rt int8, name, principal, host string, op, perm int8) Binding {
	return Binding{ResourceType: rt, ResourceName: name, PatternType: PatternLiteral, Principal: principal, Host: host, Operation: op, Permission: perm}
}

func pre(rt int8, name, principal, host string, op, perm int8) Binding {
	b := lit(rt, name, principal, host, op, perm)
	b.PatternType = PatternPrefixed
	return b
}

// Cases after Kafka's StandardAuthorizerTest (testSimpleAuthorizations,
// testDenyPrecedenceWithOperationAll, testTopicAclWithOperationAll,
// testPrefixAcls, testAuthorizationWithManyAcls) and AclAuthorizerTest
// (testAllowAllAccess, testNoAclFound, testAclInheritance,
// testHostAddressAclValidation, testWildCardAcls, testDenyTakesPrecedence).
func TestDecide(t *testing.T) {
	const alice, bob = "User:alice", "User:bob"
	cases := []struct {
		name      string
		acls      []Binding
		principal string
		host      string
		op, rt    int8
		resource  string
		allowNone bool
		want      bool
	}{
		{"no acls: denied", nil, alice, "1.1.1.1", OpRead, ResourceTopic, "foo", false, false},
		{"no acls, allow.everyone.if.no.acl.found", nil, alice, "1.1.1.1", OpRead, ResourceTopic, "foo", true, true},
		{"acls on another resource only: allow.everyone applies",
			[]Binding{lit(ResourceTopic, "bar", bob, "*", OpRead, PermAllow)}, alice, "1.1.1.1", OpRead, ResourceTopic, "foo", true, true},
		{"acl on the resource for someone else: denied even with allow.everyone",
			[]Binding{lit(ResourceTopic, "foo", bob, "*", OpRead, PermAllow)}, alice, "1.1.1.1", OpRead, ResourceTopic, "foo", true, false},
		{"literal allow", []Binding{lit(ResourceTopic, "foo", alice, "*", OpRead, PermAllow)}, alice, "1.1.1.1", OpRead, ResourceTopic, "foo", false, true},
		{"literal is not a prefix", []Binding{lit(ResourceTopic, "foo", alice, "*", OpRead, PermAllow)}, alice, "1.1.1.1", OpRead, ResourceTopic, "foobar", false, false},
		{"other operation", []Binding{lit(ResourceTopic, "foo", alice, "*", OpRead, PermAllow)}, alice, "1.1.1.1", OpWrite, ResourceTopic, "foo", false, false},
		{"other resource type", []Binding{lit(ResourceGroup, "foo", alice, "*", OpRead, PermAllow)}, alice, "1.1.1.1", OpRead, ResourceTopic, "foo", false, false},
		{"wildcard resource", []Binding{lit(ResourceTopic, "*", alice, "*", OpRead, PermAllow)}, alice, "1.1.1.1", OpRead, ResourceTopic, "anything", false, true},
		{"wildcard principal", []Binding{lit(ResourceTopic, "foo", "User:*", "*", OpRead, PermAllow)}, alice, "1.1.1.1", OpRead, ResourceTopic, "foo", false, true},
		{"principal type matters", []Binding{lit(ResourceTopic, "foo", "Group:alice", "*", OpRead, PermAllow)}, alice, "1.1.1.1", OpRead, ResourceTopic, "foo", false, false},
		{"host matches", []Binding{lit(ResourceTopic, "foo", alice, "192.168.1.1", OpRead, PermAllow)}, alice, "192.168.1.1", OpRead, ResourceTopic, "foo", false, true},
		{"host differs", []Binding{lit(ResourceTopic, "foo", alice, "192.168.1.1", OpRead, PermAllow)}, alice, "192.168.1.2", OpRead, ResourceTopic, "foo", false, false},
		{"prefixed allow", []Binding{pre(ResourceTopic, "team-a.", alice, "*", OpRead, PermAllow)}, alice, "1.1.1.1", OpRead, ResourceTopic, "team-a.x", false, true},
		{"prefixed does not match another prefix", []Binding{pre(ResourceTopic, "team-a.", alice, "*", OpRead, PermAllow)}, alice, "1.1.1.1", OpRead, ResourceTopic, "team-b.x", false, false},
		{"prefixed equal to the name", []Binding{pre(ResourceTopic, "foo", alice, "*", OpRead, PermAllow)}, alice, "1.1.1.1", OpRead, ResourceTopic, "foo", false, true},
		{"deny before allow", []Binding{lit(ResourceTopic, "foo", alice, "*", OpRead, PermAllow), lit(ResourceTopic, "foo", alice, "*", OpRead, PermDeny)},
			alice, "1.1.1.1", OpRead, ResourceTopic, "foo", false, false},
		{"deny listed first wins too", []Binding{lit(ResourceTopic, "foo", alice, "*", OpRead, PermDeny), lit(ResourceTopic, "foo", alice, "*", OpRead, PermAllow)},
			alice, "1.1.1.1", OpRead, ResourceTopic, "foo", false, false},
		{"deny ALL wins over allow READ", []Binding{lit(ResourceTopic, "foo", alice, "*", OpRead, PermAllow), lit(ResourceTopic, "foo", alice, "*", OpAll, PermDeny)},
			alice, "1.1.1.1", OpRead, ResourceTopic, "foo", false, false},
		{"wildcard deny wins over literal allow", []Binding{lit(ResourceTopic, "foo", alice, "*", OpRead, PermAllow), lit(ResourceTopic, "*", "User:*", "*", OpRead, PermDeny)},
			alice, "1.1.1.1", OpRead, ResourceTopic, "foo", false, false},
		{"prefixed deny wins over literal allow", []Binding{lit(ResourceTopic, "team-a.x", alice, "*", OpRead, PermAllow), pre(ResourceTopic, "team-a.", alice, "*", OpRead, PermDeny)},
			alice, "1.1.1.1", OpRead, ResourceTopic, "team-a.x", false, false},
		{"deny for another host does not apply", []Binding{lit(ResourceTopic, "foo", alice, "*", OpRead, PermAllow), lit(ResourceTopic, "foo", alice, "10.0.0.9", OpRead, PermDeny)},
			alice, "1.1.1.1", OpRead, ResourceTopic, "foo", false, true},
		{"allow ALL", []Binding{lit(ResourceTopic, "foo", alice, "*", OpAll, PermAllow)}, alice, "1.1.1.1", OpDelete, ResourceTopic, "foo", false, true},
		{"READ implies DESCRIBE", []Binding{lit(ResourceTopic, "foo", alice, "*", OpRead, PermAllow)}, alice, "1.1.1.1", OpDescribe, ResourceTopic, "foo", false, true},
		{"WRITE implies DESCRIBE", []Binding{lit(ResourceTopic, "foo", alice, "*", OpWrite, PermAllow)}, alice, "1.1.1.1", OpDescribe, ResourceTopic, "foo", false, true},
		{"DELETE implies DESCRIBE", []Binding{lit(ResourceTopic, "foo", alice, "*", OpDelete, PermAllow)}, alice, "1.1.1.1", OpDescribe, ResourceTopic, "foo", false, true},
		{"ALTER implies DESCRIBE", []Binding{lit(ResourceTopic, "foo", alice, "*", OpAlter, PermAllow)}, alice, "1.1.1.1", OpDescribe, ResourceTopic, "foo", false, true},
		{"CREATE does not imply DESCRIBE", []Binding{lit(ResourceTopic, "foo", alice, "*", OpCreate, PermAllow)}, alice, "1.1.1.1", OpDescribe, ResourceTopic, "foo", false, false},
		{"ALTER_CONFIGS implies DESCRIBE_CONFIGS", []Binding{lit(ResourceTopic, "foo", alice, "*", OpAlterConfigs, PermAllow)}, alice, "1.1.1.1", OpDescribeConfigs, ResourceTopic, "foo", false, true},
		{"READ does not imply DESCRIBE_CONFIGS", []Binding{lit(ResourceTopic, "foo", alice, "*", OpRead, PermAllow)}, alice, "1.1.1.1", OpDescribeConfigs, ResourceTopic, "foo", false, false},
		{"DESCRIBE does not imply READ", []Binding{lit(ResourceTopic, "foo", alice, "*", OpDescribe, PermAllow)}, alice, "1.1.1.1", OpRead, ResourceTopic, "foo", false, false},
		{"deny READ does not deny DESCRIBE", []Binding{lit(ResourceTopic, "foo", alice, "*", OpDescribe, PermAllow), lit(ResourceTopic, "foo", alice, "*", OpRead, PermDeny)},
			alice, "1.1.1.1", OpDescribe, ResourceTopic, "foo", false, true},
		{"deny READ with allow WRITE: DESCRIBE allowed", []Binding{lit(ResourceTopic, "foo", alice, "*", OpWrite, PermAllow), lit(ResourceTopic, "foo", alice, "*", OpRead, PermDeny)},
			alice, "1.1.1.1", OpDescribe, ResourceTopic, "foo", false, true},
		{"group read", []Binding{pre(ResourceGroup, "team-a", alice, "*", OpRead, PermAllow)}, alice, "1.1.1.1", OpRead, ResourceGroup, "team-a-consumers", false, true},
		{"cluster", []Binding{lit(ResourceCluster, ClusterName, alice, "*", OpCreate, PermAllow)}, alice, "1.1.1.1", OpCreate, ResourceCluster, ClusterName, false, true},
		{"bob is not alice", []Binding{lit(ResourceTopic, "foo", alice, "*", OpRead, PermAllow)}, bob, "1.1.1.1", OpRead, ResourceTopic, "foo", false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Decide(tc.acls, tc.principal, tc.host, tc.op, tc.rt, tc.resource, tc.allowNone); got != tc.want {
				t.Fatalf("Decide = %v, want %v", got, tc.want)
			}
		})
	}
}

// memStore is an in-memory disbackend.ACLStore.
type memStore struct {
	mu   sync.Mutex
	acls []disbackend.ACL
}

func (m *memStore) ACLs(context.Context) ([]disbackend.ACL, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]disbackend.ACL(nil), m.acls...), nil
}

func (m *memStore) UpdateACLs(_ context.Context, f func([]disbackend.ACL) ([]disbackend.ACL, error)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	next, err := f(append([]disbackend.ACL(nil), m.acls...))
	if err != nil {
		return err
	}
	m.acls = next
	return nil
}

func TestAuthorizerSuperUserCreateDescribeDelete(t *testing.T) {
	ctx := context.Background()
	a, err := New(ctx, &memStore{}, Options{SuperUsers: []string{"User:admin"}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if !a.Authorize("User:admin", "1.2.3.4", OpDelete, ResourceTopic, "x") {
		t.Fatal("super user refused")
	}
	if a.Authorize("User:alice", "1.2.3.4", OpRead, ResourceTopic, "team-a.x") {
		t.Fatal("alice allowed with no acls")
	}
	b := pre(ResourceTopic, "team-a.", "User:alice", "*", OpRead, PermAllow)
	if err := Validate(b); err != nil {
		t.Fatal(err)
	}
	if err := a.Create(ctx, []Binding{b, b}); err != nil {
		t.Fatal(err)
	}
	if !a.Authorize("User:alice", "1.2.3.4", OpRead, ResourceTopic, "team-a.x") {
		t.Fatal("alice refused")
	}
	name := "team-a.x"
	got := a.Describe(Filter{ResourceType: ResourceTopic, ResourceName: &name, PatternType: PatternMatch, Operation: OpAny, Permission: PermAny})
	if len(got) != 1 || got[0] != b {
		t.Fatalf("Describe MATCH = %v", got)
	}
	got = a.Describe(Filter{ResourceType: ResourceTopic, ResourceName: &name, PatternType: PatternLiteral, Operation: OpAny, Permission: PermAny})
	if len(got) != 0 {
		t.Fatalf("Describe LITERAL team-a.x = %v", got)
	}
	if !a.AuthorizeByResourceType("User:alice", "1.2.3.4", OpRead, ResourceTopic) || a.AuthorizeByResourceType("User:alice", "1.2.3.4", OpWrite, ResourceTopic) {
		t.Fatal("AuthorizeByResourceType")
	}
	del, err := a.Delete(ctx, []Filter{{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermAny}})
	if err != nil || len(del) != 1 || len(del[0]) != 1 {
		t.Fatalf("Delete = %v, %v", del, err)
	}
	if a.Authorize("User:alice", "1.2.3.4", OpRead, ResourceTopic, "team-a.x") {
		t.Fatal("alice allowed after delete")
	}
}

func TestAuthorizeByResourceType(t *testing.T) {
	const alice = "User:alice"
	cases := []struct {
		name string
		acls []Binding
		want bool
	}{
		{"none", nil, false},
		{"literal allow", []Binding{lit(ResourceTopic, "foo", alice, "*", OpWrite, PermAllow)}, true},
		{"literal allow denied by literal", []Binding{lit(ResourceTopic, "foo", alice, "*", OpWrite, PermAllow), lit(ResourceTopic, "foo", alice, "*", OpWrite, PermDeny)}, false},
		{"literal allow denied by prefix", []Binding{lit(ResourceTopic, "foo", alice, "*", OpWrite, PermAllow), pre(ResourceTopic, "f", alice, "*", OpWrite, PermDeny)}, false},
		{"prefix allow not dominated", []Binding{pre(ResourceTopic, "foo", alice, "*", OpWrite, PermAllow), pre(ResourceTopic, "foob", alice, "*", OpWrite, PermDeny)}, true},
		{"wildcard deny", []Binding{lit(ResourceTopic, "foo", alice, "*", OpWrite, PermAllow), lit(ResourceTopic, "*", alice, "*", OpWrite, PermDeny)}, false},
		{"allow ALL", []Binding{lit(ResourceTopic, "foo", "User:*", "*", OpAll, PermAllow)}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, err := New(context.Background(), &memStore{acls: tc.acls}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			if got := a.AuthorizeByResourceType(alice, "1.1.1.1", OpWrite, ResourceTopic); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}
