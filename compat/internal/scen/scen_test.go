package scen

import (
	"strings"
	"testing"
)

func recs(client string, po ...[2]int64) []Rec {
	var out []Rec
	for _, x := range po {
		i := int(x[1])*10 + int(x[0]) // a key per partition and offset
		hs := map[string]string{}
		for _, h := range Headers(i, client) {
			hs[h[0]] = h[1]
		}
		out = append(out, Rec{Partition: int32(x[0]), Offset: x[1], Key: Key(i), Value: Value(i), Headers: hs})
	}
	return out
}

// The checks must catch what they exist for: a resume before or after the
// committed offset, a gap, a missed record, a bad header.
func TestChecks(t *testing.T) {
	first := recs("c", [2]int64{0, 0}, [2]int64{0, 1}, [2]int64{1, 0})
	if err := CheckFirst(first, "c", true); err != nil {
		t.Fatal(err)
	}
	committed := Committed(first) // p0=2 p1=1
	good := recs("c", [2]int64{0, 2}, [2]int64{1, 1})
	if err := CheckResume(first, committed, good, 0, "c", true); err != nil {
		t.Fatalf("good resume: %v", err)
	}
	for name, tc := range map[string]struct {
		second []Rec
		want   string
	}{
		"rewind":  {recs("c", [2]int64{0, 1}, [2]int64{0, 2}), "resumed at offset 1, committed offset is 2"},
		"skip":    {recs("c", [2]int64{0, 3}), "resumed at offset 3, committed offset is 2"},
		"gap":     {recs("c", [2]int64{0, 2}, [2]int64{0, 4}), "gap or rewind"},
		"header":  {recs("other", [2]int64{0, 2}), `header "client"`},
		"missing": {recs("c", [2]int64{0, 2}), "never read"},
	} {
		k := 0
		if name == "missing" {
			k = 30 // key-0030 is never read
		}
		err := CheckResume(first, committed, tc.second, k+1, "c", true)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", name, err, tc.want)
		}
	}
	if err := CheckFirst(recs("c", [2]int64{0, 1}), "c", true); err == nil {
		t.Error("CheckFirst accepted a first consumer that did not start at offset 0")
	}
	if err := CheckCommittedAtEnd(map[int32]int64{0: 2}, map[int32]int64{0: 2, 1: 1}); err == nil {
		t.Error("CheckCommittedAtEnd accepted a partition without a commit")
	}
}
