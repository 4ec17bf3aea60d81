package main

import (
	"bytes"
	"context"
	"fmt"
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
