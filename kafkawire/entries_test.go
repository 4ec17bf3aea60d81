package kafkawire

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fillEntries fills every array of the struct v with per(depth) entries of
// the smallest encoding (zero values, empty strings), recursively: the
// worst case of a request's memory per byte.
func fillEntries(v reflect.Value, per func(depth int) int, depth int) {
	for i := range v.NumField() {
		f := v.Field(i)
		if !f.CanSet() {
			continue
		}
		switch f.Kind() {
		case reflect.Slice:
			if f.Type().Elem().Kind() == reflect.Uint8 {
				// Bytes (record batches): as short as a batch header, the
				// least a produce partition may carry in bulk.
				f.SetBytes(make([]byte, 61))
				continue
			}
			n := per(depth)
			s := reflect.MakeSlice(f.Type(), n, n)
			for j := range n {
				e := s.Index(j)
				if e.Kind() == reflect.Struct {
					if d := e.Addr().MethodByName("Default"); d.IsValid() {
						d.Call(nil)
					}
					fillEntries(e, per, depth+1)
				}
			}
			f.Set(s)
		case reflect.Pointer:
			if f.Type().Elem().Kind() == reflect.String {
				f.Set(reflect.ValueOf(new(string)))
			}
		}
	}
}

// countEntries counts the array entries of a decoded request, as
// peekEntries counts them on the wire.
func countEntries(v reflect.Value) int {
	n := 0
	for i := range v.NumField() {
		f := v.Field(i)
		if f.Kind() != reflect.Slice || f.Type().Elem().Kind() == reflect.Uint8 {
			continue
		}
		n += f.Len()
		if f.Type().Elem().Kind() == reflect.Struct {
			for j := range f.Len() {
				n += countEntries(f.Index(j))
			}
		}
	}
	return n
}

// worstShapes are the request shapes measured: many entries at the top
// level, and a few at every level (nested arrays of minimal entries).
var worstShapes = []struct {
	name string
	per  func(depth int) int
}{
	{"top", func(d int) int { return map[bool]int{true: 4000, false: 0}[d == 0] }},
	{"nested", func(d int) int { return map[bool]int{true: 40, false: 0}[d < 3] }},
	{"deep", func(d int) int { return map[bool]int{true: 12, false: 1}[d < 3] }},
}

// worstFrame returns a frame of key at version in a shape, or nil if kmsg
// cannot encode that request filled with minimal entries.
func worstFrame(key, version int16, per func(int) int) (frame []byte) {
	req := kmsg.RequestForKey(key)
	if req == nil || version > req.MaxVersion() {
		return nil
	}
	req.SetVersion(version)
	fillEntries(reflect.ValueOf(req).Elem(), per, 0)
	defer func() {
		if recover() != nil {
			frame = nil
		}
	}()
	return encodeRequest(key, version, 1, req)
}

// TestPeekEntriesCountsWhatKmsgDecodes: for every request type peekEntries
// walks, at every version kmsg knows, in each worst shape, the walk counts
// exactly the entries kmsg decodes (so the walk reads the wire as kmsg
// does and refuses nothing valid below the ceiling).
func TestPeekEntriesCountsWhatKmsgDecodes(t *testing.T) {
	for key := range peekers {
		req := kmsg.RequestForKey(key)
		counted := false
		for v := int16(0); v <= req.MaxVersion(); v++ {
			for _, sh := range worstShapes {
				frame := worstFrame(key, v, sh.per)
				if frame == nil {
					t.Errorf("%s v%d %s: cannot encode", kmsg.NameForKey(key), v, sh.name)
					continue
				}
				r, err := ParseRequest(frame)
				if err != nil {
					t.Fatalf("%s v%d %s: %v", kmsg.NameForKey(key), v, sh.name, err)
				}
				want := countEntries(reflect.ValueOf(r.Body).Elem())
				got, _ := peekEntries(key, v, r.Body.IsFlexible(), frame[len(frame)-bodyLen(frame):])
				if got != want {
					t.Errorf("%s v%d %s: peekEntries counts %d entries, kmsg decodes %d", kmsg.NameForKey(key), v, sh.name, got, want)
				}
				counted = counted || want > 0
			}
		}
		if !counted {
			t.Errorf("%s: no version has entries to count", kmsg.NameForKey(key))
		}
	}
}

// bodyLen is the length of a test frame's body (encodeRequest's header is
// 14 bytes, 15 flexible).
func bodyLen(frame []byte) int {
	key, version := int16(frame[0])<<8|int16(frame[1]), int16(frame[2])<<8|int16(frame[3])
	req := kmsg.RequestForKey(key)
	req.SetVersion(version)
	if req.IsFlexible() {
		return len(frame) - 15
	}
	return len(frame) - 14
}

// TestTooManyEntries: one entry over the ceiling is refused before
// decoding (ErrTooManyEntries, also ErrMalformed); at the ceiling the
// request decodes.
func TestTooManyEntries(t *testing.T) {
	for _, n := range []int{MaxRequestEntries, MaxRequestEntries + 1} {
		frame := worstFrame(3, 0, func(d int) int { return map[bool]int{true: n, false: 0}[d == 0] })
		_, err := ParseRequest(frame)
		if over := n > MaxRequestEntries; over != errors.Is(err, ErrTooManyEntries) || over != errors.Is(err, ErrMalformed) {
			t.Errorf("Metadata v0 of %d empty names: err %v", n, err)
		}
	}
	// Produce partitions without a batch: at most 1000.
	for _, n := range []int{MaxProducePartitionsWithoutBatch, MaxProducePartitionsWithoutBatch + 1} {
		p := kmsg.NewPtrProduceRequest()
		p.Acks = 1
		pt := kmsg.NewProduceRequestTopic()
		pt.Partitions = make([]kmsg.ProduceRequestTopicPartition, n)
		p.Topics = append(p.Topics, pt)
		_, err := ParseRequest(encodeRequest(0, 9, 1, p))
		if over := n > MaxProducePartitionsWithoutBatch; over != errors.Is(err, ErrTooManyEntries) {
			t.Errorf("Produce of %d partitions without records: err %v", n, err)
		}
	}
	// Nested: partitions count too.
	per := func(d int) int { return map[int]int{0: 2, 1: MaxRequestEntries / 2}[d] }
	if _, err := ParseRequest(worstFrame(9, 1, per)); !errors.Is(err, ErrTooManyEntries) {
		t.Errorf("OffsetFetch v1 of 2 topics of %d partitions: err %v", MaxRequestEntries/2, err)
	}
}

// decodeAlloc returns the bytes ParseRequest allocates for frame.
func decodeAlloc(t testing.TB, frame []byte) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ParseRequest(frame)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return after.TotalAlloc - before.TotalAlloc
}

// TestDecodeCostBound: for every API key and version kmsg knows, in every
// worst shape, decoding allocates at most decodeFactor times the frame, and
// RequestCost covers it with room for the answer.
func TestDecodeCostBound(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("measures allocations (not under -short or -race)")
	}
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		req := kmsg.RequestForKey(key)
		if req == nil {
			continue
		}
		worst, worstAt := 0.0, ""
		for v := int16(0); v <= req.MaxVersion(); v++ {
			for _, sh := range worstShapes {
				frame := worstFrame(key, v, sh.per)
				if len(frame) < 64 {
					continue // no arrays: a fixed small allocation
				}
				if errors.Is(func() error { _, err := ParseRequest(frame); return err }(), ErrTooManyEntries) {
					continue
				}
				alloc := decodeAlloc(t, frame)
				if f := float64(alloc) / float64(len(frame)); f > worst {
					worst, worstAt = f, fmt.Sprintf("v%d %s (%d bytes)", v, sh.name, len(frame))
				}
				if alloc > uint64(maxDecodeFactor*len(frame)) {
					t.Errorf("%s v%d %s: decoding allocates %d bytes for a %d-byte frame, over %dx", kmsg.NameForKey(key), v, sh.name, alloc, len(frame), maxDecodeFactor)
				}
				if cost := RequestCost(key, v, len(frame)); cost < int64(alloc) {
					t.Errorf("%s v%d %s: RequestCost %d below the %d bytes decoding allocates", kmsg.NameForKey(key), v, sh.name, cost, alloc)
				}
			}
		}
		t.Logf("%-28s worst decode %5.1fx at %s", kmsg.NameForKey(key), worst, worstAt)
	}
}
