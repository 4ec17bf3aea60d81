package kafkawire

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/kafkawire/batch"
)

// FuzzParseRequest feeds arbitrary frames to the request decoder: it must
// never panic, and a decoded request must have a body of its key.
func FuzzParseRequest(f *testing.F) {
	m := kmsg.NewPtrMetadataRequest()
	topic := "t"
	m.Topics = []kmsg.MetadataRequestTopic{{Topic: &topic}}
	f.Add(encodeRequest(3, 12, 1, m))
	f.Add(encodeRequest(3, 1, 1, m))
	f.Add(encodeRequest(18, 3, 1, kmsg.NewPtrApiVersionsRequest()))
	f.Add(encodeRequest(18, 0, 1, kmsg.NewPtrApiVersionsRequest()))
	p := kmsg.NewPtrProduceRequest()
	p.Acks = -1
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "t"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = batch.Encode(batch.NewHeader(0), []batch.Record{{Value: []byte("v")}, {OffsetDelta: 1, Key: []byte("k")}})
	pt.Partitions = append(pt.Partitions, pp)
	p.Topics = append(p.Topics, pt)
	f.Add(encodeRequest(0, 9, 1, p))
	f.Add(encodeRequest(0, 3, 1, p))
	fr := kmsg.NewPtrFetchRequest()
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "t"
	ft.Partitions = append(ft.Partitions, kmsg.NewFetchRequestTopicPartition())
	fr.Topics = append(fr.Topics, ft)
	f.Add(encodeRequest(1, 11, 1, fr))
	f.Add(encodeRequest(1, 4, 1, fr))
	f.Fuzz(func(t *testing.T, frame []byte) {
		req, err := ParseRequest(frame)
		if err == nil && (req.Body == nil || req.Body.Key() != req.Key) {
			t.Fatalf("decoded request without a matching body: %+v", req)
		}
	})
}

// FuzzPeekEntries checks the entry count walk against kmsg: whenever kmsg
// decodes a frame of a walked request type, the walk counted exactly the
// entries kmsg decoded; and the walk never panics.
func FuzzPeekEntries(f *testing.F) {
	for key := range peekers {
		for v := int16(0); v <= kmsg.RequestForKey(key).MaxVersion(); v += 3 {
			if frame := worstFrame(key, v, func(d int) int { return map[bool]int{true: 2, false: 0}[d < 3] }); frame != nil {
				f.Add(frame)
			}
		}
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		req, err := ParseRequest(frame)
		if err != nil || peekers[req.Key] == nil {
			return
		}
		got, _ := peekEntries(req.Key, req.Version, req.Body.IsFlexible(), frame[len(frame)-bodyLenOf(frame, req.Body.IsFlexible()):])
		if want := countEntries(reflect.ValueOf(req.Body).Elem()); got != want {
			t.Fatalf("%s v%d: walk counted %d entries, kmsg decoded %d", kmsg.NameForKey(req.Key), req.Version, got, want)
		}
	})
}

// bodyLenOf is the length of frame's body: after the header's client id
// and, flexible, its tags.
func bodyLenOf(frame []byte, flexible bool) int {
	rd := kbin.Reader{Src: frame[8:]}
	rd.NullableString()
	if flexible {
		kmsg.SkipTags(&rd)
	}
	return len(rd.Src)
}
