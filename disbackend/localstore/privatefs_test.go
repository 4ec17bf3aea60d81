//go:build unix

package localstore

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/backendtest"
)

// walkModes returns the paths under root whose mode is not 0600 (files) or
// 0700 (directories), root included.
func walkModes(t *testing.T, root string) []string {
	t.Helper()
	var bad []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(filePerm)
		if fi.IsDir() {
			want = dirPerm
		}
		if fi.Mode().Perm() != want {
			bad = append(bad, path+" "+fi.Mode().String())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return bad
}

// TestFileModes opens a store on the OS filesystem with umask 0, so that
// only the modes the store asks for count, writes, seals and reopens it,
// and finds every file 0600 and every directory 0700 (Pebble's included).
// A data directory left with 0755/0644 (an older version) still opens and
// takes appends. Not parallel: the umask is the process's.
func TestFileModes(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data", "store")
	opts := Options{SegmentBytes: 2048}
	appendN := func(s *Store, n int) {
		for i := range n {
			b := backendtest.MakeBatch(backendtest.BatchOptions{NumRecords: 2, RecordBytes: 300, Seed: uint64(i)})
			if _, err := s.Append("m", int32(i%2), b).Wait(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	s := openT(t, dir, opts)
	if _, err := s.CreateStream(ctx, disbackend.StreamSpec{Name: "m", TopicName: "m", PartitionCount: 2,
		Config: disbackend.StreamConfig{Retention: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	appendN(s, 12) // several sealed segments with their index files
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openT(t, dir, opts)
	appendN(s, 2)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if bad := walkModes(t, filepath.Dir(dir)); len(bad) > 0 {
		t.Fatalf("modes other than 0600 (files) and 0700 (directories):\n%v", bad)
	}

	// An older version's data directory: group and others can read.
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.Chmod(path, 0o755)
		}
		return os.Chmod(path, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	s = openT(t, dir, opts)
	defer func() { _ = s.Close() }()
	appendN(s, 4)
	if r, _ := s.Range("m", 0); r.Next != 18 { // 9 batches of 2 records
		t.Fatalf("partition 0 range %+v after reopening the old modes, want next 18", r)
	}
}
