package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// runCmd runs a command with stdin, returning stdout, and an error carrying
// the exit status and the tail of stderr.
func runCmd(ctx context.Context, timeout time.Duration, stdin string, name string, args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = 5 * time.Second
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() == context.DeadlineExceeded {
		err = fmt.Errorf("timed out after %s", timeout)
	}
	if err != nil {
		err = fmt.Errorf("%s %s: %v; stderr: %s", shortName(name), shortArgs(args), err, tail(errb.String(), 600))
	}
	return out.String(), errb.String(), err
}

func shortName(n string) string {
	if i := strings.LastIndex(n, "/"); i >= 0 {
		return n[i+1:]
	}
	return n
}

func shortArgs(a []string) string {
	s := strings.Join(a, " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// tail returns the last n bytes of s, on one line.
func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	return strings.ReplaceAll(s, "\n", " | ")
}

// startLogged starts cmd with its stdout and stderr into logf, which it
// closes once cmd has ended (or failed to start). The channel gets cmd's
// Wait result.
func startLogged(cmd *exec.Cmd, logf *os.File) (chan error, error) {
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); logf.Close() }()
	return done, nil
}

// errorLines returns the lines of a Java program's log that say ERROR or
// contain exception (e.g. "Exception" or "Exception:").
func errorLines(log []byte, exception string) []string {
	var errs []string
	for _, l := range strings.Split(string(log), "\n") {
		if strings.Contains(l, "ERROR") || strings.Contains(l, exception) {
			errs = append(errs, l)
		}
	}
	return errs
}
