package kafkawire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
)

// MaxDecompressedBatchBytes bounds what one record batch may decompress to:
// 128 MiB. A larger batch is refused as corrupt instead of being inflated
// in memory (a "decompression bomb": a megabyte of zstd can claim
// gigabytes).
const MaxDecompressedBatchBytes = 128 << 20

// errTooLarge is wrapped in ErrCorruptMessage by decompress's callers.
var errTooLarge = fmt.Errorf("decompresses to more than %d bytes", MaxDecompressedBatchBytes)

var xerialPrefix = []byte{130, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

var zstdDecoders = sync.Pool{New: func() any {
	d, _ := zstd.NewReader(nil,
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(MaxDecompressedBatchBytes))
	return d
}}

// decompress inflates a batch's records with the codec of its attributes,
// never producing more than MaxDecompressedBatchBytes: snappy's decoded
// lengths are checked from its headers before kgo's decompressor runs;
// zstd uses a decoder bounded to that size; gzip and lz4 are read through
// a limit. It uses the same libraries as kgo.
func decompress(src []byte, codec int8) ([]byte, error) {
	switch codec {
	case CodecNone:
		return src, nil
	case CodecSnappy:
		if err := snappyBound(src); err != nil {
			return nil, err
		}
		return decompressor.Decompress(src, kgo.CodecSnappy)
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
		return readLimited(lz4.NewReader(bytes.NewReader(src)))
	}
	return nil, fmt.Errorf("codec %d", codec)
}

func readLimited(r io.Reader) ([]byte, error) {
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(r, MaxDecompressedBatchBytes+1))
	if err != nil {
		return nil, err
	}
	if n > MaxDecompressedBatchBytes {
		return nil, errTooLarge
	}
	return buf.Bytes(), nil
}

// snappyBound sums the decoded lengths that snappy data (raw, or in the
// xerial framing the Java producer writes) claims, without decoding.
func snappyBound(src []byte) error {
	if len(src) <= 16 || !bytes.HasPrefix(src, xerialPrefix) {
		l, err := s2.DecodedLen(src)
		if err != nil {
			return err
		}
		if l > MaxDecompressedBatchBytes {
			return errTooLarge
		}
		return nil
	}
	total := 0
	for rem := src[16:]; len(rem) > 0; {
		if len(rem) < 4 {
			return errors.New("malformed xerial snappy framing")
		}
		size := int(binary.BigEndian.Uint32(rem))
		rem = rem[4:]
		if size < 0 || size > len(rem) {
			return errors.New("malformed xerial snappy framing")
		}
		l, err := s2.DecodedLen(rem[:size])
		if err != nil {
			return err
		}
		if total += l; total > MaxDecompressedBatchBytes {
			return errTooLarge
		}
		rem = rem[size:]
	}
	return nil
}
