package localstore

import (
	"context"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap/zaptest"

	"github.com/disgw/disgw/disbackend"
)

// TestGroupState: GroupState reads one group's latest saved state (nil
// when none or deleted), also after a reopen; after Close it fails with
// ErrClosed.
func TestGroupState(t *testing.T) {
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
	if st, err := s.GroupState(ctx, "g"); err != nil || st != nil {
		t.Fatalf("state of an unknown group: %q, %v", st, err)
	}
	for _, v := range []string{"a", "b"} {
		if err := s.SaveGroupState(ctx, "g", []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SaveGroupState(ctx, "g2", []byte("c")); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveGroupState(ctx, "g2", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GroupState(ctx, "g"); !errors.Is(err, disbackend.ErrClosed) {
		t.Fatalf("GroupState after Close: %v", err)
	}
	s = open()
	defer s.Close()
	if st, err := s.GroupState(ctx, "g"); err != nil || string(st) != "b" {
		t.Fatalf("state of g after a reopen: %q, %v; want b", st, err)
	}
	if st, err := s.GroupState(ctx, "g2"); err != nil || st != nil {
		t.Fatalf("state of a deleted group: %q, %v; want none", st, err)
	}
}
