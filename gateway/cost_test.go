package gateway_test

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"sort"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap/zapcore"

	"github.com/disgw/disgw/gateway"
	"github.com/disgw/disgw/kafkawire"
	"github.com/disgw/disgw/kafkawire/batch"
)

// fillEntries fills every array of the struct v with per(depth) entries of
// the smallest encoding (zero values, empty strings), recursively.
func fillEntries(v reflect.Value, per func(depth int) int, depth int) {
	for i := range v.NumField() {
		f := v.Field(i)
		if !f.CanSet() {
			continue
		}
		switch f.Kind() {
		case reflect.Slice:
			if f.Type().Elem().Kind() == reflect.Uint8 {
				// Bytes (record batches): as short as a batch header, the
				// least a produce partition may carry in bulk.
				f.SetBytes(make([]byte, 61))
				continue
			}
			n := per(depth)
			s := reflect.MakeSlice(f.Type(), n, n)
			for j := range n {
				if e := s.Index(j); e.Kind() == reflect.Struct {
					if d := e.Addr().MethodByName("Default"); d.IsValid() {
						d.Call(nil)
					}
					fillEntries(e, per, depth+1)
				}
			}
			f.Set(s)
		case reflect.Pointer:
			if f.Type().Elem().Kind() == reflect.String {
				f.Set(reflect.ValueOf(new(string)))
			}
		}
	}
}

// worstRequest is key at version with minimal entries in the shape per; a
// produce asks for acks (acks=0 has no answer to wait for).
func worstRequest(key, version int16, per func(int) int) (frame []byte) {
	req := kmsg.RequestForKey(key)
	req.SetVersion(version)
	fillEntries(reflect.ValueOf(req).Elem(), per, 0)
	if p, ok := req.(*kmsg.ProduceRequest); ok {
		p.Acks = 1
	}
	defer func() {
		if recover() != nil {
			frame = nil
		}
	}()
	return encodeRequest(key, version, 1, req)
}

func levels(counts ...int) func(int) int {
	return func(d int) int {
		if d < len(counts) {
			return counts[d]
		}
		return 0
	}
}

// TestRequestCostCoversEveryAPI: for every API key and version the gateway
// serves (as ApiVersions lists them), requests of minimal entries (many at
// the top level; a few at every level; and, at the newest and oldest
// version, as many as a request may declare) are decoded and answered
// within kafkawire.RequestCost, measured as the bytes the process
// allocates from sending the frame to reading the answer.
func TestRequestCostCoversEveryAPI(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("measures allocations (not under -short or -race)")
	}
	g := startGatewayLogging(t, t.TempDir(), zapcore.InfoLevel, nil, func(c *gateway.Config) { c.AutoCreateTopics = false })
	r := g.raw(t)
	apis := r.roundTrip(0, kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse).ApiKeys
	if len(apis) == 0 {
		t.Fatal("ApiVersions lists no API")
	}
	sort.Slice(apis, func(i, j int) bool { return apis[i].ApiKey < apis[j].ApiKey })
	ceil := kafkawire.MaxRequestEntries
	type shape struct {
		name string
		per  func(int) int
	}
	small := []shape{{"top", levels(4000)}, {"nested", levels(40, 40, 40)}}
	big := []shape{{"top at the ceiling", levels(ceil)}, {"nested at the ceiling", levels(4, ceil/4-1)}}
	for _, api := range apis {
		key := api.ApiKey
		worst, worstAt := 0.0, ""
		var atCeiling uint64
		var ceilingFrame int
		for v := api.MinVersion; v <= api.MaxVersion; v++ {
			shapes := small
			if v == api.MinVersion || v == api.MaxVersion {
				shapes = append(shapes[:len(shapes):len(shapes)], big...)
			}
			for _, sh := range shapes {
				frame := worstRequest(key, v, sh.per)
				if frame == nil {
					continue
				}
				var answered bool
				alloc := allocDuring(func() {
					// A request costing more than the budget could run is
					// refused before its body is read: the write may fail.
					_, err := r.c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...))
					var body []byte
					if err == nil {
						_, body, err = r.recv(key, v)
					}
					answered = err == nil && len(body) > 0
					if !answered {
						r = g.raw(t) // refused: the connection is closed
					}
				})
				cost := kafkawire.RequestCost(key, v, len(frame))
				if key == 0 {
					// Produce reserves by the partitions it declares.
					if req, err := kafkawire.ParseRequest(frame); err == nil {
						cost = kafkawire.ProduceCost(len(frame), req.Entries)
					} else {
						cost = kafkawire.ProduceHeadCost(len(frame))
					}
				}
				if len(frame) > 256<<10 && alloc > atCeiling {
					atCeiling, ceilingFrame = alloc, len(frame)
				}
				if f := float64(alloc) / float64(len(frame)); f > worst && len(frame) > 1000 {
					worst, worstAt = f, fmt.Sprintf("v%d %s, %d bytes, %d allocated, cost %d", v, sh.name, len(frame), alloc, cost)
				}
				if int64(alloc) > cost {
					t.Errorf("%s v%d %s: %d-byte frame took %d bytes (answered %v), over RequestCost %d",
						kmsg.NameForKey(key), v, sh.name, len(frame), alloc, answered, cost)
				}
			}
		}
		t.Logf("%-24s worst %6.1fx: %s; at the ceiling %d bytes for a %d-byte frame", kmsg.NameForKey(key), worst, worstAt, atCeiling, ceilingFrame)
	}
}

// TestProduceMinimalBatchesCost: produces of many one-record batches (the
// smallest real ones) are answered within RequestCost.
func TestProduceMinimalBatchesCost(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("measures allocations (not under -short or -race)")
	}
	g := startGatewayLogging(t, t.TempDir(), zapcore.InfoLevel, nil, func(c *gateway.Config) { c.AutoCreateTopics = false })
	r := g.raw(t)
	ct := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "p", 1, 1
	ct.Topics = append(ct.Topics, rt)
	r.roundTrip(4, ct)
	for _, n := range []int{1000, 20000} {
		p := kmsg.NewPtrProduceRequest()
		p.Acks = 1
		pt := kmsg.NewProduceRequestTopic()
		pt.Topic = "p"
		for i := range n {
			pp := kmsg.NewProduceRequestTopicPartition()
			pp.Partition = int32(i % 3)
			pp.Records = batch.Encode(batch.NewHeader(0), []batch.Record{{Value: []byte("v")}})
			pt.Partitions = append(pt.Partitions, pp)
		}
		p.Topics = append(p.Topics, pt)
		frame := encodeRequest(0, 9, 1, p)
		alloc := allocDuring(func() {
			r.sendFrame(frame)
			if _, _, err := r.recv(0, 9); err != nil {
				t.Fatal(err)
			}
		})
		cost := kafkawire.ProduceCost(len(frame), n+1)
		t.Logf("produce of %d one-record batches: %d-byte frame, %d allocated (%.1fx), cost %d", n, len(frame), alloc, float64(alloc)/float64(len(frame)), cost)
		if int64(alloc) > cost {
			t.Errorf("produce of %d one-record batches took %d bytes, over RequestCost %d", n, alloc, cost)
		}
	}
}
