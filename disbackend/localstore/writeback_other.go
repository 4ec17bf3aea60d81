//go:build !linux

package localstore

import "github.com/cockroachdb/pebble/v2/vfs"

// startWriteback is a no-op where sync_file_range does not exist.
func startWriteback(vfs.File, int64, int64) {}

// canWritev is false where writevAll is not implemented.
const canWritev = false

func writevAll(int, [][]byte) error { panic("localstore: writev not available") }
