package gateway_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/kafkawire/batch"
)

type batchSpec struct {
	n          int
	codec      int8
	idem       bool // pid, epoch and seq are set
	pid        int64
	epoch      int16
	seq        int32
	firstTS    int64
	tsStep     int64
	valueBytes int
	noKey      bool // records without a key (null)
}

// makeBatch builds a magic 2 record batch with kmsg and a correct CRC.
func makeBatch(t testing.TB, s batchSpec) []byte {
	t.Helper()
	if !s.idem {
		s.pid, s.epoch, s.seq = -1, -1, -1
	}
	var recs []byte
	for i := 0; i < s.n; i++ {
		r := kmsg.NewRecord()
		r.OffsetDelta = int32(i)
		r.TimestampDelta64 = int64(i) * s.tsStep
		if !s.noKey {
			r.Key = []byte(fmt.Sprintf("k%d", i))
		}
		r.Value = bytes.Repeat([]byte{'v'}, max(s.valueBytes, 1))
		body := r.AppendTo(nil)[1:]
		recs = binary.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
	}
	if s.codec != 0 {
		codecs := map[int8]kgo.CompressionCodec{1: kgo.GzipCompression(), 2: kgo.SnappyCompression(), 3: kgo.Lz4Compression(), 4: kgo.ZstdCompression()}
		c, err := kgo.DefaultCompressor(codecs[s.codec])
		if err != nil {
			t.Fatal(err)
		}
		out, _ := c.Compress(new(bytes.Buffer), recs)
		recs = append([]byte(nil), out...)
	}
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: int16(s.codec), LastOffsetDelta: int32(s.n - 1),
		FirstTimestamp: s.firstTS, MaxTimestamp: s.firstTS + int64(s.n-1)*s.tsStep,
		ProducerID: s.pid, ProducerEpoch: s.epoch, FirstSequence: s.seq, NumRecords: int32(s.n), Records: recs,
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	batch.SetCRC(raw)
	return raw
}

func produceReq(acks int16, topic string, partition int32, records []byte) *kmsg.ProduceRequest {
	r := kmsg.NewPtrProduceRequest()
	r.Acks = acks
	r.TimeoutMillis = 10000
	t := kmsg.NewProduceRequestTopic()
	t.Topic = topic
	p := kmsg.NewProduceRequestTopicPartition()
	p.Partition = partition
	p.Records = records
	t.Partitions = append(t.Partitions, p)
	r.Topics = append(r.Topics, t)
	return r
}

func fetchReq(topic string, partition int32, offset int64, maxWaitMs, minBytes int32) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.MaxWaitMillis = maxWaitMs
	r.MinBytes = minBytes
	r.MaxBytes = 50 << 20
	r.SessionEpoch = -1
	t := kmsg.NewFetchRequestTopic()
	t.Topic = topic
	p := kmsg.NewFetchRequestTopicPartition()
	p.Partition = partition
	p.FetchOffset = offset
	p.PartitionMaxBytes = 1 << 20
	t.Partitions = append(t.Partitions, p)
	r.Topics = append(r.Topics, t)
	return r
}
