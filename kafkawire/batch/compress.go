package batch

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
// and lz4 are read through a limit. The libraries are those kgo uses
// (klauspost/compress, pierrec/lz4), called directly so that this package
// needs no kmsg.
func decompress(src []byte, codec Codec) ([]byte, error) {
	switch codec {
	case CodecNone:
		return src, nil
	case CodecSnappy:
		return decompressSnappy(src)
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
	n, err := buf.ReadFrom(io.LimitReader(r, MaxDecompressedBytes+1))
	if err != nil {
		return nil, err
	}
	if n > MaxDecompressedBytes {
		return nil, errTooLarge
	}
	return buf.Bytes(), nil
}

// decompressSnappy decodes raw snappy or the xerial framing, summing the
// decoded lengths the data claims before decoding anything.
func decompressSnappy(src []byte) ([]byte, error) {
	if len(src) <= xerialHeaderLen || !bytes.HasPrefix(src, xerialPrefix) {
		l, err := s2.DecodedLen(src)
		if err != nil {
			return nil, err
		}
		if l > MaxDecompressedBytes {
			return nil, errTooLarge
		}
		return s2.Decode(nil, src)
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
		l, err := s2.DecodedLen(rem[:size])
		if err != nil {
			return nil, err
		}
		if total += l; total > MaxDecompressedBytes {
			return nil, errTooLarge
		}
		blocks = append(blocks, rem[:size])
		rem = rem[size:]
	}
	out := make([]byte, 0, total)
	for _, b := range blocks {
		l, _ := s2.DecodedLen(b)
		d, err := s2.Decode(out[len(out):len(out)+l], b)
		if err != nil {
			return nil, err
		}
		out = out[:len(out)+len(d)]
	}
	return out, nil
}
