// Package bombtest builds decompression bombs for tests: zstd data of a few
// kilobytes that decompresses to gigabytes, wrapped as Kafka record batches.
package bombtest

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/kafkawire/batch"
)

// RLEZstd is zstd data of a few KB (4 bytes per 128 KiB) that decompresses
// to prefix then zeros bytes of zeros, in one frame without a content
// size, as a streaming compressor writes it.
func RLEZstd(prefix []byte, zeros int64) []byte {
	out := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 7 << 3} // magic; no content size; 128 KiB window
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

// RecordStart is the start of a record with a null key and a valueLen-byte
// value; the rest of it (the value, a header count of 0) is zeros.
func RecordStart(valueLen int64) []byte {
	body := binary.AppendVarint([]byte{0, 0, 0, 1}, valueLen)
	return append(binary.AppendVarint(nil, int64(len(body))+valueLen+1), body...)
}

// ZstdBatch wraps compressed data as a one-record zstd batch.
func ZstdBatch(data []byte) []byte {
	b := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, Attributes: 4, ProducerID: -1, ProducerEpoch: -1,
		FirstSequence: -1, NumRecords: 1, Records: data}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	batch.SetCRC(raw)
	return raw
}

// OneRecord is a batch of a few KB holding one record of valueLen zero
// bytes.
func OneRecord(valueLen int64) []byte {
	return ZstdBatch(RLEZstd(RecordStart(valueLen), valueLen+1))
}
