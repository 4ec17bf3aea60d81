package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/localstore"
	"github.com/disgw/disgw/gateway"
)

// refreshBackend fails ListStreams while fail > 0 (ErrUnavailable, as
// disrest answers DIS.4305 after its retries) and counts the calls.
type refreshBackend struct {
	*localstore.Store
	fail  atomic.Int32
	lists atomic.Int64
}

func (b *refreshBackend) ListStreams(ctx context.Context) ([]disbackend.Stream, error) {
	b.lists.Add(1)
	if b.fail.Add(-1) >= 0 {
		return nil, fmt.Errorf("list streams: DIS.4305 too many requests: %w", disbackend.ErrUnavailable)
	}
	return b.Store.ListStreams(ctx)
}

// TestMetadataRefresh: with MetadataRefresh set, streams created, scaled
// and deleted in the backend behind the gateway's back show in an
// all-topics Metadata without a client naming them, also after listings
// that failed (the refresher backs off and recovers); without it they do
// not (the gateway only learns topics clients name).
func TestMetadataRefresh(t *testing.T) {
	t.Parallel()
	var rb *refreshBackend
	g := startGatewayWrapped(t, t.TempDir(), func(s *localstore.Store) disbackend.Backend {
		rb = &refreshBackend{Store: s}
		return rb
	}, func(c *gateway.Config) { c.MetadataRefresh = 20 * time.Millisecond })
	adm := kadm.NewClient(g.client(t, kgo.MetadataMinAge(10*time.Millisecond)))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// waitFor polls Metadata (all topics) until cond holds; the timeout
	// only guards against hanging.
	waitFor := func(what string, cond func(kadm.TopicDetails) bool) {
		t.Helper()
		for {
			td, err := adm.ListTopics(ctx)
			if err == nil && cond(td) {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("%s: not seen in Metadata: %v %v", what, td.Names(), err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	mk := func(topic string, parts int32) string {
		name, err := disbackend.StreamNameFor(rb, topic)
		if err != nil {
			t.Fatal(err)
		}
		_, err = rb.CreateStream(ctx, disbackend.StreamSpec{Name: name, TopicName: topic, PartitionCount: parts,
			Config: disbackend.StreamConfig{Retention: 24 * time.Hour, MaxMessageBytes: 1 << 20}})
		if err != nil {
			t.Fatal(err)
		}
		return name
	}
	name := mk("made.elsewhere", 2)
	waitFor("created stream", func(td kadm.TopicDetails) bool { return len(td["made.elsewhere"].Partitions) == 2 })
	if err := rb.UpdatePartitionCount(ctx, name, 5); err != nil {
		t.Fatal(err)
	}
	waitFor("scaled stream", func(td kadm.TopicDetails) bool { return len(td["made.elsewhere"].Partitions) == 5 })

	// Listings fail for a while (DIS.4305): the refresher backs off, then
	// follows again.
	rb.fail.Store(3)
	if err := rb.DeleteStream(ctx, name); err != nil {
		t.Fatal(err)
	}
	mk("made.later", 1)
	waitFor("deleted and created streams", func(td kadm.TopicDetails) bool {
		_, present := td["made.elsewhere"]
		return !present && len(td["made.later"].Partitions) == 1
	})
	if rb.fail.Load() >= 0 {
		t.Fatal("the failing listings were not all made")
	}

	// Without MetadataRefresh a stream made elsewhere is not listed.
	var rb2 *refreshBackend
	g2 := startGatewayWrapped(t, t.TempDir(), func(s *localstore.Store) disbackend.Backend {
		rb2 = &refreshBackend{Store: s}
		return rb2
	})
	adm2 := kadm.NewClient(g2.client(t, kgo.MetadataMinAge(10*time.Millisecond)))
	n0 := rb2.lists.Load()
	name2, err := disbackend.StreamNameFor(rb2, "unseen")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rb2.CreateStream(ctx, disbackend.StreamSpec{Name: name2, TopicName: "unseen", PartitionCount: 1,
		Config: disbackend.StreamConfig{Retention: 24 * time.Hour, MaxMessageBytes: 1 << 20}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	td, err := adm2.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := td["unseen"]; ok || rb2.lists.Load() != n0 {
		t.Errorf("without MetadataRefresh: listed %v after %d listings", td.Names(), rb2.lists.Load()-n0)
	}
}

// describeCounter counts DescribeStream calls.
type describeCounter struct {
	*localstore.Store
	describes atomic.Int64
}

func (b *describeCounter) DescribeStream(ctx context.Context, name string) (disbackend.Stream, error) {
	b.describes.Add(1)
	return b.Store.DescribeStream(ctx, name)
}

// TestUnknownTopicLookups: Metadata requests for a topic that does not
// exist, as a client retrying it sends them, ask the backend about it at
// most once a second (a Java admin's retries once cost a DIS
// DescribeStream each); a topic created through the gateway is known at
// once, and one created behind its back (DIS tools) is found by a
// CreateTopics of it, which answers TOPIC_ALREADY_EXISTS.
func TestUnknownTopicLookups(t *testing.T) {
	var be *describeCounter
	g := startGatewayWrapped(t, t.TempDir(), func(s *localstore.Store) disbackend.Backend {
		be = &describeCounter{Store: s}
		return be
	})
	cl := g.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	metadata := func(topic string) int16 {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].ErrorCode
	}
	before := be.describes.Load()
	start := time.Now()
	const asks = 200
	for range asks {
		if code := metadata("no-such-topic"); code != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("Metadata of a missing topic: code %d, want UNKNOWN_TOPIC_OR_PARTITION", code)
		}
	}
	seconds := int64(time.Since(start)/time.Second) + 1
	if n := be.describes.Load() - before; n > seconds+1 {
		t.Fatalf("%d Metadata requests for a missing topic over %d s asked the backend %d times, want at most one a second", asks, seconds, n)
	}
	// Created through the gateway: known at once.
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "no-such-topic"); err != nil {
		t.Fatal(err)
	}
	if code := metadata("no-such-topic"); code != 0 {
		t.Fatalf("Metadata right after CreateTopics: code %d", code)
	}
	// Created behind the gateway's back right after a lookup said missing.
	if code := metadata("behind"); code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("Metadata of a missing topic: code %d", code)
	}
	if _, err := g.store.CreateStream(ctx, disbackend.StreamSpec{Name: "behind", TopicName: "behind", PartitionCount: 1,
		Config: disbackend.StreamConfig{Retention: time.Hour, MaxMessageBytes: 1 << 20}}); err != nil {
		t.Fatal(err)
	}
	resp, err := adm.CreateTopic(ctx, 1, 1, nil, "behind")
	if !errors.Is(err, kerr.TopicAlreadyExists) && !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
		t.Fatalf("CreateTopics of a topic created behind the gateway: %v %v, want TOPIC_ALREADY_EXISTS", err, resp.Err)
	}
	if code := metadata("behind"); code != 0 {
		t.Fatalf("Metadata after CreateTopics found it: code %d", code)
	}
}
