package batch

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// records is where decodeWith reads records from: the batch bytes
// themselves (uncompressed), a buffer (snappy, whose decoded length is
// known before decoding), or a decompressing stream.
type records interface {
	// next decodes the next record into r. Errors wrap ErrInvalidRecord,
	// ErrCorruptMessage, ErrDecompressedTooLarge or ErrBudgetWait.
	next(r *Record, keep bool) error
	// end checks that nothing follows the last record (strict decoding).
	end(n int32) error
	// maxLen is an upper bound of the decompressed length, for the record
	// count check.
	maxLen() int64
	close()
}

// openRecords returns the records of a batch's data, decompressed with
// codec to at most limit bytes; memory held is charged to ch.
func openRecords(data []byte, codec Codec, limit int64, ch *charger, keep bool) (records, error) {
	switch codec {
	case CodecNone:
		return &memRecords{data: data}, nil
	case CodecSnappy:
		out, err := decompressSnappyLimited(data, limit, ch)
		if err != nil {
			return nil, err
		}
		return &memRecords{data: out}, nil
	}
	var r io.Reader
	closeFn := func() {}
	switch codec {
	case CodecGzip:
		g, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("%w: decompress gzip: %v", ErrCorruptMessage, err)
		}
		if err := ch.charge(64 << 10); err != nil { // its window and buffers
			return nil, err
		}
		r, closeFn = g, func() { _ = g.Close() }
	case CodecLZ4:
		if err := lz4FrameCheck(data); err != nil {
			return nil, fmt.Errorf("%w: decompress lz4: %v", ErrCorruptMessage, err)
		}
		// A block and its decoded copy: 64 KiB to 4 MiB (lz4FrameCheck).
		if err := ch.charge(2 << (8 + 2*((data[5]>>4)&7))); err != nil {
			return nil, err
		}
		r = lz4.NewReader(bytes.NewReader(data))
	case CodecZstd:
		var zh zstd.Header
		if err := zh.Decode(data); err != nil {
			return nil, fmt.Errorf("%w: decompress zstd: %v", ErrCorruptMessage, err)
		}
		if zh.HasFCS && int64(min(zh.FrameContentSize, math.MaxInt64)) > limit {
			return nil, fmt.Errorf("%w: the zstd frame says it holds %d bytes, more than the limit of %d", ErrDecompressedTooLarge, zh.FrameContentSize, limit)
		}
		// The decoder's history: the frame's window, at most the limit.
		window := int64(min(zh.WindowSize, uint64(limit)))
		if zh.SingleSegment {
			window = int64(min(zh.FrameContentSize, uint64(limit)))
		}
		if err := ch.charge(window); err != nil {
			return nil, err
		}
		d := zstdDecoders.Get().(*zstd.Decoder)
		if err := d.Reset(bytes.NewReader(data)); err != nil {
			zstdDecoders.Put(d)
			return nil, fmt.Errorf("%w: decompress zstd: %v", ErrCorruptMessage, err)
		}
		r = d
		closeFn = func() {
			_ = d.Reset(nil)
			if window > 4<<20 {
				d.Close() // do not keep a large history in the pool
				return
			}
			zstdDecoders.Put(d)
		}
	default:
		return nil, fmt.Errorf("%w: codec %d", ErrUnsupportedCompression, codec)
	}
	er := &errReader{r: r}
	return &streamRecords{codec: codec, er: er, r: bufio.NewReaderSize(er, 32<<10), limit: limit, ch: ch, close_: closeFn}, nil
}

// memRecords reads records from decompressed (or uncompressed) bytes.
type memRecords struct{ data []byte }

func (m *memRecords) next(r *Record, keep bool) error {
	n, err := readRecord(m.data, r, keep)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidRecord, err)
	}
	m.data = m.data[n:]
	return nil
}

func (m *memRecords) end(n int32) error {
	if len(m.data) != 0 {
		return fmt.Errorf("%w: %d bytes after the last of %d records", ErrInvalidRecord, len(m.data), n)
	}
	return nil
}

func (m *memRecords) maxLen() int64 { return int64(len(m.data)) }
func (m *memRecords) close()        {}

// errReader remembers the first error of r other than io.EOF: a failure
// of the decompressor, not of the records.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF && e.err == nil {
		e.err = err
	}
	return n, err
}

// streamRecords reads records from a decompressing stream, one at a time:
// a record's bytes are read only once its length fits the limit. Kept
// records are carved from arena chunks charged to ch; records not kept
// are checked field by field as they stream by (skipRecord).
type streamRecords struct {
	codec  Codec
	er     *errReader
	r      *bufio.Reader
	limit  int64 // decompressed bytes allowed
	read   int64 // decompressed bytes consumed so far
	ch     *charger
	arena  []byte // kept records: the current chunk's free space
	close_ func()
}

const arenaChunk = 256 << 10

func (s *streamRecords) maxLen() int64 { return s.limit }
func (s *streamRecords) close()        { s.close_() }

// fail turns a read error into the batch error it means.
func (s *streamRecords) fail(err error) error {
	if errors.Is(s.er.err, zstd.ErrDecoderSizeExceeded) || errors.Is(s.er.err, zstd.ErrWindowSizeExceeded) {
		return fmt.Errorf("%w: decompress %s: %v", ErrDecompressedTooLarge, s.codec, s.er.err)
	}
	if s.er.err != nil {
		return fmt.Errorf("%w: decompress %s: %v", ErrCorruptMessage, s.codec, s.er.err)
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return fmt.Errorf("%w: the data ends inside a record", ErrInvalidRecord)
	}
	return fmt.Errorf("%w: %v", ErrInvalidRecord, err)
}

func (s *streamRecords) next(r *Record, keep bool) error {
	var prefix [5]byte
	var u uint64
	n := 0
	for {
		if n == len(prefix) {
			return fmt.Errorf("%w: bad length", ErrInvalidRecord)
		}
		b, err := s.r.ReadByte()
		if err != nil {
			return s.fail(err)
		}
		prefix[n] = b
		u |= uint64(b&0x7f) << (7 * n)
		n++
		if b < 0x80 {
			break
		}
	}
	if u > math.MaxUint32 {
		return fmt.Errorf("%w: bad length", ErrInvalidRecord)
	}
	length := int64(int32(uint32(u)>>1) ^ -int32(uint32(u)&1))
	if length <= 0 {
		return fmt.Errorf("%w: bad length", ErrInvalidRecord)
	}
	total := int64(n) + length
	if s.read+total > s.limit {
		return fmt.Errorf("%w: a record of %d bytes after %d bytes passes the limit of %d decompressed bytes", ErrDecompressedTooLarge, length, s.read, s.limit)
	}
	s.read += total
	if !keep {
		return s.skipRecord(r, length)
	}
	buf, err := s.buffer(total, keep)
	if err != nil {
		return err
	}
	copy(buf, prefix[:n])
	if _, err := io.ReadFull(s.r, buf[n:]); err != nil {
		return s.fail(err)
	}
	if _, err := readRecord(buf, r, keep); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidRecord, err)
	}
	return nil
}

// present is the Key or Value of a record walked without keeping its
// bytes: not nil (the field is not null), and empty.
var present = []byte{}

// skipRecord checks the record body of length bytes that follows in the
// stream, as readRecord does, without keeping its bytes: keys, values and
// header values are discarded as they are read, so that checking a batch
// holds no record whatever its size. r gets the offset and timestamp
// deltas, and Key and Value that are nil only when null.
func (s *streamRecords) skipRecord(r *Record, length int64) error {
	f := fieldReader{r: s.r, rem: length}
	f.byte() // attributes: unused in magic 2
	ts := f.varlong()
	off := f.varint()
	key := f.skip()
	value := f.skip()
	count := f.varint()
	if f.ioErr != nil {
		return s.fail(f.ioErr)
	}
	if f.bad || off < 0 || count < 0 || count > f.rem/2 {
		return fmt.Errorf("%w: bad fields", ErrInvalidRecord)
	}
	*r = Record{OffsetDelta: int32(off), Timestamp: ts, Key: key, Value: value}
	for i := int64(0); i < count; i++ {
		hk := f.skip()
		f.skip()
		if f.ioErr != nil {
			return s.fail(f.ioErr)
		}
		if f.bad || hk == nil {
			return fmt.Errorf("%w: bad header %d", ErrInvalidRecord, i)
		}
	}
	if f.bad || f.rem != 0 {
		return fmt.Errorf("%w: %d bytes left in the record", ErrInvalidRecord, f.rem)
	}
	return nil
}

// fieldReader reads the fields of one record from a stream, as decoder
// reads them from memory: at most rem bytes; bad is set at the first
// field that does not decode, ioErr at the first read error.
type fieldReader struct {
	r     *bufio.Reader
	rem   int64
	bad   bool
	ioErr error
}

func (f *fieldReader) byte() byte {
	if f.bad || f.ioErr != nil || f.rem <= 0 {
		f.bad = true
		return 0
	}
	b, err := f.r.ReadByte()
	if err != nil {
		f.ioErr = err
		return 0
	}
	f.rem--
	return b
}

// uvarint is decoder.uvarint over the stream.
func (f *fieldReader) uvarint(maxLen int) uint64 {
	var v uint64
	for i := 0; i < maxLen && f.rem > 0 && !f.bad && f.ioErr == nil; i++ {
		b := f.byte()
		if i == 9 && b > 1 {
			break // more than 64 bits
		}
		v |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			return v
		}
	}
	f.bad = true
	return 0
}

func (f *fieldReader) varint() int64 {
	v := f.uvarint(5)
	if f.bad || v > math.MaxUint32 {
		f.bad = true
		return 0
	}
	u := uint32(v)
	return int64(int32(u>>1) ^ -int32(u&1))
}

func (f *fieldReader) varlong() int64 {
	v := f.uvarint(10)
	if f.bad {
		return 0
	}
	return int64(v>>1) ^ -int64(v&1)
}

// skip reads nullable bytes and discards them: nil for length -1, else
// present.
func (f *fieldReader) skip() []byte {
	l := f.varint()
	switch {
	case f.bad || f.ioErr != nil:
		return nil
	case l == -1:
		return nil
	case l < -1 || l > f.rem:
		f.bad = true
		return nil
	}
	if _, err := f.r.Discard(int(l)); err != nil {
		f.ioErr = err
		return nil
	}
	f.rem -= l
	return present
}

// buffer returns n bytes to read a kept record into, charged to the
// budget.
func (s *streamRecords) buffer(n int64, keep bool) ([]byte, error) {
	if n > arenaChunk/4 {
		if err := s.ch.charge(n); err != nil {
			return nil, err
		}
		return make([]byte, n), nil
	}
	if int64(len(s.arena)) < n {
		size := min(int64(arenaChunk), max(n, s.limit-s.read+n))
		if err := s.ch.charge(size); err != nil {
			return nil, err
		}
		s.arena = make([]byte, size)
	}
	buf := s.arena[:n:n]
	s.arena = s.arena[n:]
	return buf, nil
}

func (s *streamRecords) end(n int32) error {
	if _, err := s.r.ReadByte(); err == nil {
		return fmt.Errorf("%w: data after the last of %d records", ErrInvalidRecord, n)
	} else if err != io.EOF {
		return s.fail(err)
	}
	return nil
}
