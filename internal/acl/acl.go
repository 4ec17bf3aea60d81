// Package acl is the gateway's authorizer: Kafka's ACL model (Apache Kafka
// 4.4's StandardAuthorizer is the spec) over bindings kept in a
// disbackend.ACLStore, so every gateway node shares them and they survive
// restarts.
//
// Rules: a super user may do anything; otherwise the bindings whose
// resource pattern matches the resource (LITERAL: the same name or the
// wildcard "*"; PREFIXED: a prefix of the name), whose principal is the
// client's or "User:*" and whose host is the client's IP or "*" decide: a
// DENY of the operation (or ALL) wins over any ALLOW; an ALLOW of the
// operation (or ALL) allows, and so does an ALLOW of READ, WRITE, DELETE or
// ALTER for DESCRIBE, and of ALTER_CONFIGS for DESCRIBE_CONFIGS (DENY
// bindings imply nothing). With no binding at all on the resource, the
// answer is AllowEveryoneIfNoACL (Kafka allow.everyone.if.no.acl.found,
// default false); with bindings on it none of which allows, it is denied.
package acl

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
)

// Binding is one ACL binding (Kafka AclBinding).
type Binding = disbackend.ACL

// Kafka's codes (org.apache.kafka.common.resource.ResourceType,
// PatternType, acl.AclOperation, acl.AclPermissionType), as on the wire.
const (
	ResourceAny             int8 = 1
	ResourceTopic           int8 = 2
	ResourceGroup           int8 = 3
	ResourceCluster         int8 = 4
	ResourceTransactionalID int8 = 5
	ResourceDelegationToken int8 = 6
	ResourceUser            int8 = 7

	PatternAny      int8 = 1
	PatternMatch    int8 = 2
	PatternLiteral  int8 = 3
	PatternPrefixed int8 = 4

	OpAny             int8 = 1
	OpAll             int8 = 2
	OpRead            int8 = 3
	OpWrite           int8 = 4
	OpCreate          int8 = 5
	OpDelete          int8 = 6
	OpAlter           int8 = 7
	OpDescribe        int8 = 8
	OpClusterAction   int8 = 9
	OpDescribeConfigs int8 = 10
	OpAlterConfigs    int8 = 11
	OpIdempotentWrite int8 = 12
	OpCreateTokens    int8 = 13
	OpDescribeTokens  int8 = 14

	PermAny   int8 = 1
	PermDeny  int8 = 2
	PermAllow int8 = 3
)

// Wildcard is the resource name, host and principal name matching any.
const Wildcard = "*"

// WildcardPrincipal matches every principal (Kafka User:*).
const WildcardPrincipal = "User:*"

// Anonymous is the principal of an unauthenticated connection.
const Anonymous = "User:ANONYMOUS"

// ClusterName is the name of the one CLUSTER resource.
const ClusterName = "kafka-cluster"

// Options configure an Authorizer.
type Options struct {
	// SuperUsers may do anything (Kafka super.users), principals such as
	// "User:admin".
	SuperUsers []string
	// AllowEveryoneIfNoACL allows an operation on a resource no binding
	// names (Kafka allow.everyone.if.no.acl.found). Default false.
	AllowEveryoneIfNoACL bool
	// RefreshInterval is how often the bindings are read again from the
	// store, so changes made through another node apply here within it.
	// Default 10 s.
	RefreshInterval time.Duration
	Logger          *zap.Logger
}

// Authorizer answers authorization questions from a snapshot of the
// store's bindings, re-read every RefreshInterval and after each change
// made through it.
type Authorizer struct {
	store   disbackend.ACLStore
	opts    Options
	supers  map[string]bool
	log     *zap.Logger
	snap    atomic.Pointer[[]Binding]
	mu      sync.Mutex // serialises changes made through this node
	stop    chan struct{}
	done    chan struct{}
	stopped sync.Once
}

// New loads the bindings from store and starts the refresh loop (Close
// stops it). Errors: the store's.
func New(ctx context.Context, store disbackend.ACLStore, opts Options) (*Authorizer, error) {
	if opts.RefreshInterval <= 0 {
		opts.RefreshInterval = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	a := &Authorizer{store: store, opts: opts, supers: map[string]bool{}, log: opts.Logger,
		stop: make(chan struct{}), done: make(chan struct{})}
	for _, u := range opts.SuperUsers {
		a.supers[u] = true
	}
	if err := a.Refresh(ctx); err != nil {
		return nil, err
	}
	go a.loop()
	return a, nil
}

// Close stops the refresh loop.
func (a *Authorizer) Close() {
	a.stopped.Do(func() { close(a.stop) })
	<-a.done
}

func (a *Authorizer) loop() {
	defer close(a.done)
	t := time.NewTicker(a.opts.RefreshInterval)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), a.opts.RefreshInterval+10*time.Second)
			if err := a.Refresh(ctx); err != nil {
				a.log.Warn("acls not re-read; the previous ones stay in force", zap.Error(err))
			}
			cancel()
		}
	}
}

// Refresh reads the bindings from the store now.
func (a *Authorizer) Refresh(ctx context.Context) error {
	acls, err := a.store.ACLs(ctx)
	if err != nil {
		return err
	}
	a.snap.Store(&acls)
	return nil
}

func (a *Authorizer) bindings() []Binding { return *a.snap.Load() }

// IsSuperUser reports whether principal is a super user.
func (a *Authorizer) IsSuperUser(principal string) bool { return a.supers[principal] }

// Authorize reports whether principal, connected from host (an IP
// address), may do op on the resource of type rt named name.
func (a *Authorizer) Authorize(principal, host string, op, rt int8, name string) bool {
	if a.supers[principal] {
		return true
	}
	return Decide(a.bindings(), principal, host, op, rt, name, a.opts.AllowEveryoneIfNoACL)
}

// Decide applies Kafka's rules to bindings (see the package comment).
func Decide(bindings []Binding, principal, host string, op, rt int8, name string, allowIfNone bool) bool {
	found, allowed := false, false
	for i := range bindings {
		b := &bindings[i]
		if b.ResourceType != rt || !patternMatches(b, name) {
			continue
		}
		found = true
		switch matchEntry(b, principal, host, op) {
		case PermDeny:
			return false
		case PermAllow:
			allowed = true
		}
	}
	if !found {
		return allowIfNone
	}
	return allowed
}

// patternMatches reports whether b's resource pattern covers name.
func patternMatches(b *Binding, name string) bool {
	switch b.PatternType {
	case PatternLiteral:
		return b.ResourceName == name || b.ResourceName == Wildcard
	case PatternPrefixed:
		return strings.HasPrefix(name, b.ResourceName)
	}
	return false
}

// matchEntry is Kafka's StandardAuthorizerData.findResult: 0 when b does
// not apply to principal, host and op, else b's permission.
func matchEntry(b *Binding, principal, host string, op int8) int8 {
	if b.Principal != principal && b.Principal != WildcardPrincipal {
		return 0
	}
	if b.Host != Wildcard && b.Host != host {
		return 0
	}
	if b.Operation != OpAll {
		if b.Permission == PermAllow {
			switch op {
			case OpDescribe:
				if !slices.Contains([]int8{OpDescribe, OpRead, OpWrite, OpDelete, OpAlter}, b.Operation) {
					return 0
				}
			case OpDescribeConfigs:
				if b.Operation != OpDescribeConfigs && b.Operation != OpAlterConfigs {
					return 0
				}
			default:
				if b.Operation != op {
					return 0
				}
			}
		} else if b.Operation != op {
			return 0
		}
	}
	return b.Permission
}

// AuthorizeByResourceType reports whether principal may do op on at least
// one resource of type rt (Kafka Authorizer.authorizeByResourceType, used
// by InitProducerId for idempotent producers with WRITE on any topic): a
// super user may; otherwise some ALLOW binding of op (or ALL) must not be
// covered by a DENY (a DENY of the literal wildcard covers everything, a
// PREFIXED DENY covers the names it is a prefix of).
func (a *Authorizer) AuthorizeByResourceType(principal, host string, op, rt int8) bool {
	if a.supers[principal] {
		return true
	}
	denyLit, denyPre := map[string]bool{}, map[string]bool{}
	var allow []*Binding
	for i := range a.bindings() {
		b := &a.bindings()[i]
		if b.ResourceType != rt || (b.Operation != op && b.Operation != OpAll) {
			continue
		}
		if b.Principal != principal && b.Principal != WildcardPrincipal || b.Host != Wildcard && b.Host != host {
			continue
		}
		switch {
		case b.Permission == PermDeny && b.PatternType == PatternLiteral:
			denyLit[b.ResourceName] = true
		case b.Permission == PermDeny && b.PatternType == PatternPrefixed:
			denyPre[b.ResourceName] = true
		case b.Permission == PermAllow:
			allow = append(allow, b)
		}
	}
	if denyLit[Wildcard] {
		return false
	}
	for _, b := range allow {
		if b.PatternType == PatternLiteral && denyLit[b.ResourceName] {
			continue
		}
		dominated := false
		for i := 1; i <= len(b.ResourceName); i++ {
			if denyPre[b.ResourceName[:i]] {
				dominated = true
				break
			}
		}
		if !dominated {
			return true
		}
	}
	return false
}

// Filter selects bindings (Kafka AclBindingFilter): nil strings and the
// ANY codes match everything; PatternMatch matches the bindings that would
// apply to ResourceName (LITERAL equal or "*", PREFIXED prefixes of it).
type Filter struct {
	ResourceType int8
	ResourceName *string
	PatternType  int8
	Principal    *string
	Host         *string
	Operation    int8
	Permission   int8
}

// Matches reports whether f selects b.
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != ResourceAny && f.ResourceType != b.ResourceType {
		return false
	}
	if f.PatternType != PatternAny && f.PatternType != PatternMatch && f.PatternType != b.PatternType {
		return false
	}
	if f.ResourceName != nil {
		name := *f.ResourceName
		if f.PatternType == PatternAny || f.PatternType == b.PatternType {
			if name != b.ResourceName {
				return false
			}
		} else if !patternMatches(&b, name) {
			return false
		}
	}
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	if f.Operation != OpAny && f.Operation != b.Operation {
		return false
	}
	return f.Permission == PermAny || f.Permission == b.Permission
}

// ValidateFilter returns why f cannot select anything Kafka keeps (an
// UNKNOWN code), nil when it can be used.
func ValidateFilter(f Filter) error {
	switch {
	case f.ResourceType < ResourceAny || f.ResourceType > ResourceUser:
		return fmt.Errorf("unknown resource type %d", f.ResourceType)
	case f.PatternType < PatternAny || f.PatternType > PatternPrefixed:
		return fmt.Errorf("unknown pattern type %d", f.PatternType)
	case f.Operation < OpAny || f.Operation > OpDescribeTokens:
		return fmt.Errorf("unknown operation %d", f.Operation)
	case f.Permission < PermAny || f.Permission > PermAllow:
		return fmt.Errorf("unknown permission type %d", f.Permission)
	}
	return nil
}

// Validate returns why b cannot be created (Kafka AclControlManager and
// AuthHelper's checks; the gateway answers INVALID_REQUEST), nil when it
// can.
func Validate(b Binding) error {
	switch {
	case b.ResourceType <= ResourceAny || b.ResourceType > ResourceUser:
		return fmt.Errorf("invalid resource type %d", b.ResourceType)
	case b.PatternType != PatternLiteral && b.PatternType != PatternPrefixed:
		return fmt.Errorf("invalid pattern type %d: only LITERAL and PREFIXED ACLs can be created", b.PatternType)
	case b.Operation <= OpAny || b.Operation > OpDescribeTokens:
		return fmt.Errorf("invalid operation %d", b.Operation)
	case b.Permission != PermAllow && b.Permission != PermDeny:
		return fmt.Errorf("invalid permission type %d", b.Permission)
	case b.ResourceName == "":
		return fmt.Errorf("invalid empty resource name specified")
	case b.ResourceType == ResourceCluster && b.ResourceName != ClusterName:
		return fmt.Errorf("the only valid name for the CLUSTER resource is %s", ClusterName)
	case b.Host == "":
		return fmt.Errorf("invalid empty host; use * for any host")
	}
	typ, name, ok := strings.Cut(b.Principal, ":")
	if !ok || typ == "" || name == "" {
		return fmt.Errorf("invalid principal %q: expected TYPE:NAME such as User:alice", b.Principal)
	}
	return nil
}

// Describe returns the bindings f selects.
func (a *Authorizer) Describe(f Filter) []Binding {
	var out []Binding
	for _, b := range a.bindings() {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	return out
}

// MaxBindings is the most bindings an Authorizer keeps; a Create past it
// fails with ErrTooMany.
const MaxBindings = 10000

// ErrTooMany: a Create would keep more than MaxBindings bindings.
var ErrTooMany = fmt.Errorf("acl: more than %d ACLs", MaxBindings)

// Create adds bindings (those already kept are kept once) and stores the
// result. Validate them first. Errors: ErrTooMany, the store's.
func (a *Authorizer) Create(ctx context.Context, add []Binding) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var result []Binding
	err := a.store.UpdateACLs(ctx, func(cur []Binding) ([]Binding, error) {
		next := slices.Clone(cur)
		for _, b := range add {
			if !slices.Contains(next, b) {
				next = append(next, b)
			}
		}
		if len(next) > MaxBindings {
			return nil, ErrTooMany
		}
		result = next
		return next, nil
	})
	if err != nil {
		return err
	}
	a.snap.Store(&result)
	return nil
}

// Delete removes the bindings each filter selects and returns them, per
// filter. Errors: the store's.
func (a *Authorizer) Delete(ctx context.Context, filters []Filter) ([][]Binding, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var result []Binding
	var deleted [][]Binding
	err := a.store.UpdateACLs(ctx, func(cur []Binding) ([]Binding, error) {
		deleted = make([][]Binding, len(filters))
		next := make([]Binding, 0, len(cur))
		for _, b := range cur {
			keep := true
			for i, f := range filters {
				if f.Matches(b) {
					deleted[i] = append(deleted[i], b)
					keep = false
				}
			}
			if keep {
				next = append(next, b)
			}
		}
		result = next
		return next, nil
	})
	if err != nil {
		return nil, err
	}
	a.snap.Store(&result)
	return deleted, nil
}
