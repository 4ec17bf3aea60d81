//go:build !linux

package localstore

import "github.com/cockroachdb/pebble/v2/vfs"

// startWriteback is a no-op where sync_file_range does not exist.
func startWriteback(vfs.File, int64, int64) {}

// canWritev is false where writevAll is not implemented.
const canWritev = false

func writevAll(int, [][]byte) (int64, error) { panic("localstore: writev not available") }

// fallocate is not used here: the ballast is written with zeros.
func fallocate(vfs.File, int64) bool { return false }

// cutBack cannot cut a file back here; ok is false.
func cutBack(vfs.File, int64) (ok bool, err error) { return false, nil }
