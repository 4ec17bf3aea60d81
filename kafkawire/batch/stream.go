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
// records are carved from arena chunks charged to ch; otherwise one
// scratch buffer is reused.
type streamRecords struct {
	codec   Codec
	er      *errReader
	r       *bufio.Reader
	limit   int64 // decompressed bytes allowed
	read    int64 // decompressed bytes consumed so far
	ch      *charger
	arena   []byte // kept records: the current chunk's free space
	scratch []byte // records not kept
	close_  func()
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

// buffer returns n bytes to read a record into, charged to the budget.
func (s *streamRecords) buffer(n int64, keep bool) ([]byte, error) {
	if !keep {
		if int64(cap(s.scratch)) < n {
			grown := max(n, 2*int64(cap(s.scratch)), 4<<10)
			grown = min(grown, max(n, s.limit))
			if err := s.ch.charge(grown - int64(cap(s.scratch))); err != nil {
				return nil, err
			}
			s.scratch = make([]byte, grown)
		}
		return s.scratch[:n:n], nil
	}
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
