package localstore

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The modes of what the store creates on the OS filesystem: its data is
// its owner's only. The umask can only narrow them.
const (
	filePerm = 0o600
	dirPerm  = 0o700
)

// privateFS is vfs.Default creating every file filePerm and every directory
// dirPerm. vfs.Default creates files 0666 and Pebble asks for 0755
// directories, with no option for either: privateFS creates each new file
// itself, empty, with filePerm, then has vfs.Default open it (so the file
// keeps vfs.Default's implementation: fdatasync, sync_file_range, fadvise).
// Files and directories that already exist keep their modes, so that a
// data directory of an older version opens as it is.
type privateFS struct{ vfs.FS }

// Create is vfs.Default's Create (an existing file is removed first, not
// truncated: Pebble relies on that with hard links) with filePerm.
func (p privateFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	for {
		err := createEmpty(name)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	return p.FS.OpenReadWrite(name, category)
}

// OpenReadWrite opens name for reading and writing, creating it filePerm
// when it does not exist.
func (p privateFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	if err := createEmpty(name); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	return p.FS.OpenReadWrite(name, category, opts...)
}

// ReuseForWrite renames oldname (a file of the store's) to newname and
// opens it; the file is set to filePerm, as it is rewritten.
func (p privateFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := p.FS.ReuseForWrite(oldname, newname, category)
	if err != nil {
		return f, err
	}
	if err := os.Chmod(newname, filePerm); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// Lock is vfs.Default's Lock on a lock file created filePerm.
func (p privateFS) Lock(name string) (io.Closer, error) {
	if err := createEmpty(name); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	return p.FS.Lock(name)
}

// MkdirAll creates dir and its missing parents dirPerm, whatever perm asks.
func (p privateFS) MkdirAll(dir string, _ os.FileMode) error {
	return p.FS.MkdirAll(dir, dirPerm)
}

// Unwrap returns vfs.Default.
func (p privateFS) Unwrap() vfs.FS { return p.FS }

// createEmpty creates name, empty, with filePerm; fs.ErrExist when it
// exists.
func createEmpty(name string) error {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_CLOEXEC, filePerm)
	if err != nil {
		return err
	}
	return f.Close()
}
