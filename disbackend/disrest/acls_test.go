package disrest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/dislocal"
)

// TestACLsSharedInDIS: ACLs written through one node are read by another
// over the same DIS, in several chunks when they do not fit one
// checkpoint; an update replaces them; the ACL apps are not listed as
// consumer groups; more than the chunks hold is refused with
// ErrInvalidConfig and changes nothing.
func TestACLsSharedInDIS(t *testing.T) {
	t.Parallel()
	_, url := startDIS(t, dislocal.Options{})
	a, b := newStore(t, url, nil), newStore(t, url, nil)
	ctx := context.Background()
	if got, err := b.ACLs(ctx); err != nil || len(got) != 0 {
		t.Fatalf("ACLs before any = %v, %v", got, err)
	}
	var many []disbackend.ACL
	for i := range 300 {
		many = append(many, disbackend.ACL{ResourceType: 2, ResourceName: fmt.Sprintf("team-%d.topic,with|odd;chars=%%é", i), PatternType: 4,
			Principal: fmt.Sprintf("User:user-%d", i), Host: "*", Operation: 3, Permission: 3})
	}
	if err := a.UpdateACLs(ctx, func(cur []disbackend.ACL) ([]disbackend.ACL, error) { return append(cur, many...), nil }); err != nil {
		t.Fatal(err)
	}
	if n := len(encodeACLs(many)); n < 3*aclChunkPayload {
		t.Fatalf("the test's ACLs take %d bytes, not several chunks", n)
	}
	got, err := b.ACLs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, many) {
		t.Fatalf("node b reads %d ACLs, want the %d node a wrote", len(got), len(many))
	}
	if err := b.UpdateACLs(ctx, func(cur []disbackend.ACL) ([]disbackend.ACL, error) { return cur[:1], nil }); err != nil {
		t.Fatal(err)
	}
	if got, err := a.ACLs(ctx); err != nil || !slices.Equal(got, many[:1]) {
		t.Fatalf("after b's update node a reads %v, %v", got, err)
	}
	apps, err := a.ListApps(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, app := range apps {
		if strings.HasPrefix(app.Name, aclAppPrefix) {
			t.Fatalf("ListApps lists %s", app.Name)
		}
	}
	huge := slices.Repeat(many, 20)
	err = a.UpdateACLs(ctx, func([]disbackend.ACL) ([]disbackend.ACL, error) { return huge, nil })
	if !errors.Is(err, disbackend.ErrInvalidConfig) {
		t.Fatalf("UpdateACLs of %d ACLs: %v", len(huge), err)
	}
	if got, err := b.ACLs(ctx); err != nil || !slices.Equal(got, many[:1]) {
		t.Fatalf("after a refused update node b reads %v, %v", got, err)
	}
}

// FuzzDecodeACLs: decoding a chunk header or the ACLs never panics; a
// header read is the chunk's; what decodes encodes back to an equal set.
func FuzzDecodeACLs(f *testing.F) {
	f.Add("2,4,3,3,team-a.,User%3Aalice,*")
	f.Add("2,3,3,3,a,User:b,*|4,3,2,3,kafka-cluster,User:*,10.0.0.1")
	f.Add("1,2,3")
	f.Add("g=0a1b2c3d;n=2;2,4,3,3,team")
	f.Fuzz(func(t *testing.T, s string) {
		if gen, n, payload, ok := parseACLChunk(s); ok && (n < 1 || n > maxACLChunks || strings.Contains(gen, ";") || !strings.HasSuffix(s, ";"+payload)) {
			t.Fatalf("parseACLChunk(%q) = %q, %d, %q", s, gen, n, payload)
		}
		acls, err := decodeACLs(s)
		if err != nil {
			return
		}
		again, err := decodeACLs(encodeACLs(acls))
		if err != nil || !slices.Equal(again, acls) {
			t.Fatalf("round trip of %q: %v, %v", s, again, err)
		}
	})
}
