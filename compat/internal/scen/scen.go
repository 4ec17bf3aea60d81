// Package scen holds what every client scenario of the compatibility harness
// shares: the records it produces, the checks it makes, and the way it
// reports a step to the driver.
//
// A scenario is a process that prints one line per step on stdout:
//
//	##STEP {"step":"produce","status":"pass","detail":"1000 records acknowledged"}
//
// status is pass, fail, skip (not run because an earlier step failed) or na
// (the client has no such feature). It may also print
//
//	##INFO {"key":"version","value":"sarama v1.61.1"}
//
// The Python and Node scenarios print the same lines.
package scen

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// The scenario's sizes.
const (
	N          = 1000 // records produced
	Half       = 500  // records the first group consumer processes and commits
	Partitions = 3    // partitions of the topic created through the admin API
	More       = 100  // records produced before the resume of CLI consumers
)

// Step names, in the matrix's order.
const (
	StepCreate   = "create"
	StepProduce  = "produce"
	StepConsume  = "consume"
	StepResume   = "resume"
	StepDescribe = "describe"
)

// CoreSteps are the matrix's columns.
var CoreSteps = []string{StepCreate, StepProduce, StepConsume, StepResume, StepDescribe}

// Key and Value of record i.
func Key(i int) string   { return fmt.Sprintf("key-%04d", i) }
func Value(i int) string { return fmt.Sprintf("value-%04d", i) }

// Index parses the i of Key(i).
func Index(key string) (int, error) {
	s, ok := strings.CutPrefix(key, "key-")
	if !ok {
		return 0, fmt.Errorf("key %q is not key-NNNN", key)
	}
	return strconv.Atoi(s)
}

// Headers of record i produced by client.
func Headers(i int, client string) [][2]string {
	return [][2]string{{"idx", strconv.Itoa(i)}, {"client", client}}
}

var mu sync.Mutex

func emit(kind string, v any) {
	b, _ := json.Marshal(v)
	mu.Lock()
	defer mu.Unlock()
	fmt.Fprintf(os.Stdout, "%s %s\n", kind, b)
}

// Report prints one step's outcome.
func Report(step, status, detail string) {
	emit("##STEP", map[string]string{"step": step, "status": status, "detail": detail})
}

// Info prints a fact about the client (its version, say).
func Info(key, value string) { emit("##INFO", map[string]string{"key": key, "value": value}) }

// Run runs one step and reports pass (err nil) or fail with the error as the
// failing assertion. It returns whether the step passed.
func Run(step string, fn func() (string, error)) bool {
	detail, err := safe(fn)
	if err != nil {
		Report(step, "fail", err.Error())
		return false
	}
	Report(step, "pass", detail)
	return true
}

func safe(fn func() (string, error)) (detail string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return fn()
}

// NA reports a step the client has no API for.
func NA(step, why string) { Report(step, "na", why) }

// Skip reports a step not run because of an earlier failure.
func Skip(step, why string) { Report(step, "skip", why) }

// Rec is a consumed record.
type Rec struct {
	Partition int32
	Offset    int64
	Key       string
	Value     string
	Headers   map[string]string // nil: the client gave no headers
}

// ClientHeaderOnly: the producer sent only the constant header client
// (kcat -H applies one set of headers to every record of a run).
var ClientHeaderOnly bool

// Check verifies a record's contents: value and headers match its key.
// wantHeaders: the producing client sent headers idx and client.
func Check(r Rec, client string, wantHeaders bool) error {
	i, err := Index(r.Key)
	if err != nil {
		return fmt.Errorf("p%d@%d: %v", r.Partition, r.Offset, err)
	}
	if r.Value != Value(i) {
		return fmt.Errorf("p%d@%d: key %s has value %q, want %q", r.Partition, r.Offset, r.Key, r.Value, Value(i))
	}
	if !wantHeaders {
		return nil
	}
	for _, h := range Headers(i, client) {
		if ClientHeaderOnly && h[0] != "client" {
			continue
		}
		if got, ok := r.Headers[h[0]]; !ok || got != h[1] {
			return fmt.Errorf("p%d@%d: key %s header %q = %q (present %v), want %q; headers %v",
				r.Partition, r.Offset, r.Key, h[0], got, ok, h[1], r.Headers)
		}
	}
	return nil
}

// CheckFirst verifies what the first group consumer processed: every record
// well formed, no key twice, and in each partition the offsets 0, 1, 2, ...
// without a gap (it started at the earliest offset).
func CheckFirst(recs []Rec, client string, wantHeaders bool) error {
	seen := map[string]bool{}
	next := map[int32]int64{}
	for _, r := range recs {
		if err := Check(r, client, wantHeaders); err != nil {
			return err
		}
		if seen[r.Key] {
			return fmt.Errorf("key %s consumed twice (p%d@%d)", r.Key, r.Partition, r.Offset)
		}
		seen[r.Key] = true
		if r.Offset != next[r.Partition] {
			return fmt.Errorf("partition %d: consumed offset %d, want %d (the group started at the earliest offset)", r.Partition, r.Offset, next[r.Partition])
		}
		next[r.Partition] = r.Offset + 1
	}
	return nil
}

// Committed is what committing recs commits: per partition the last offset
// processed plus one.
func Committed(recs []Rec) map[int32]int64 {
	c := map[int32]int64{}
	for _, r := range recs {
		if r.Offset+1 > c[r.Partition] {
			c[r.Partition] = r.Offset + 1
		}
	}
	return c
}

// CheckResume verifies that the second consumer of the group started exactly
// at the committed offsets: in each partition its first record is at the
// committed offset (0 where nothing was committed), its offsets have no gap,
// it read no key the first consumer processed, and both together read every
// one of the n records (keys 0..n-1).
func CheckResume(first []Rec, committed map[int32]int64, second []Rec, n int, client string, wantHeaders bool) error {
	seen := map[string]bool{}
	for _, r := range first {
		seen[r.Key] = true
	}
	next := map[int32]int64{}
	started := map[int32]bool{}
	for _, r := range second {
		if err := Check(r, client, wantHeaders); err != nil {
			return err
		}
		if !started[r.Partition] {
			started[r.Partition] = true
			if r.Offset != committed[r.Partition] {
				return fmt.Errorf("partition %d: resumed at offset %d, committed offset is %d", r.Partition, r.Offset, committed[r.Partition])
			}
		} else if r.Offset != next[r.Partition] {
			return fmt.Errorf("partition %d: offset %d after %d (gap or rewind)", r.Partition, r.Offset, next[r.Partition]-1)
		}
		next[r.Partition] = r.Offset + 1
		if seen[r.Key] {
			return fmt.Errorf("key %s (p%d@%d) read again after it was committed", r.Key, r.Partition, r.Offset)
		}
		seen[r.Key] = true
	}
	var missing []int
	for i := 0; i < n; i++ {
		if !seen[Key(i)] {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%d of %d records never read by either consumer (first missing: %s)", len(missing), n, Key(missing[0]))
	}
	return nil
}

// Covers reports whether first and second together hold all n keys.
func Covers(first, second []Rec, n int) bool {
	seen := map[string]bool{}
	for _, r := range first {
		seen[r.Key] = true
	}
	for _, r := range second {
		seen[r.Key] = true
	}
	return len(seen) >= n
}

// CheckCommittedAtEnd verifies that the group's committed offsets equal the
// partitions' end offsets (everything was read and committed).
func CheckCommittedAtEnd(committed, ends map[int32]int64) error {
	var ps []int
	for p := range ends {
		ps = append(ps, int(p))
	}
	sort.Ints(ps)
	if len(ps) == 0 {
		return fmt.Errorf("no end offsets")
	}
	for _, p := range ps {
		c, ok := committed[int32(p)]
		if !ok {
			return fmt.Errorf("partition %d: no committed offset, end offset %d", p, ends[int32(p)])
		}
		if c != ends[int32(p)] {
			return fmt.Errorf("partition %d: committed offset %d, end offset %d", p, c, ends[int32(p)])
		}
	}
	return nil
}

// FmtOffsets prints a partition-to-offset map in partition order.
func FmtOffsets(m map[int32]int64) string {
	var ps []int
	for p := range m {
		ps = append(ps, int(p))
	}
	sort.Ints(ps)
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "p%d=%d", p, m[int32(p)])
	}
	return b.String()
}
