package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// dbzRec is a Debezium change event (JSON without schemas) of key id, or
// its tombstone when op is 0.
func dbzRec(id int, op byte, v int, lsn int64) *kgo.Record {
	r := &kgo.Record{Key: []byte(fmt.Sprintf(`{"id":%d}`, id))}
	if op == 0 {
		return r
	}
	after := "null"
	if op != 'd' {
		after = fmt.Sprintf(`{"id":%d,"v":%d,"pad":"x"}`, id, v)
	}
	r.Value = []byte(fmt.Sprintf(`{"before":null,"after":%s,"source":{"lsn":%d,"txId":%d},"op":"%c"}`, after, lsn, 700+lsn, op))
	return r
}

// TestDebeziumCheck: the row's check passes a topic with every change in
// order and duplicates of the same source.lsn (counting them), and fails
// one with a change lost, reordered, duplicated at another LSN, a delete
// without its tombstone, or a view that differs from the table.
func TestDebeziumCheck(t *testing.T) {
	m := newDbzModel(3) // ids 1..3 (hot: never deleted), snapshot r0
	m.want[2] = append(m.want[2], dbzEvent{'u', 1}, dbzEvent{'u', 2})
	m.v[2] = 2
	m.want[4] = []dbzEvent{{'c', 0}, {'d', -1}}
	table := map[int]int{1: 0, 2: 2, 3: 0}
	good := func() []*kgo.Record {
		return []*kgo.Record{dbzRec(1, 'r', 0, 10), dbzRec(2, 'r', 0, 10), dbzRec(3, 'r', 0, 10),
			dbzRec(2, 'u', 1, 20), dbzRec(4, 'c', 0, 21), dbzRec(2, 'u', 2, 22), dbzRec(4, 'd', 0, 23), dbzRec(4, 0, 0, 0)}
	}
	run := func(recs []*kgo.Record, table map[int]int) (dbzStats, error) {
		r := &dbzReader{recs: map[int32][]*kgo.Record{0: recs}}
		for i, rec := range recs {
			rec.Offset = int64(i)
		}
		return r.check(m, table)
	}
	if st, err := run(good(), table); err != nil || st.duplicates != 0 || st.events != 7 || st.tombstones != 1 {
		t.Fatalf("every change once: %+v, %v", st, err)
	}
	// Connect resends from its last offset commit: u1, c, u2 again.
	replay := append(good()[:6], dbzRec(2, 'u', 1, 20), dbzRec(4, 'c', 0, 21), dbzRec(2, 'u', 2, 22), dbzRec(4, 'd', 0, 23), dbzRec(4, 0, 0, 0))
	if st, err := run(replay, table); err != nil || st.duplicates != 3 {
		t.Fatalf("a replay: %+v, %v", st, err)
	}
	bad := map[string]struct {
		recs  []*kgo.Record
		table map[int]int
		want  string
	}{
		"lost":           {append(good()[:3:3], good()[4:]...), table, "key 2"},
		"reordered":      {[]*kgo.Record{good()[0], good()[1], good()[2], good()[5], good()[4], good()[3], good()[6], good()[7]}, table, "key 2"},
		"twice, new lsn": {append(good(), dbzRec(2, 'u', 2, 30)), table, "key 2"},
		"no tombstone":   {good()[:7], table, "tombstone"},
		"table differs":  {good(), map[int]int{1: 0, 2: 1, 3: 0}, "row 2"},
	}
	for name, c := range bad {
		if _, err := run(c.recs, c.table); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", name, err, c.want)
		}
	}
}
