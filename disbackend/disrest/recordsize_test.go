package disrest

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/configs"
	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/dislocal"
)

// TestMaxMessageBytes checks MaxMessageBytes against the encoders: a
// one-record batch of exactly MaxMessageBytes (null key, no headers, zero
// deltas: the record with the least batch overhead) stores as an envelope
// of exactly DIS's limit, one byte more gives an envelope over it; the
// store takes the former and refuses the latter with ErrRecordTooLarge
// (Kafka MESSAGE_TOO_LARGE); ValidateStreamConfig, CreateStream and
// UpdateStreamConfig take max.message.bytes MaxMessageBytes and refuse one
// more with ErrInvalidConfig naming the limit.
func TestMaxMessageBytes(t *testing.T) {
	t.Parallel()
	if MaxMessageBytes != 1_048_622 {
		t.Errorf("MaxMessageBytes = %d, want 1048622", MaxMessageBytes)
	}
	one := func(valueLen int) (disbackend.Batch, []byte) {
		r := kmsg.Record{Value: bytes.Repeat([]byte{'v'}, valueLen)}
		b := kafkaBatch([]kmsg.Record{r}, 1)
		rec := asRecord(r)
		return b, encodeEnvelope(&rec, txnMeta{pid: -1, epoch: -1}, -1)
	}
	// Find the value that makes the batch exactly MaxMessageBytes.
	v := MaxMessageBytes - 100
	for {
		b, _ := one(v)
		if len(b.Raw) >= MaxMessageBytes {
			break
		}
		v++
	}
	atLimit, envAt := one(v)
	over, envOver := one(v + 1)
	if len(atLimit.Raw) != MaxMessageBytes || len(envAt) != maxRecordBytes {
		t.Fatalf("batch %d bytes, envelope %d; want %d and %d", len(atLimit.Raw), len(envAt), MaxMessageBytes, maxRecordBytes)
	}
	if len(over.Raw) != MaxMessageBytes+1 || len(envOver) != maxRecordBytes+1 {
		t.Fatalf("batch %d bytes, envelope %d; want %d and %d", len(over.Raw), len(envOver), MaxMessageBytes+1, maxRecordBytes+1)
	}

	_, url := startDIS(t, dislocal.Options{})
	s := newStore(t, url, nil)
	stream := mkStreamFormat(t, s, "size", 1, disbackend.RecordFormatEnvelope)
	if _, err := s.Append(stream, 0, atLimit).Wait(ctxT(t)); err != nil {
		t.Fatalf("append of a %d-byte batch: %v", len(atLimit.Raw), err)
	}
	_, err := s.Append(stream, 0, over).Wait(ctxT(t))
	if !errors.Is(err, disbackend.ErrRecordTooLarge) {
		t.Fatalf("append of a %d-byte batch: %v, want ErrRecordTooLarge", len(over.Raw), err)
	}

	cfg := disbackend.StreamConfig{Retention: 24 * time.Hour, MaxMessageBytes: MaxMessageBytes}
	if err := s.ValidateStreamConfig(cfg); err != nil {
		t.Fatalf("max.message.bytes %d: %v", MaxMessageBytes, err)
	}
	if err := s.UpdateStreamConfig(ctxT(t), stream, cfg); err != nil {
		t.Fatalf("update to max.message.bytes %d: %v", MaxMessageBytes, err)
	}
	cfg.MaxMessageBytes++
	limit := strconv.Itoa(MaxMessageBytes)
	for what, err := range map[string]error{
		"validate": s.ValidateStreamConfig(cfg),
		"update":   s.UpdateStreamConfig(ctxT(t), stream, cfg),
	} {
		if !errors.Is(err, disbackend.ErrInvalidConfig) || !strings.Contains(err.Error(), limit) {
			t.Errorf("%s max.message.bytes %d: %v, want ErrInvalidConfig naming %s", what, cfg.MaxMessageBytes, err, limit)
		}
	}
	_, err = s.CreateStream(ctxT(t), disbackend.StreamSpec{Name: "big", TopicName: "big", PartitionCount: 1, Config: cfg})
	if !errors.Is(err, disbackend.ErrInvalidConfig) || !strings.Contains(err.Error(), limit) {
		t.Errorf("create with max.message.bytes %d: %v, want ErrInvalidConfig naming %s", cfg.MaxMessageBytes, err, limit)
	}
}

// TestMaxMessageBytesConfig: the config's copy of the limit is this one.
func TestMaxMessageBytesConfig(t *testing.T) {
	if configs.DISMaxMessageBytes != MaxMessageBytes {
		t.Fatalf("configs.DISMaxMessageBytes = %d, want %d", configs.DISMaxMessageBytes, MaxMessageBytes)
	}
}
