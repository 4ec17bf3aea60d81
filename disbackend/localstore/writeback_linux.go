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

// canWritev: files with a descriptor are written with writev.
const canWritev = true

// writevAll writes every byte of iovs at fd's current offset, with as few
// writev calls as IOV_MAX allows, continuing after short writes.
func writevAll(fd int, iovs [][]byte) error {
	const iovMax = 1024
	for len(iovs) > 0 {
		chunk := iovs[:min(len(iovs), iovMax)]
		n, err := unix.Writev(fd, chunk)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			return err
		}
		// Drop what was written; keep the rest of a partly written slice.
		for n > 0 && len(iovs) > 0 {
			if n >= len(iovs[0]) {
				n -= len(iovs[0])
				iovs = iovs[1:]
				continue
			}
			iovs[0] = iovs[0][n:]
			n = 0
		}
		for len(iovs) > 0 && len(iovs[0]) == 0 {
			iovs = iovs[1:]
		}
	}
	return nil
}
