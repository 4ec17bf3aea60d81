package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// MaxDecompressedBytes bounds what one record batch may decompress to: 128
// MiB. A larger batch is refused as corrupt instead of being inflated in
// memory (a "decompression bomb": a megabyte of zstd can claim gigabytes).
const MaxDecompressedBytes = 128 << 20

// errTooLarge is wrapped in ErrCorruptMessage by decompress's callers.
var errTooLarge = fmt.Errorf("decompresses to more than %d bytes", MaxDecompressedBytes)

// xerialPrefix starts snappy data in the xerial framing the Java producer
// writes: the prefix, a version and a compatible version (4 bytes each),
// then blocks of a big-endian length and a raw snappy block.
var xerialPrefix = []byte{130, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeaderLen = 16

var errMalformedXerial = errors.New("malformed xerial snappy framing")

var zstdDecoders = sync.Pool{New: func() any {
	d, _ := zstd.NewReader(nil,
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(MaxDecompressedBytes))
	return d
}}

// decompress inflates a batch's records with codec, never producing more
// than MaxDecompressedBytes: snappy's decoded lengths are checked from its
// headers before decoding; zstd uses a decoder bounded to that size; gzip
// and lz4 are read through a limit. It accepts only what Kafka's Java
// client reads, so that a stored batch never stalls its consumers: snappy
// raw or in xerial framing, decoded by the reference Go snappy (not S2's
// extensions); LZ4 frames with independent blocks (lz4FrameCheck); gzip;
// zstd. The libraries (klauspost/compress, pierrec/lz4, golang/snappy) are
// called directly so that this package needs no kmsg.
func decompress(src []byte, codec Codec) ([]byte, error) {
	switch codec {
	case CodecNone:
		return src, nil
	case CodecSnappy:
		return decompressSnappyLimited(src, MaxDecompressedBytes, &charger{})
	case CodecZstd:
		d := zstdDecoders.Get().(*zstd.Decoder)
		defer zstdDecoders.Put(d)
		out, err := d.DecodeAll(src, nil)
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
			return nil, errTooLarge
		}
		return out, err
	case CodecGzip:
		r, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			return nil, err
		}
		return readLimited(r)
	case CodecLZ4:
		if err := lz4FrameCheck(src); err != nil {
			return nil, err
		}
		return readLimited(lz4.NewReader(bytes.NewReader(src)))
	}
	return nil, fmt.Errorf("codec %d", codec)
}

// readLimited reads r to its end, at most MaxDecompressedBytes. The buffer
// doubles from 64 KiB but never past the limit, so a stream that inflates
// to the limit costs about one and a half times the limit, not two.
func readLimited(r io.Reader) ([]byte, error) {
	buf := make([]byte, 0, 64<<10)
	for {
		if len(buf) == cap(buf) {
			if len(buf) > MaxDecompressedBytes {
				return nil, errTooLarge
			}
			grown := make([]byte, len(buf), min(2*cap(buf), MaxDecompressedBytes+1))
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			if len(buf) > MaxDecompressedBytes {
				return nil, errTooLarge
			}
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// lz4Magic starts an LZ4 frame (little-endian 0x184D2204).
var lz4Magic = []byte{0x04, 0x22, 0x4d, 0x18}

// lz4FrameCheck refuses what Kafka's Lz4BlockInputStream refuses before
// decoding: anything but an LZ4 frame (the legacy format, for one), and a
// frame descriptor with reserved bits set, dependent blocks, a version
// other than 1, or a block size outside 64 KiB-4 MiB.
func lz4FrameCheck(src []byte) error {
	if len(src) < 6 || !bytes.Equal(src[:4], lz4Magic) {
		return errors.New("not an LZ4 frame")
	}
	flg, bd := src[4], src[5]
	switch {
	case flg&0x03 != 0, bd&0x8f != 0:
		return errors.New("LZ4 frame descriptor has reserved bits set")
	case flg&0x20 == 0:
		return errors.New("LZ4 frame with dependent blocks (Kafka reads independent blocks only)")
	case flg>>6 != 1:
		return fmt.Errorf("LZ4 frame version %d", flg>>6)
	case (bd>>4)&7 < 4:
		return fmt.Errorf("LZ4 block size code %d", (bd>>4)&7)
	}
	return nil
}

// decompressSnappyLimited decodes raw snappy or the xerial framing, summing
// the decoded lengths the data claims before decoding anything: more than
// limit is errTooLarge (wrapped in ErrDecompressedTooLarge), and the
// output is charged to ch before it is allocated.
func decompressSnappyLimited(src []byte, limit int64, ch *charger) ([]byte, error) {
	out, err := snappyDecode(src, limit, ch)
	switch {
	case errors.Is(err, errTooLarge):
		return nil, fmt.Errorf("%w: snappy data claims more than %d bytes: %w", ErrDecompressedTooLarge, limit, errTooLarge)
	case errors.Is(err, ErrBudgetWait), errors.Is(err, ErrDecompressedTooLarge), errors.Is(err, errRestart):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("%w: decompress snappy: %v", ErrCorruptMessage, err)
	}
	return out, nil
}

func snappyDecode(src []byte, limit int64, ch *charger) ([]byte, error) {
	if len(src) <= xerialHeaderLen || !bytes.HasPrefix(src, xerialPrefix) {
		l, err := snappy.DecodedLen(src)
		if err != nil {
			return nil, err
		}
		if int64(l) > limit {
			return nil, errTooLarge
		}
		if err := ch.charge(int64(l)); err != nil {
			return nil, err
		}
		return snappy.Decode(make([]byte, l), src)
	}
	var blocks [][]byte
	total := 0
	for rem := src[xerialHeaderLen:]; len(rem) > 0; {
		if len(rem) < 4 {
			return nil, errMalformedXerial
		}
		size := int(int32(binary.BigEndian.Uint32(rem)))
		rem = rem[4:]
		if size < 0 || size > len(rem) {
			return nil, errMalformedXerial
		}
		l, err := snappy.DecodedLen(rem[:size])
		if err != nil {
			return nil, err
		}
		if total += l; int64(total) > limit {
			return nil, errTooLarge
		}
		blocks = append(blocks, rem[:size])
		rem = rem[size:]
	}
	if err := ch.charge(int64(total)); err != nil {
		return nil, err
	}
	out := make([]byte, 0, total)
	for _, b := range blocks {
		l, _ := snappy.DecodedLen(b)
		d, err := snappy.Decode(out[len(out):len(out)+l], b)
		if err != nil {
			return nil, err
		}
		out = out[:len(out)+len(d)]
	}
	return out, nil
}

// zstdEncoders are pools of encoders by klauspost's level (zstd levels
// map onto its four: EncoderLevelFromZstd).
var zstdEncoders [zstd.SpeedBestCompression + 1]sync.Pool

func zstdEncoder(level zstd.EncoderLevel) *zstd.Encoder {
	if e, ok := zstdEncoders[level].Get().(*zstd.Encoder); ok {
		return e
	}
	e, _ := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true), zstd.WithEncoderLevel(level))
	return e
}

// xerialBlockSize is the block size of the Java producer's xerial framing.
const xerialBlockSize = 32 << 10

// compress compresses data with codec as Kafka's Java client writes it:
// gzip, snappy in the xerial framing, an LZ4 frame of independent blocks,
// zstd, at level (Kafka's compression.<codec>.level; 0 is the codec's
// default: gzip -1, lz4 9, zstd 3; snappy has none). It is what a
// rewritten batch (compaction, recompression) is compressed with.
func compress(data []byte, codec Codec, level int) ([]byte, error) {
	switch codec {
	case CodecNone:
		return data, nil
	case CodecGzip:
		var buf bytes.Buffer
		if level == 0 {
			level = gzip.DefaultCompression
		}
		w, err := gzip.NewWriterLevel(&buf, level)
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(data); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case CodecSnappy:
		out := append([]byte(nil), xerialPrefix...)
		out = append(out, 0, 0, 0, 1, 0, 0, 0, 1) // version and compatible version 1
		for len(data) > 0 {
			n := min(len(data), xerialBlockSize)
			block := snappy.Encode(nil, data[:n])
			out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
			out = append(out, block...)
			data = data[n:]
		}
		return out, nil
	case CodecLZ4:
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		if err := w.Apply(lz4.CompressionLevelOption(lz4Level(level))); err != nil {
			return nil, err
		}
		if _, err := w.Write(data); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case CodecZstd:
		l := zstd.SpeedDefault
		if level != 0 {
			l = zstd.EncoderLevelFromZstd(level)
		}
		e := zstdEncoder(l)
		defer zstdEncoders[l].Put(e)
		return e.EncodeAll(data, nil), nil
	}
	return nil, fmt.Errorf("codec %d", codec)
}

// lz4Level maps Kafka's compression.lz4.level (1 fast, 2-17 the
// high-compression levels; 0 Kafka's default, 9) onto pierrec/lz4's
// levels (fast, 1-9).
func lz4Level(level int) lz4.CompressionLevel {
	switch {
	case level == 0:
		return lz4.Level9
	case level <= 1:
		return lz4.Fast
	case level >= 9:
		return lz4.Level9
	}
	return lz4.CompressionLevel(1 << (8 + level)) // Level2-Level8
}
