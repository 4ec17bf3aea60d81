package localstore

import (
	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing [off, off+n) of f to disk
// now (sync_file_range SYNC_FILE_RANGE_WRITE, which does not wait), so the
// disk works on a group while the next one is assembled and the fdatasync
// that acknowledges it finds less left to write. It is only a hint: the
// fdatasync before acknowledging is what makes the data durable. Files
// without a descriptor (in-memory filesystems) are skipped.
func startWriteback(f vfs.File, off, n int64) {
	if fd := f.Fd(); fd != vfs.InvalidFd {
		_ = unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WRITE)
	}
}
