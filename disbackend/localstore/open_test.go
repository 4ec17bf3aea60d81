package localstore

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// failDirFS fails what Open does to the data directory after Pebble has
// opened: MkdirAll of the segment directory, or the sync of the data
// directory that makes the new segment directory durable (Pebble's own
// syncs of it, before, succeed).
type failDirFS struct {
	vfs.FS
	dir       string // the data directory
	mkdirFail bool   // MkdirAll of dir/segments fails
	syncFail  bool   // Sync of dir fails
}

var errInjected = errors.New("injected failure")

func (fs failDirFS) MkdirAll(name string, perm os.FileMode) error {
	if fs.mkdirFail && name == fs.PathJoin(fs.dir, segmentDirName) {
		return errInjected
	}
	return fs.FS.MkdirAll(name, perm)
}

func (fs failDirFS) OpenDir(name string) (vfs.File, error) {
	f, err := fs.FS.OpenDir(name)
	if err != nil || !fs.syncFail || name != fs.dir {
		return f, err
	}
	if _, serr := fs.Stat(fs.PathJoin(fs.dir, segmentDirName)); serr != nil {
		return f, nil // Pebble's own syncs, before Open made the segment directory
	}
	return failSyncFile{f}, nil
}

type failSyncFile struct{ vfs.File }

func (failSyncFile) Sync() error { return errInjected }

// TestOpenSegmentDirectoryFailure: a failed MkdirAll of the segment
// directory, or a failed sync of the data directory that holds it, fails
// Open with the cause; it must not open a store whose segment directory
// may not survive a crash. (Open once declared its err inside the if, so
// both failures were dropped and Open succeeded.)
func TestOpenSegmentDirectoryFailure(t *testing.T) {
	for _, tc := range []struct {
		name string
		fs   failDirFS
	}{
		{"mkdir", failDirFS{mkdirFail: true}},
		{"sync", failDirFS{syncFail: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := tc.fs
			fs.FS, fs.dir = vfs.NewMem(), "db"
			s, err := Open(fs.dir, Options{FS: fs})
			if err == nil {
				_ = s.Close()
				t.Fatal("Open succeeded; want the injected failure")
			}
			if !errors.Is(err, errInjected) || !strings.Contains(err.Error(), "segment directory") {
				t.Fatalf("Open: %v; want the injected failure of the segment directory", err)
			}
		})
	}
}
