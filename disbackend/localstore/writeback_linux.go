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
// writev calls as IOV_MAX allows, continuing after short writes. It
// returns the bytes written (all of them, or those before the error).
func writevAll(fd int, iovs [][]byte) (written int64, err error) {
	const iovMax = 1024
	for len(iovs) > 0 {
		chunk := iovs[:min(len(iovs), iovMax)]
		n, err := unix.Writev(fd, chunk)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			return written, err
		}
		written += int64(n)
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
	return written, nil
}

// fallocate allocates n bytes to f, an empty file, where it has a
// descriptor (the ballast: its blocks are taken, not a sparse file), and
// reports whether it did.
func fallocate(f vfs.File, n int64) bool {
	fd := f.Fd()
	return fd != vfs.InvalidFd && unix.Fallocate(int(fd), 0, 0, n) == nil
}

// cutBack truncates f to size and puts its write offset there (a segment
// whose write failed for lack of space, taken back). ok is false when f
// has no descriptor (then nothing was done).
func cutBack(f vfs.File, size int64) (ok bool, err error) {
	fd := f.Fd()
	if fd == vfs.InvalidFd {
		return false, nil
	}
	if err := unix.Ftruncate(int(fd), size); err != nil {
		return true, err
	}
	_, err = unix.Seek(int(fd), size, 0)
	return true, err
}
