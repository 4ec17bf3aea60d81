package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/disgw/disgw/compat/internal/scen"
)

// kafkaGoClient: segmentio/kafka-go. Its Writer's default RequiredAcks is
// RequireNone (acks=0); requireAll sets kafka.RequireAll.
type kafkaGoClient struct {
	broker     string
	requireAll bool
	name       string
}

func (k kafkaGoClient) client() *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(k.broker), Timeout: adminTimeout}
}

func (k kafkaGoClient) Create(ctx context.Context, topic string) (string, error) {
	cl := k.client()
	resp, err := cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{
		Topics: []kafka.TopicConfig{{Topic: topic, NumPartitions: scen.Partitions, ReplicationFactor: 1}},
	})
	if err != nil {
		return "", fmt.Errorf("Client.CreateTopics: %w", err)
	}
	if err := resp.Errors[topic]; err != nil {
		return "", fmt.Errorf("Client.CreateTopics: %w", err)
	}
	md, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return "", fmt.Errorf("Client.Metadata: %w", err)
	}
	if len(md.Topics) != 1 || md.Topics[0].Error != nil || len(md.Topics[0].Partitions) != scen.Partitions {
		return "", fmt.Errorf("metadata after create: %+v, want %d partitions", md.Topics, scen.Partitions)
	}
	return fmt.Sprintf("Client.CreateTopics made %d partitions", scen.Partitions), nil
}

func (k kafkaGoClient) Produce(ctx context.Context, topic string) (string, error) {
	w := &kafka.Writer{Addr: kafka.TCP(k.broker), Topic: topic}
	acks := "default RequiredAcks (RequireNone, acks=0)"
	if k.requireAll {
		w.RequiredAcks = kafka.RequireAll
		acks = "RequireAll (acks=-1)"
	}
	msgs := make([]kafka.Message, scen.N)
	for i := range msgs {
		m := kafka.Message{Key: []byte(scen.Key(i)), Value: []byte(scen.Value(i))}
		for _, h := range scen.Headers(i, k.name) {
			m.Headers = append(m.Headers, kafka.Header{Key: h[0], Value: []byte(h[1])})
		}
		msgs[i] = m
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		w.Close()
		return "", fmt.Errorf("Writer.WriteMessages (%s): %w", acks, err)
	}
	if err := w.Close(); err != nil {
		return "", fmt.Errorf("Writer.Close: %w", err)
	}
	// With acks=0 nothing says the records arrived: count them.
	// (A few seconds' grace: acks=0 does not wait for the append.)
	var ends map[int32]int64
	var total int64
	for deadline := time.Now().Add(5 * time.Second); ; {
		var err error
		ends, err = k.endOffsets(ctx, topic)
		if err != nil {
			return "", err
		}
		total = 0
		for _, e := range ends {
			total += e
		}
		if total == scen.N || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if total != scen.N {
		return "", fmt.Errorf("after WriteMessages (%s) the end offsets %s add up to %d, want %d", acks, scen.FmtOffsets(ends), total, scen.N)
	}
	return fmt.Sprintf("%d records written with %s; end offsets %s", scen.N, acks, scen.FmtOffsets(ends)), nil
}

func (k kafkaGoClient) endOffsets(ctx context.Context, topic string) (map[int32]int64, error) {
	cl := k.client()
	md, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return nil, fmt.Errorf("Client.Metadata: %w", err)
	}
	if len(md.Topics) != 1 || md.Topics[0].Error != nil {
		return nil, fmt.Errorf("Client.Metadata: %+v", md.Topics)
	}
	var reqs []kafka.OffsetRequest
	for _, p := range md.Topics[0].Partitions {
		reqs = append(reqs, kafka.LastOffsetOf(p.ID))
	}
	resp, err := cl.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}})
	if err != nil {
		return nil, fmt.Errorf("Client.ListOffsets: %w", err)
	}
	ends := map[int32]int64{}
	for _, po := range resp.Topics[topic] {
		if po.Error != nil {
			return nil, fmt.Errorf("Client.ListOffsets partition %d: %w", po.Partition, po.Error)
		}
		ends[int32(po.Partition)] = po.LastOffset
	}
	return ends, nil
}

func (k kafkaGoClient) Consume(ctx context.Context, topic, group string, enough func([]scen.Rec) bool) ([]scen.Rec, error) {
	var mu sync.Mutex
	var lastErr string
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:     []string{k.broker},
		GroupID:     group,
		Topic:       topic,
		StartOffset: kafka.FirstOffset,
		MaxWait:     500 * time.Millisecond,
		ErrorLogger: kafka.LoggerFunc(func(f string, a ...any) {
			mu.Lock()
			lastErr = fmt.Sprintf(f, a...)
			mu.Unlock()
		}),
	})
	defer r.Close()
	var out []scen.Rec
	var msgs []kafka.Message
	for !enough(out) {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			mu.Lock()
			defer mu.Unlock()
			return out, fmt.Errorf("FetchMessage after %d records: %v (reader's last error: %s)", len(out), err, lastErr)
		}
		rec := scen.Rec{Partition: int32(m.Partition), Offset: m.Offset, Key: string(m.Key), Value: string(m.Value), Headers: map[string]string{}}
		for _, h := range m.Headers {
			rec.Headers[h.Key] = string(h.Value)
		}
		out = append(out, rec)
		msgs = append(msgs, m)
	}
	cctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if err := r.CommitMessages(cctx, msgs...); err != nil {
		return out, fmt.Errorf("Reader.CommitMessages: %w", err)
	}
	if err := r.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return out, fmt.Errorf("Reader.Close: %w", err)
	}
	return out, nil
}

func (k kafkaGoClient) Describe(ctx context.Context, topic, group string) (groupState, error) {
	st := groupState{Members: -1, Committed: map[int32]int64{}, Ends: map[int32]int64{}}
	cl := k.client()
	dg, err := cl.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
	if err != nil {
		return st, fmt.Errorf("Client.DescribeGroups: %w", err)
	}
	if len(dg.Groups) != 1 || dg.Groups[0].Error != nil {
		return st, fmt.Errorf("Client.DescribeGroups: %+v", dg.Groups)
	}
	st.State, st.Members = dg.Groups[0].GroupState, len(dg.Groups[0].Members)
	ends, err := k.endOffsets(ctx, topic)
	if err != nil {
		return st, err
	}
	st.Ends = ends
	var parts []int
	for p := range ends {
		parts = append(parts, int(p))
	}
	of, err := cl.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: parts}})
	if err != nil {
		return st, fmt.Errorf("Client.OffsetFetch: %w", err)
	}
	if of.Error != nil {
		return st, fmt.Errorf("Client.OffsetFetch: %w", of.Error)
	}
	for _, p := range of.Topics[topic] {
		if p.Error != nil {
			return st, fmt.Errorf("Client.OffsetFetch partition %d: %w", p.Partition, p.Error)
		}
		if p.CommittedOffset >= 0 {
			st.Committed[int32(p.Partition)] = p.CommittedOffset
		}
	}
	return st, nil
}
