package batch

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"
)

// rleBomb is zstd data of a few KB that decompresses to prefix and then
// zeros bytes of zeros: a raw block, then RLE blocks of 128 KiB each (4
// bytes a block), in one frame without a content size, as a streaming
// compressor writes it.
func rleBomb(prefix []byte, zeros int64) []byte {
	out := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 7 << 3} // magic; no FCS; window 2^(10+7) = 128 KiB
	block := func(typ, size int, last bool) {
		h := uint32(size)<<3 | uint32(typ)<<1
		if last {
			h |= 1
		}
		out = append(out, byte(h), byte(h>>8), byte(h>>16))
	}
	block(0, len(prefix), zeros == 0)
	out = append(out, prefix...)
	for zeros > 0 {
		n := min(zeros, 128<<10)
		zeros -= n
		block(1, int(n), zeros == 0)
		out = append(out, 0)
	}
	return out
}

// bombRecordPrefix is the start of one record whose value is valueLen
// bytes; the rest of the record (the value and a header count of 0) is
// zeros.
func bombRecordPrefix(valueLen int64) []byte {
	body := binary.AppendVarint([]byte{0, 0, 0, 1}, valueLen) // attributes, ts delta, offset delta, null key
	bodyLen := int64(len(body)) + valueLen + 1
	return append(binary.AppendVarint(nil, bodyLen), body...)
}

// zstdBatch wraps compressed record data in a one-record zstd batch that
// Parse accepts.
func zstdBatch(data []byte, records int32) []byte {
	h := NewHeader(0)
	h.Attributes = int16(CodecZstd)
	raw, _ := encode(h, nil, 0)
	raw = append(raw, data...)
	binary.BigEndian.PutUint32(raw[offLength:], uint32(len(raw)-logOverhead))
	binary.BigEndian.PutUint32(raw[offLastOffsetDelta:], uint32(records-1))
	binary.BigEndian.PutUint32(raw[offRecordCount:], uint32(records))
	SetCRC(raw)
	return raw
}

// TestLimitedBombs: bombs of 1 GiB of zeros are refused having inflated
// no more than the limit (the budget's count of everything acquired says
// so), the budget is back at 0, and a batch within the limit passes.
func TestLimitedBombs(t *testing.T) {
	const gib = 1 << 30
	const limit = 8 << 20
	for _, tc := range []struct {
		name string
		data []byte
		want error
	}{
		{"zeros", rleBomb(nil, gib), ErrInvalidRecord},
		{"one 1 GiB record", rleBomb(bombRecordPrefix(gib), gib), ErrDecompressedTooLarge},
		{"one 120 MiB record", rleBomb(bombRecordPrefix(120<<20), 120<<20), ErrDecompressedTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := zstdBatch(tc.data, 1)
			h, err := Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			b := NewBudget(64 << 20)
			lim := Limits{MaxBytes: limit, Budget: b}
			if _, err := ValidateLimited(context.Background(), raw, h, lim); !errors.Is(err, tc.want) {
				t.Fatalf("ValidateLimited: %v, want %v", err, tc.want)
			}
			_, _, hold, err := ValidateAndDecodeLimited(context.Background(), raw, h, lim)
			if !errors.Is(err, tc.want) || hold.Bytes() != 0 {
				t.Fatalf("ValidateAndDecodeLimited: %v, hold %d, want %v", err, hold.Bytes(), tc.want)
			}
			if b.InUse() != 0 {
				t.Fatalf("budget in use %d after refusals, want 0", b.InUse())
			}
			if got := b.Acquired(); got > 2*(limit+BudgetChunk) {
				t.Fatalf("two refusals acquired %d bytes of the budget: more than the limit was inflated", got)
			}
		})
	}
	// Within the limit: accepted, held until Release.
	raw := zstdBatch(rleBomb(bombRecordPrefix(4<<20), 4<<20+1), 1)
	h, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	b := NewBudget(64 << 20)
	recs, _, hold, err := ValidateAndDecodeLimited(context.Background(), raw, h, Limits{MaxBytes: limit, Budget: b})
	if err != nil || len(recs) != 1 || len(recs[0].Value) != 4<<20 {
		t.Fatalf("4 MiB record: %d records, %v", len(recs), err)
	}
	if b.InUse() < 4<<20 || b.InUse() != hold.Bytes() {
		t.Fatalf("held %d, budget in use %d: want the record's 4 MiB charged", hold.Bytes(), b.InUse())
	}
	hold.Release()
	if b.InUse() != 0 {
		t.Fatalf("budget in use %d after Release", b.InUse())
	}
	if _, err := ValidateLimited(context.Background(), raw, h, Limits{MaxBytes: 1 << 20, Budget: b}); !errors.Is(err, ErrDecompressedTooLarge) {
		t.Fatalf("4 MiB record over a 1 MiB limit: %v", err)
	}
}

// TestBudgetWaits: a decoding that does not fit waits for room and ends
// with the context; one that needs more than the whole budget is refused
// at once; concurrent decodings leave the budget at 0.
func TestBudgetWaits(t *testing.T) {
	raw := zstdBatch(rleBomb(bombRecordPrefix(4<<20), 4<<20+1), 1)
	h, _ := Parse(raw)
	b := NewBudget(6 << 20)
	// Bounds a wait that never ends (a broken release) so that the test
	// fails instead of hanging; no duration is asserted.
	bg, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	if err := b.Acquire(bg, 5<<20); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 50*time.Millisecond)
	defer cancel()
	if _, _, _, err := ValidateAndDecodeLimited(ctx, raw, h, Limits{Budget: b}); !errors.Is(err, ErrBudgetWait) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("with the budget spent: %v, want ErrBudgetWait and DeadlineExceeded", err)
	}
	if b.InUse() != 5<<20 {
		t.Fatalf("in use %d, want the 5 MiB acquired by hand", b.InUse())
	}
	done := make(chan error)
	go func() {
		_, _, hold, err := ValidateAndDecodeLimited(bg, raw, h, Limits{Budget: b})
		hold.Release()
		done <- err
	}()
	b.Release(5 << 20)
	if err := <-done; err != nil {
		t.Fatalf("after room was made: %v", err)
	}
	small := NewBudget(2 << 20)
	if _, _, _, err := ValidateAndDecodeLimited(bg, raw, h, Limits{Budget: small}); !errors.Is(err, ErrDecompressedTooLarge) {
		t.Fatalf("a batch larger than the whole budget: %v, want ErrDecompressedTooLarge", err)
	}
	if _, err := ValidateLimited(bg, raw, h, Limits{Budget: small}); err != nil {
		t.Fatalf("Validate keeps no record, so a 4 MiB record is checked within a 2 MiB budget: %v", err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			recs, _, hold, err := ValidateAndDecodeLimited(bg, raw, h, Limits{Budget: b})
			if err != nil || len(recs) != 1 {
				t.Errorf("concurrent decode: %v", err)
			}
			hold.Release()
		})
	}
	wg.Wait()
	if b.InUse() != 0 || small.InUse() != 0 {
		t.Fatalf("in use %d and %d after everything finished, want 0", b.InUse(), small.InUse())
	}
}

// TestFindRecord: the first record at or after a timestamp, from one
// batch, holding one record at a time.
func TestFindRecord(t *testing.T) {
	for _, c := range allCodecs {
		h := NewHeader(100)
		h.Attributes = int16(c)
		recs := []Record{{Timestamp: 10, Value: make([]byte, 3<<20)}, {OffsetDelta: 1, Timestamp: 30}, {OffsetDelta: 2, Timestamp: 20}}
		raw, err := Rewrite(h, recs, -1)
		if err != nil {
			t.Fatal(err)
		}
		b := NewBudget(64 << 20)
		lim := Limits{Budget: b}
		for _, q := range []struct{ ts, off, got int64 }{{5, 100, 10}, {11, 101, 30}, {30, 101, 30}, {31, -1, -1}} {
			off, ts, err := FindRecord(context.Background(), raw, lim, func(ts, _ int64) bool { return ts >= q.ts })
			if err != nil || off != q.off || ts != q.got {
				t.Fatalf("%s: at %d: (%d, %d, %v), want (%d, %d)", c, q.ts, off, ts, err, q.off, q.got)
			}
		}
		if b.InUse() != 0 {
			t.Fatalf("%s: in use %d", c, b.InUse())
		}
		if _, _, err := FindRecord(context.Background(), raw, Limits{MaxBytes: 1 << 20, Budget: b}, func(int64, int64) bool { return false }); c != CodecNone && !errors.Is(err, ErrDecompressedTooLarge) {
			t.Fatalf("%s: a 3 MiB record over a 1 MiB limit: %v", c, err)
		}
	}
}
