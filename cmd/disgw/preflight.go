package main

// The checks serve makes before it opens the backend, so that a start that
// cannot serve fails before it creates or opens a store: every listener's
// port is free, and the data directory is empty, new or a disgw store.

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"
	"syscall"

	"github.com/disgw/disgw/configs"
)

// checkPorts binds, then closes, every address serve will listen on: each
// Kafka listener (listeners, or listen alone) and admin_listen unless it
// is off. Port 0 (any free port) is skipped. All are bound at once, so two
// settings naming the same address fail too. The gateway and the admin
// listener bind again later: a port taken in between still fails the
// start then, only after the store was opened.
//
// Errors name the setting and, for a port in use, how to move it, e.g.
// "Kafka listener PLAINTEXT on 127.0.0.1:9092: listen tcp
// 127.0.0.1:9092: bind: address already in use (another process holds
// the port; give another with --listen or DISGW_LISTEN)".
func checkPorts(cfg configs.Config) error {
	type bindAddr struct{ what, addr, move string }
	var addrs []bindAddr
	ls, err := cfg.Listeners()
	if err != nil {
		return err // Validate has reported it already
	}
	move := "--listen or DISGW_LISTEN"
	if strings.TrimSpace(cfg.ListenersList) != "" {
		move = "listeners (DISGW_LISTENERS)"
	}
	for _, l := range ls {
		addrs = append(addrs, bindAddr{"Kafka listener " + l.Name, l.Listen, move})
	}
	if cfg.AdminListen != "" {
		addrs = append(addrs, bindAddr{"admin listener", cfg.AdminListen,
			"--admin-listen or DISGW_ADMIN_LISTEN, or turn it off with an empty one"})
	}
	var bound []net.Listener
	defer func() {
		for _, ln := range bound {
			ln.Close()
		}
	}()
	for _, a := range addrs {
		if _, port, err := net.SplitHostPort(a.addr); err == nil && port == "0" {
			continue
		}
		ln, err := net.Listen("tcp", a.addr)
		if err != nil {
			if errors.Is(err, syscall.EADDRINUSE) {
				return fmt.Errorf("%s on %s: %w (another process holds the port; give another with %s)", a.what, a.addr, err, a.move)
			}
			return fmt.Errorf("%s on %s: %w", a.what, a.addr, err)
		}
		bound = append(bound, ln)
	}
	return nil
}

// Entries of a data directory that make it the embedded store's: its Pebble
// directory and its segment directory (localstore's metaDirName and
// segmentDirName; a restart test opens a store this process made, so a
// rename there fails it).
const (
	storeMetaDir     = "meta"
	storeSegmentsDir = "segments"
)

// checkDataDir refuses a data directory that is neither missing, empty nor
// a disgw store: one that holds entries and neither meta/ nor segments/
// (a user's notes given by mistake), which the store would otherwise fill
// beside them. Hidden entries (".DS_Store", ".snapshot") and "lost+found"
// (a file system of its own) do not count. Pebble's lock file lives in
// meta/, so a directory holding only some other lock file is refused like
// any foreign file.
func checkDataDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	var foreign []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() && (name == storeMetaDir || name == storeSegmentsDir) {
			return nil
		}
		if strings.HasPrefix(name, ".") || name == "lost+found" {
			continue
		}
		foreign = append(foreign, name)
	}
	if len(foreign) == 0 {
		return nil
	}
	shown := foreign[:min(len(foreign), 3)]
	more := ""
	if len(foreign) > len(shown) {
		more = fmt.Sprintf(" and %d more", len(foreign)-len(shown))
	}
	return fmt.Errorf("data directory %s is not a disgw store: it holds %s%s and no %s/ or %s/; "+
		"give an empty or new directory with --data or DISGW_DATA", dir, strings.Join(shown, ", "), more, storeMetaDir, storeSegmentsDir)
}
