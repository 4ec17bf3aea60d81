package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// franz-go's own integration suite against disgw:
//
//	KGO_SEEDS=<disgw> KGO_TEST_RF=1 KGO_TEST_RECORDS=50000 \
//	  go test -count=1 github.com/twmb/franz-go/pkg/kgo -skip '<known>'
//
// run inside the compat module, which requires franz-go v1.22.3. Tests listed
// in compat/kgo-known-failures.txt are skipped (and reported) unless -kgo-all.

const kgoSuiteTimeout = 12 * time.Minute

type kgoSuiteResult struct {
	Pass, Fail, Skip []string
	Known            map[string]string // test -> reason, from the file
	Unexpected       []string          // failed and not listed
	FixedKnown       []string          // listed, run (-kgo-all) and passed
	FailOutput       map[string]string
	HarnessErr       string
	Duration         time.Duration
	Command          string
	RanKnown         bool
}

func (s *kgoSuiteResult) summary() string {
	if s.HarnessErr != "" && len(s.Pass)+len(s.Fail) == 0 {
		return "did not run: " + s.HarnessErr
	}
	msg := fmt.Sprintf("%d tests passed, %d failed, %d skipped by the suite; %d known failures listed; %s",
		len(s.Pass), len(s.Fail), len(s.Skip), len(s.Known), s.Duration.Round(time.Second))
	if s.HarnessErr != "" {
		msg += "; " + s.HarnessErr
	}
	return msg
}

func loadKgoKnown(path string) (map[string]string, error) {
	m := map[string]string{}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, reason, ok := strings.Cut(line, "|")
		if !ok {
			return nil, fmt.Errorf("%s:%d: want TestName | reason", path, i+1)
		}
		m[strings.TrimSpace(name)] = strings.TrimSpace(reason)
	}
	return m, nil
}

func runKgoSuite(compatDir, knownFile, bin, backend string, records int, all bool, logDir string) *kgoSuiteResult {
	res := &kgoSuiteResult{FailOutput: map[string]string{}, RanKnown: all}
	start := time.Now()
	defer func() { res.Duration = time.Since(start) }()
	known, err := loadKgoKnown(filepath.Join(compatDir, knownFile))
	if err != nil {
		res.HarnessErr = err.Error()
		return res
	}
	res.Known = known
	p, dataDir, err := startDisgw(bin, backend, filepath.Join(logDir, "kgo-suite.disgw.log"))
	if dataDir != "" {
		defer os.RemoveAll(dataDir)
	}
	if err != nil {
		res.HarnessErr = err.Error()
		return res
	}
	defer func() {
		if problem := p.stop(); problem != "" {
			res.HarnessErr = strings.TrimPrefix(res.HarnessErr+"; "+problem, "; ")
		}
	}()
	var skip []string
	if !all {
		for t := range known {
			skip = append(skip, t)
		}
	}
	sort.Strings(skip)
	skipRe := "^(" + strings.Join(skip, "|") + ")$"
	args := []string{"test", "-count=1", "-json", "-timeout", kgoSuiteTimeout.String(), "github.com/twmb/franz-go/pkg/kgo", "-skip", skipRe}
	res.Command = fmt.Sprintf("KGO_SEEDS=<disgw> KGO_TEST_RF=1 KGO_TEST_RECORDS=%d go test %s", records, strings.Join(args[1:], " "))
	ctx, cancel := context.WithTimeout(context.Background(), kgoSuiteTimeout+2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = compatDir
	cmd.Env = append(os.Environ(), "KGO_SEEDS="+p.addr, "KGO_TEST_RF=1", "KGO_TEST_RECORDS="+strconv.Itoa(records))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	logf, err := os.Create(filepath.Join(logDir, "kgo-suite.log"))
	if err != nil {
		res.HarnessErr = err.Error()
		return res
	}
	defer logf.Close()
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		res.HarnessErr = err.Error()
		return res
	}
	if err := cmd.Start(); err != nil {
		res.HarnessErr = err.Error()
		return res
	}
	outputs := map[string]*strings.Builder{}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 4<<20), 4<<20)
	for sc.Scan() {
		var ev struct {
			Action, Test, Output string
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			fmt.Fprintln(logf, sc.Text())
			continue
		}
		if ev.Output != "" {
			logf.WriteString(ev.Output)
		}
		if ev.Test == "" {
			continue
		}
		if ev.Action == "output" {
			top, _, _ := strings.Cut(ev.Test, "/") // a subtest's output explains its parent's failure
			b := outputs[top]
			if b == nil {
				b = &strings.Builder{}
				outputs[top] = b
			}
			if b.Len() < 256<<10 {
				b.WriteString(ev.Output)
			}
		}
		if strings.Contains(ev.Test, "/") {
			continue
		}
		switch ev.Action {
		case "pass":
			res.Pass = append(res.Pass, ev.Test)
			if _, ok := known[ev.Test]; ok {
				res.FixedKnown = append(res.FixedKnown, ev.Test)
			}
		case "fail":
			res.Fail = append(res.Fail, ev.Test)
			if b := outputs[ev.Test]; b != nil {
				res.FailOutput[ev.Test] = failLines(b.String())
			}
			if _, ok := known[ev.Test]; !ok {
				res.Unexpected = append(res.Unexpected, ev.Test)
			}
		case "skip":
			res.Skip = append(res.Skip, ev.Test)
		}
	}
	err = cmd.Wait()
	if ctx.Err() != nil {
		res.HarnessErr = "go test killed after " + (kgoSuiteTimeout + 2*time.Minute).String()
	} else if err != nil && len(res.Fail) == 0 {
		res.HarnessErr = fmt.Sprintf("go test exited %v with no failed test (build failure or panic? see %s)", err, logf.Name())
	}
	sort.Strings(res.Pass)
	sort.Strings(res.Fail)
	sort.Strings(res.Skip)
	sort.Strings(res.Unexpected)
	return res
}

// failLines keeps the lines of a failed test's output that say why: the
// test's own assertions (file_test.go:N: ...) first, else anything.
func failLines(out string) string {
	var asserts, other []string
	for _, l := range strings.Split(out, "\n") {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ") {
			continue
		}
		if testLine.MatchString(t) {
			asserts = append(asserts, t)
		} else {
			other = append(other, t)
		}
	}
	keep := asserts
	if len(keep) == 0 {
		keep = other
	}
	if len(keep) > 3 {
		keep = keep[:3]
	}
	return oneLine(strings.Join(keep, " / "), 400)
}

var testLine = regexp.MustCompile(`^[\w]+_test\.go:\d+: `)
