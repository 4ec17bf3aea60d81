package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/disgw/disgw/compat/internal/scen"
)

// librdkafka's own test programs about transactions, built by compat/setup
// (compat/librdkafka/build) from Debian bookworm's librdkafka source package
// (2.0.2, the librdkafka of Debian's kcat and python3-confluent-kafka) into
// TOOLS/librdkafka-tests, run unchanged against the disgw the driver started
// (tests/README.md of librdkafka: test.conf with bootstrap.servers, TESTS=N
// ./test-runner). One step per test program, each a test-runner process of
// its own, the three at once:
//
//   - 0103-transactions: 0103_transactions_local (no broker: misuse and
//     timeouts) and 0103_transactions: misuse, basic commit and abort with
//     and without compression, consume-transform-produce with
//     send_offsets_to_transaction over 10 transactions, fencing by a second
//     producer (with and without a produce after the fence), the KIP-360
//     recovery from UNKNOWN_PRODUCER_ID after DeleteRecords, empty
//     transactions (with and without offsets, committed and aborted), and
//     the high watermark seen by read_committed and read_uncommitted.
//   - 0129-fetch_aborted_msgs: 1,000 aborted records of 1,000 bytes in a topic
//     with max.message.bytes 10000: a read_committed consumer reaches the
//     end without an error (librdkafka #2993).
//   - 0098-consumer-txn: seven consumer-side cases (commit and abort
//     interleaved with non-transactional records, several producers, a
//     transaction left open, ...) written once by librdkafka's Java helper
//     TransactionProducerCli (on the Kafka 4.4.0 client jar, through a
//     stand-in for Kafka's bin/kafka-run-class.sh) and once by librdkafka,
//     each read back with read_committed and checked record by record. On
//     the DIS backend it runs in librdkafka's quick mode (-Q: cases 5 and 6
//     only), which keeps both matrices within their time.
//
// TEST_KAFKA_VERSION is 4.4.0 (the tests gate on the broker's version: below
// 2.5 the KIP-360 case expects a fatal error). A step passes when the
// test-runner exits 0 and its report (TEST_REPORT) has every test of the
// program PASSED; a SKIPPED test fails the step (it tested nothing).
var rdkafkaTestsExtra = func() []string {
	var s []string
	for _, t := range rdkafkaTests {
		s = append(s, t.step)
	}
	return s
}()

type rdkafkaTest struct {
	step  string   // the matrix's column
	num   string   // TESTS=
	names []string // the tests of the program in the report
	// quickOn: backends on which the program runs in quick mode (-Q).
	quickOn []string
}

var rdkafkaTests = []rdkafkaTest{
	{step: "0103-transactions", num: "0103", names: []string{"0103_transactions_local", "0103_transactions"}},
	{step: "0129-fetch_aborted_msgs", num: "0129", names: []string{"0129_fetch_aborted_msgs"}},
	{step: "0098-consumer-txn", num: "0098", names: []string{"0098_consumer_txn"}, quickOn: []string{"dis"}},
}

// rdkafkaTestsDir is where compat/librdkafka/build leaves the built source
// tree, under the tools directory.
const rdkafkaTestsDir = "librdkafka-tests"

// rdkafkaTestTimeout bounds one test-runner process (0098 in full takes
// about 2.5 minutes here; the programs' own timeouts are shorter).
const rdkafkaTestTimeout = 5 * time.Minute

// rdkafkaTestsTimeout is the scenario's time limit.
const rdkafkaTestsTimeout = rdkafkaTestTimeout + time.Minute

func runRdkafkaTests(broker, backend, tools string) {
	for _, s := range scen.CoreSteps {
		scen.NA(s, "librdkafka's test programs report their own steps")
	}
	src := filepath.Join(tools, rdkafkaTestsDir)
	runner := filepath.Join(src, "tests", "test-runner")
	failAll := func(why string) {
		for _, t := range rdkafkaTests {
			scen.Report(t.step, "fail", why)
		}
	}
	if _, err := os.Stat(runner); err != nil {
		failAll(fmt.Sprintf("%s missing (run compat/setup)", runner))
		return
	}
	if v, err := os.ReadFile(filepath.Join(src, "VERSION")); err == nil {
		scen.Info("version", strings.TrimSpace(string(v)))
	}
	scen.Info("java", javaVersion(context.Background()))
	dir, err := os.MkdirTemp("", "disgw-compat-librdkafka-")
	if err != nil {
		failAll(err.Error())
		return
	}
	fmt.Fprintln(os.Stderr, "logs:", dir)
	kafkaPath, err := rdkafkaKafkaPath(dir, filepath.Join(tools, "kafka-4.4.0"))
	if err != nil {
		failAll(err.Error())
		return
	}
	var wg sync.WaitGroup
	failed := false
	var mu sync.Mutex
	for _, t := range rdkafkaTests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok := scen.Run(t.step, func() (string, error) {
				detail, err := runRdkafkaTest(t, src, dir, kafkaPath, broker, backend, "")
				if err == nil {
					return detail, nil
				}
				f, ok := rdkafkaTimingFailure(err.Error())
				if !ok {
					return "", err
				}
				// One more run for a failure that is the test's timing
				// assumption; a second failure of any kind fails the step.
				detail, err2 := runRdkafkaTest(t, src, dir, kafkaPath, broker, backend, "-again")
				if err2 != nil {
					return "", fmt.Errorf("%v; run again: %v", err, err2)
				}
				return fmt.Sprintf("%s; passed on a second run (the first failed at %s: %s)", detail, f.at, f.why), nil
			})
			mu.Lock()
			failed = failed || !ok
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, t := range rdkafkaTests {
		// The programs' output, one after the other, into the client's log.
		for _, again := range []string{"", "-again"} {
			if b, err := os.ReadFile(filepath.Join(dir, t.num+again+".log")); err == nil {
				fmt.Fprintf(os.Stderr, "==== %s%s (test-runner output)\n%s\n", t.step, again, ansi.ReplaceAllString(string(b), ""))
			}
		}
	}
	if !failed {
		_ = os.RemoveAll(dir)
	}
}

// rdkafkaTiming is an assertion of librdkafka's tests that holds only when
// the broker is slower than the test assumes.
type rdkafkaTiming struct {
	at  string // the "failed at" location test.c prints
	why string
}

// rdkafkaTimings are the assertions a step fails on by timing alone; a
// step that fails on one runs once more (and fails if that run fails too).
var rdkafkaTimings = []rdkafkaTiming{{
	at: "0103-transactions.c:601:do_test_misuse_txn()",
	why: "\"timeout on first\" gives init_transactions() 1 ms and expects it to time out, " +
		"but a new producer can connect, find its coordinator and get its producer id " +
		"from disgw on the local store in about that time (the 30 s call before it took " +
		"1.9 ms in the run that failed); Apache Kafka takes longer, as it writes the " +
		"transaction log first",
}}

// rdkafkaFailedAt matches the location in test.c's "### Test ... failed at
// FILE:LINE:FUNC() at DATE ###" lines.
var rdkafkaFailedAt = regexp.MustCompile(`failed at (\S+) at `)

// rdkafkaTimingFailure reports whether a step's failure (the error
// runRdkafkaTest returned) is one of rdkafkaTimings and nothing else: every
// "failed at" is that assertion or test.c's own (the <MAIN> test failing
// because a test did).
func rdkafkaTimingFailure(err string) (rdkafkaTiming, bool) {
	for _, f := range rdkafkaTimings {
		found := false
		other := false
		for _, m := range rdkafkaFailedAt.FindAllStringSubmatch(err, -1) {
			switch {
			case m[1] == f.at:
				found = true
			case !strings.HasPrefix(m[1], "test.c:"):
				other = true
			}
		}
		if found && !other {
			return f, true
		}
	}
	return rdkafkaTiming{}, false
}

// ansi matches the terminal colour codes of test-runner's output.
var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// rdkafkaSubPass matches a sub-test's PASS line ("[ do_test_empty_txn:953:
// send offsets, commit: PASS (4.02s) ]").
var rdkafkaSubPass = regexp.MustCompile(`\[ (do_test_\w+|\w+):\d+: (.*?)PASS \(`)

// rdkafkaKafkaPath makes the KAFKA_PATH test.c's test_run_java needs: it
// runs $KAFKA_PATH/bin/kafka-run-class.sh with CLASSPATH the tests' java
// directory. The stand-in runs java over the Kafka 4.4.0 jars.
func rdkafkaKafkaPath(dir, jars string) (string, error) {
	if _, err := os.Stat(jars); err != nil {
		return "", fmt.Errorf("%s missing (run compat/setup)", jars)
	}
	kp := filepath.Join(dir, "kafka")
	if err := os.MkdirAll(filepath.Join(kp, "bin"), 0o755); err != nil {
		return "", err
	}
	if err := os.Symlink(jars, filepath.Join(kp, "libs")); err != nil {
		return "", err
	}
	script := "#!/bin/sh\n# stand-in for Kafka's bin/kafka-run-class.sh (compat librdkafka-txn-tests)\n" +
		"exec java -cp \"$CLASSPATH:" + jars + "/*\" \"$@\"\n"
	return kp, os.WriteFile(filepath.Join(kp, "bin", "kafka-run-class.sh"), []byte(script), 0o755)
}

// runRdkafkaTest runs one test program in a directory of its own (test.conf,
// the stats files it writes; java links to the built classes, and a
// Makefile whose java target does nothing, as test_run_java runs `make -s
// java` first).
//
// again names a later run of the same program ("" the first): its run
// directory and log are run-NUM+again and NUM+again.log.
func runRdkafkaTest(t rdkafkaTest, src, dir, kafkaPath, broker, backend, again string) (string, error) {
	run := filepath.Join(dir, "run-"+t.num+again)
	if err := os.MkdirAll(run, 0o755); err != nil {
		return "", err
	}
	if err := os.Symlink(filepath.Join(src, "tests", "java"), filepath.Join(run, "java")); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(run, "Makefile"), []byte("java:\n\t@true\n"), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(run, "test.conf"), []byte("bootstrap.servers="+broker+"\n"), 0o644); err != nil {
		return "", err
	}
	logPath := filepath.Join(dir, t.num+again+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return "", err
	}
	defer logf.Close()
	report := filepath.Join(run, "report.json")
	args := []string{"-p1"}
	quick := false
	for _, b := range t.quickOn {
		quick = quick || b == backend
	}
	if quick {
		args = append(args, "-Q")
	}
	ctx, cancel := context.WithTimeout(context.Background(), rdkafkaTestTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(src, "tests", "test-runner"), args...)
	cmd.Dir = run
	cmd.Env = append(os.Environ(),
		"LD_LIBRARY_PATH="+filepath.Join(src, "src")+":"+filepath.Join(src, "src-cpp"),
		"KAFKA_PATH="+kafkaPath, "TESTS="+t.num, "TEST_KAFKA_VERSION=4.4.0", "TEST_REPORT="+report)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the Java helper too
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	runErr := cmd.Run()
	took := time.Since(start)
	out, _ := os.ReadFile(logPath)
	text := ansi.ReplaceAllString(string(out), "")
	states, repErr := rdkafkaReport(report)
	var bad []string
	for _, n := range t.names {
		if st := states[n]; st != "PASSED" {
			bad = append(bad, fmt.Sprintf("%s %s", n, strings.ToLower(cmp.Or(st, "not reported"))))
		}
	}
	mode := ""
	if quick {
		mode = " (quick mode, -Q)"
	}
	if ctx.Err() == context.DeadlineExceeded || runErr != nil || repErr != nil || len(bad) > 0 {
		why := []string{}
		switch {
		case ctx.Err() == context.DeadlineExceeded:
			why = append(why, fmt.Sprintf("test-runner timed out after %s", rdkafkaTestTimeout))
		case runErr != nil && strings.Contains(runErr.Error(), "signal: killed"):
			// test.c's check_test_timeouts SIGKILLs the process when a
			// test overruns its own timeout.
			why = append(why, "test-runner killed itself (a test timed out)")
		case runErr != nil:
			why = append(why, fmt.Sprintf("test-runner: %v", runErr))
		}
		if repErr != nil {
			why = append(why, repErr.Error())
		}
		why = append(why, bad...)
		return "", fmt.Errorf("%s%s; %s (log %s)", strings.Join(why, "; "), mode, rdkafkaFailures(text), logPath)
	}
	var subs []string
	for _, m := range rdkafkaSubPass.FindAllStringSubmatch(text, -1) {
		s := strings.TrimPrefix(m[1], "do_test_")
		if d := strings.TrimSuffix(strings.TrimSpace(m[2]), ":"); d != "" {
			s += " (" + d + ")"
		}
		subs = append(subs, s)
	}
	detail := fmt.Sprintf("%s passed%s in %.0fs", strings.Join(t.names, ", "), mode, took.Seconds())
	if len(subs) > 0 {
		detail += fmt.Sprintf("; %d sub-tests: %s", len(subs), strings.Join(subs, "; "))
	}
	return detail, nil
}

// rdkafkaReport reads test-runner's TEST_REPORT file: each test's state
// (PASSED, FAILED, SKIPPED, ...).
func rdkafkaReport(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("no report: %v", err)
	}
	var rep struct {
		Tests map[string]struct{ State string } `json:"tests"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("report %s: %v", path, err)
	}
	states := map[string]string{}
	for n, t := range rep.Tests {
		states[n] = t.State
	}
	return states, nil
}

// rdkafkaFailures picks the lines of a test-runner log that say what failed
// (its "### Test ... failed at ... ###" lines, failed sub-tests and
// assertions), at most a few.
func rdkafkaFailures(text string) string {
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if strings.Contains(l, "FAIL") || strings.Contains(l, "failed at") || strings.Contains(l, "Assertion") {
			if !strings.Contains(l, "ALL-TESTS") && !strings.Contains(l, "|") {
				lines = append(lines, l)
			}
		}
		if len(lines) >= 6 {
			break
		}
	}
	if len(lines) == 0 {
		return "no failure line in its output"
	}
	return strings.Join(lines, " | ")
}
