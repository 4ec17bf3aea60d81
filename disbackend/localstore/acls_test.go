package localstore

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap/zaptest"

	"github.com/disgw/disgw/disbackend"
)

// TestACLsSurviveReopen: UpdateACLs is durable across a reopen; an error
// from update writes nothing; after Close both methods fail with ErrClosed.
func TestACLsSurviveReopen(t *testing.T) {
	fs := vfs.NewMem()
	ctx := context.Background()
	open := func() *Store {
		s, err := Open("d", Options{FS: fs, RetentionCheckInterval: -1, Logger: zaptest.NewLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	want := []disbackend.ACL{{ResourceType: 2, ResourceName: "team-a.", PatternType: 4, Principal: "User:alice", Host: "*", Operation: 3, Permission: 3}}
	if err := s.UpdateACLs(ctx, func(cur []disbackend.ACL) ([]disbackend.ACL, error) { return append(cur, want...), nil }); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := s.UpdateACLs(ctx, func([]disbackend.ACL) ([]disbackend.ACL, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("UpdateACLs with a failing update: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ACLs(ctx); !errors.Is(err, disbackend.ErrClosed) {
		t.Fatalf("ACLs after Close: %v", err)
	}
	s = open()
	defer s.Close()
	got, err := s.ACLs(ctx)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("after reopen ACLs = %v, %v; want %v", got, err, want)
	}
}
