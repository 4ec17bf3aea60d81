package localstore

import (
	"context"
	"errors"
	"testing"

	"github.com/disgw/disgw/disbackend"
)

// TestScramCredentials: put, replace, list, delete, and the credentials
// surviving a reopen.
func TestScramCredentials(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	c256 := disbackend.ScramCredential{Mechanism: disbackend.ScramSHA256, Salt: []byte("salt"), Iterations: 4096, StoredKey: []byte("sk"), ServerKey: []byte("vk")}
	c512 := c256
	c512.Mechanism, c512.Iterations = disbackend.ScramSHA512, 8192
	for _, c := range []disbackend.ScramCredential{c256, c512, c512} {
		if err := s.PutScramCredential(ctx, "bob", c); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutScramCredential(ctx, "carol", c256); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.ScramCredentials(ctx, "bob"); len(got) != 2 {
		t.Fatalf("bob: %+v, want 2 credentials", got)
	}
	if err := s.DeleteScramCredential(ctx, "carol", disbackend.ScramSHA512); !errors.Is(err, disbackend.ErrCredentialNotFound) {
		t.Fatalf("delete missing: %v", err)
	}
	if err := s.DeleteScramCredential(ctx, "carol", disbackend.ScramSHA256); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openT(t, dir, Options{})
	defer s.Close()
	all, err := s.ListScramCredentials(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || len(all["bob"]) != 2 {
		t.Fatalf("after reopen: %+v", all)
	}
	for _, c := range all["bob"] {
		if c.Mechanism == disbackend.ScramSHA512 && c.Iterations != 8192 {
			t.Errorf("SHA-512 credential %+v", c)
		}
	}
	if got, _ := s.ScramCredentials(ctx, "nobody"); got != nil {
		t.Errorf("unknown user: %+v", got)
	}
}
