package gateway

import (
	"context"
	"net"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/disbackend/localstore"
	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

// benchConn is a connection of User:alice from 127.0.0.2 to a server over
// an in-memory localstore, with the authorizer on or off; alice may do
// anything on the topic "bench" (one literal ACL) and is not a super user.
func benchConn(b *testing.B, authorizer bool) *conn {
	b.Helper()
	store, err := localstore.Open("bench", localstore.Options{FS: vfs.NewMem(), RetentionCheckInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	cfg := DefaultConfig()
	cfg.Authorizer = authorizer
	cfg.SuperUsers = []string{"User:admin"}
	s, err := New(cfg, store, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	if s.authz != nil {
		err := s.authz.Create(context.Background(), []acl.Binding{{ResourceType: acl.ResourceTopic, ResourceName: "bench",
			PatternType: int8(kmsg.ACLResourcePatternTypeLiteral), Principal: "User:alice", Host: "*",
			Operation: acl.OpAll, Permission: int8(kmsg.ACLPermissionTypeAllow)}})
		if err != nil {
			b.Fatal(err)
		}
	}
	nc, peer := net.Pipe()
	b.Cleanup(func() { nc.Close(); peer.Close() })
	c := newConn(s, nc, 1)
	c.ip = "127.0.0.2"
	alice := "User:alice"
	c.principal.Store(&alice)
	return c
}

// BenchmarkDispatch measures the dispatch path (table lookup, version
// check, authorization and, with the authorizer on, the post-filter) of
// Produce, Fetch and Metadata naming one topic, with the authorizer off
// and on. The API's handler is replaced by one that answers at once, so
// only dispatch is measured.
func BenchmarkDispatch(b *testing.B) {
	topic := "bench"
	produce := kmsg.NewPtrProduceRequest()
	produce.Acks = 1
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = topic
	pt.Partitions = []kmsg.ProduceRequestTopicPartition{kmsg.NewProduceRequestTopicPartition()}
	produce.Topics = []kmsg.ProduceRequestTopic{pt}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.ReplicaID = -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	ft.Partitions = []kmsg.FetchRequestTopicPartition{kmsg.NewFetchRequestTopicPartition()}
	fetch.Topics = []kmsg.FetchRequestTopic{ft}
	metadata := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = &topic
	metadata.Topics = []kmsg.MetadataRequestTopic{mt}
	reqs := []struct {
		name    string
		version int16
		body    kmsg.Request
	}{{"produce", 9, produce}, {"fetch", 12, fetch}, {"metadata", 12, metadata}}
	for _, authorizer := range []bool{false, true} {
		c := benchConn(b, authorizer)
		for _, rq := range reqs {
			name := rq.name + "/authorizer=off"
			if authorizer {
				name = rq.name + "/authorizer=on"
			}
			b.Run(name, func(b *testing.B) {
				api := apiTable[rq.body.Key()]
				resp := rq.body.ResponseKind()
				handle := api.handle
				api.handle = func(_ *conn, req *kafkawire.Request) reply { return ready(req, resp) }
				defer func() { api.handle = handle }()
				req := &kafkawire.Request{Key: rq.body.Key(), Version: rq.version, Body: rq.body}
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					r, ok := c.dispatch(req)
					if !ok {
						b.Fatal("dispatch refused the request")
					}
					if r.finish != nil {
						if _, err := r.finish(); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}
