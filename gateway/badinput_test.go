package gateway_test

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/gateway"
	"github.com/disgw/disgw/kafkawire/batch"
)

// TestBadInput: each malformed input gets its exact outcome, while another
// client keeps working.
func TestBadInput(t *testing.T) {
	g := startGateway(t, func(c *gateway.Config) { c.MaxFrameBytes = 1 << 20 })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	good := g.client(t, kgo.DefaultProduceTopic("bystander"), kgo.AllowAutoTopicCreation())
	produceOne := func() {
		t.Helper()
		if err := good.ProduceSync(ctx, kgo.StringRecord("still here")).FirstErr(); err != nil {
			t.Fatalf("bystander produce: %v", err)
		}
	}
	produceOne()

	t.Run("frame over the cap closes", func(t *testing.T) {
		r := g.raw(t)
		_, _ = r.c.Write(binary.BigEndian.AppendUint32(nil, 2<<20))
		r.expectClosed()
	})
	t.Run("negative frame size closes", func(t *testing.T) {
		r := g.raw(t)
		_, _ = r.c.Write([]byte{0xff, 0xff, 0xff, 0xf0})
		r.expectClosed()
	})
	t.Run("truncated frame closes", func(t *testing.T) {
		r := g.raw(t)
		frame := encodeRequest(3, 1, 1, kmsg.NewPtrMetadataRequest())
		_, _ = r.c.Write(binary.BigEndian.AppendUint32(nil, uint32(len(frame)+10)))
		_, _ = r.c.Write(frame)
		r.c.(interface{ CloseWrite() error }).CloseWrite()
		r.expectClosed()
	})
	t.Run("garbage body closes", func(t *testing.T) {
		r := g.raw(t)
		frame := encodeRequest(3, 12, 1, kmsg.NewPtrMetadataRequest())
		r.sendFrame(append(frame[:14], 0xff, 0xff, 0xff, 0x7f))
		r.expectClosed()
	})
	t.Run("unknown API key closes", func(t *testing.T) {
		r := g.raw(t)
		frame := encodeRequest(3, 1, 1, kmsg.NewPtrMetadataRequest())
		binary.BigEndian.PutUint16(frame, 31000)
		r.sendFrame(frame)
		r.expectClosed()
	})
	t.Run("known key we do not serve closes", func(t *testing.T) {
		r := g.raw(t)
		r.send(0, kmsg.NewPtrDescribeACLsRequest())
		r.expectClosed()
	})
	t.Run("unknown version closes", func(t *testing.T) {
		for _, v := range []int16{14, 99} {
			r := g.raw(t)
			frame := encodeRequest(3, 12, 1, kmsg.NewPtrMetadataRequest())
			binary.BigEndian.PutUint16(frame[2:], uint16(v))
			r.sendFrame(frame)
			r.expectClosed()
		}
		r := g.raw(t)
		r.send(2, kmsg.NewPtrProduceRequest()) // Produce v2: below what we serve
		r.expectClosed()
	})
	t.Run("ApiVersions at an unknown version gets 35 in a v0 body", func(t *testing.T) {
		r := g.raw(t)
		frame := encodeRequest(18, 3, 77, kmsg.NewPtrApiVersionsRequest())
		binary.BigEndian.PutUint16(frame[2:], 99)
		r.sendFrame(append(frame, 0xde, 0xad)) // an unknown body is not parsed
		corr, body, err := r.recv(18, 0)
		if err != nil {
			t.Fatal(err)
		}
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = 0
		if err := resp.ReadFrom(body); err != nil {
			t.Fatalf("not a v0 body: %v", err)
		}
		if corr != 77 || resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) == 0 {
			t.Fatalf("corr %d error %d keys %d", corr, resp.ErrorCode, len(resp.ApiKeys))
		}
		// The client retries at a version we list, on the same connection.
		av := kmsg.NewPtrApiVersionsRequest()
		av.ClientSoftwareName, av.ClientSoftwareVersion = "test", "1.0"
		ok := r.roundTrip(3, av).(*kmsg.ApiVersionsResponse)
		if ok.ErrorCode != 0 || len(ok.ApiKeys) == 0 {
			t.Fatalf("retry: %+v", ok)
		}
	})
	t.Run("corrupt CRC gets CORRUPT_MESSAGE and the connection stays open", func(t *testing.T) {
		if _, err := kadm.NewClient(good).CreateTopic(ctx, 1, 1, nil, "crc"); err != nil {
			t.Fatal(err)
		}
		r := g.raw(t)
		bad := makeBatch(t, batchSpec{n: 3, firstTS: 1})
		bad[len(bad)-1] ^= 0xff
		resp := r.roundTrip(9, produceReq(-1, "crc", 0, bad)).(*kmsg.ProduceResponse)
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.CorruptMessage.Code {
			t.Fatalf("error %d, want CORRUPT_MESSAGE", code)
		}
		// A batch whose CRC is right but whose records are garbage (here:
		// uncompressed records marked gzip) is refused too, and not stored:
		// it would stall every consumer at it.
		liar := makeBatch(t, batchSpec{n: 3, firstTS: 1})
		liar[22] |= 1
		batch.SetCRC(liar)
		resp = r.roundTrip(9, produceReq(-1, "crc", 0, liar)).(*kmsg.ProduceResponse)
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.CorruptMessage.Code {
			t.Fatalf("CRC-valid garbage: error %d, want CORRUPT_MESSAGE", code)
		}
		resp = r.roundTrip(9, produceReq(-1, "crc", 0, makeBatch(t, batchSpec{n: 3, firstTS: 1}))).(*kmsg.ProduceResponse)
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != 0 {
			t.Fatalf("after a corrupt batch: %+v", p)
		}
	})
	produceOne()
}
