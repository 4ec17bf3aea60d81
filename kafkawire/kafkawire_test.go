package kafkawire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func encodeRequest(key, version int16, corr int32, body kmsg.Request) []byte {
	body.SetVersion(version)
	out := binary.BigEndian.AppendUint16(nil, uint16(key))
	out = binary.BigEndian.AppendUint16(out, uint16(version))
	out = binary.BigEndian.AppendUint32(out, uint32(corr))
	out = binary.BigEndian.AppendUint16(out, 4)
	out = append(out, "test"...)
	if body.IsFlexible() {
		out = append(out, 0)
	}
	return body.AppendTo(out)
}

func TestParseRequest(t *testing.T) {
	m := kmsg.NewPtrMetadataRequest()
	topic := "a.b"
	m.Topics = []kmsg.MetadataRequestTopic{{Topic: &topic}}
	for _, v := range []int16{0, 8, 9, 13} {
		req, err := ParseRequest(encodeRequest(3, v, 7, m))
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		got := req.Body.(*kmsg.MetadataRequest)
		if req.CorrelationID != 7 || req.ClientID != "test" || *got.Topics[0].Topic != "a.b" {
			t.Fatalf("v%d: %+v", v, req)
		}
	}
	if _, err := ParseRequest(encodeRequest(3, 14, 1, m)); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("v14: %v", err)
	}
	av := kmsg.NewPtrApiVersionsRequest()
	req, err := ParseRequest(encodeRequest(18, 99, 5, av))
	if !errors.Is(err, ErrUnsupportedVersion) || req == nil || req.Key != 18 || req.CorrelationID != 5 {
		t.Fatalf("ApiVersions v99: %v %+v", err, req)
	}
	bad := encodeRequest(3, 1, 1, m)
	bad[0], bad[1] = 0x7f, 0x00
	if _, err := ParseRequest(bad); !errors.Is(err, ErrUnknownAPIKey) {
		t.Fatalf("unknown key: %v", err)
	}
	if _, err := ParseRequest(encodeRequest(3, 1, 1, m)[:12]); !errors.Is(err, ErrMalformed) {
		t.Fatalf("truncated: %v", err)
	}
}

func TestReadFrame(t *testing.T) {
	frame := binary.BigEndian.AppendUint32(nil, 3)
	frame = append(frame, 1, 2, 3)
	got, err := ReadFrame(bytes.NewReader(frame), 10)
	if err != nil || !bytes.Equal(got, []byte{1, 2, 3}) {
		t.Fatalf("%v %v", got, err)
	}
	if _, err := ReadFrame(bytes.NewReader(frame), 2); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("cap: %v", err)
	}
	if _, err := ReadFrame(bytes.NewReader(frame[:5]), 10); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated: %v", err)
	}
	if _, err := ReadFrame(bytes.NewReader(nil), 10); !errors.Is(err, io.EOF) {
		t.Fatalf("eof: %v", err)
	}
	huge := binary.BigEndian.AppendUint32(nil, 0xffffffff)
	if _, err := ReadFrame(bytes.NewReader(huge), 10); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("negative: %v", err)
	}
}

func TestAppendResponse(t *testing.T) {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	out := AppendResponse(nil, 9, resp)
	if int(binary.BigEndian.Uint32(out)) != len(out)-4 || binary.BigEndian.Uint32(out[4:]) != 9 {
		t.Fatalf("frame %x", out)
	}
	// ApiVersions has a v0 response header even when flexible: the body
	// starts right after the correlation id.
	var back kmsg.ApiVersionsResponse
	back.Version = 3
	if err := back.ReadFrom(out[8:]); err != nil {
		t.Fatal(err)
	}
	m := kmsg.NewPtrMetadataResponse()
	m.Version = 12
	out = AppendResponse(nil, 1, m)
	if out[8] != 0 {
		t.Fatalf("flexible header needs an empty tag section")
	}
}
