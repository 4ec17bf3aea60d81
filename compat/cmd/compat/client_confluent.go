package main

import (
	"context"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/disgw/disgw/compat/internal/scen"
)

// confluentClient: confluent-kafka-go with its bundled librdkafka.
// groupProtocol, when set, is the consumers' group.protocol ("consumer":
// KIP-848's ConsumerGroupHeartbeat in place of JoinGroup/SyncGroup); name
// is the row's, written into the records' client header.
type confluentClient struct {
	broker, name, groupProtocol string
}

func (c confluentClient) Create(ctx context.Context, topic string) (string, error) {
	adm, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": c.broker})
	if err != nil {
		return "", err
	}
	defer adm.Close()
	res, err := adm.CreateTopics(ctx, []kafka.TopicSpecification{{Topic: topic, NumPartitions: scen.Partitions, ReplicationFactor: 1}})
	if err != nil {
		return "", fmt.Errorf("AdminClient.CreateTopics: %w", err)
	}
	if len(res) != 1 || res[0].Error.Code() != kafka.ErrNoError {
		return "", fmt.Errorf("AdminClient.CreateTopics: %v", res)
	}
	md, err := adm.GetMetadata(&topic, false, 10000)
	if err != nil {
		return "", fmt.Errorf("AdminClient.GetMetadata: %w", err)
	}
	if tm := md.Topics[topic]; tm.Error.Code() != kafka.ErrNoError || len(tm.Partitions) != scen.Partitions {
		return "", fmt.Errorf("metadata after create: %v, %d partitions, want %d", tm.Error, len(tm.Partitions), scen.Partitions)
	}
	return fmt.Sprintf("AdminClient.CreateTopics made %d partitions", scen.Partitions), nil
}

func (c confluentClient) Produce(ctx context.Context, topic string) (string, error) {
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": c.broker})
	if err != nil {
		return "", err
	}
	defer p.Close()
	dr := make(chan kafka.Event, scen.N)
	for i := 0; i < scen.N; i++ {
		m := &kafka.Message{
			TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny},
			Key:            []byte(scen.Key(i)),
			Value:          []byte(scen.Value(i)),
		}
		for _, h := range scen.Headers(i, c.name) {
			m.Headers = append(m.Headers, kafka.Header{Key: h[0], Value: []byte(h[1])})
		}
		if err := p.Produce(m, dr); err != nil {
			return "", fmt.Errorf("Producer.Produce record %d: %w", i, err)
		}
	}
	for i := 0; i < scen.N; i++ {
		select {
		case e := <-dr:
			m, ok := e.(*kafka.Message)
			if !ok {
				return "", fmt.Errorf("delivery report %d: %v", i, e)
			}
			if m.TopicPartition.Error != nil {
				return "", fmt.Errorf("delivery report of %s: %w", m.Key, m.TopicPartition.Error)
			}
		case <-ctx.Done():
			return "", fmt.Errorf("%d of %d delivery reports before the deadline", i, scen.N)
		}
	}
	return fmt.Sprintf("%d delivery reports without error (librdkafka defaults: idempotent, acks=all)", scen.N), nil
}

func (c confluentClient) Consume(ctx context.Context, topic, group string, enough func([]scen.Rec) bool) ([]scen.Rec, error) {
	cfg := kafka.ConfigMap{
		"bootstrap.servers":  c.broker,
		"group.id":           group,
		"auto.offset.reset":  "earliest",
		"enable.auto.commit": false,
	}
	if c.groupProtocol != "" {
		// With group.protocol=consumer librdkafka refuses
		// session.timeout.ms, heartbeat.interval.ms,
		// partition.assignment.strategy and group.protocol.type (the
		// coordinator owns them): none is set here.
		cfg["group.protocol"] = c.groupProtocol
	}
	co, err := kafka.NewConsumer(&cfg)
	if err != nil {
		return nil, err
	}
	defer co.Close()
	if err := co.Subscribe(topic, nil); err != nil {
		return nil, fmt.Errorf("Consumer.Subscribe: %w", err)
	}
	var out []scen.Rec
	var lastErr error
	for !enough(out) && ctx.Err() == nil {
		ev := co.Poll(200)
		switch e := ev.(type) {
		case *kafka.Message:
			if e.TopicPartition.Error != nil {
				lastErr = e.TopicPartition.Error
				continue
			}
			r := scen.Rec{Partition: e.TopicPartition.Partition, Offset: int64(e.TopicPartition.Offset), Key: string(e.Key), Value: string(e.Value), Headers: map[string]string{}}
			for _, h := range e.Headers {
				r.Headers[h.Key] = string(h.Value)
			}
			out = append(out, r)
		case kafka.Error:
			lastErr = e
		}
	}
	if !enough(out) {
		return out, fmt.Errorf("timed out with %d records (last error: %v)", len(out), lastErr)
	}
	var tps []kafka.TopicPartition
	for p, o := range scen.Committed(out) {
		tps = append(tps, kafka.TopicPartition{Topic: &topic, Partition: p, Offset: kafka.Offset(o)})
	}
	if _, err := co.CommitOffsets(tps); err != nil {
		return out, fmt.Errorf("Consumer.CommitOffsets: %w", err)
	}
	if err := co.Close(); err != nil {
		return out, fmt.Errorf("Consumer.Close: %w", err)
	}
	return out, nil
}

func (c confluentClient) Describe(ctx context.Context, topic, group string) (groupState, error) {
	st := groupState{Members: -1, Committed: map[int32]int64{}, Ends: map[int32]int64{}}
	adm, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": c.broker})
	if err != nil {
		return st, err
	}
	defer adm.Close()
	dg, err := adm.DescribeConsumerGroups(ctx, []string{group})
	if err != nil {
		return st, fmt.Errorf("AdminClient.DescribeConsumerGroups: %w", err)
	}
	if len(dg.ConsumerGroupDescriptions) != 1 || dg.ConsumerGroupDescriptions[0].Error.Code() != kafka.ErrNoError {
		return st, fmt.Errorf("AdminClient.DescribeConsumerGroups: %+v", dg.ConsumerGroupDescriptions)
	}
	d := dg.ConsumerGroupDescriptions[0]
	st.State, st.Members = d.State.String(), len(d.Members)
	if c.groupProtocol == "consumer" && d.Type != kafka.ConsumerGroupTypeConsumer {
		return st, fmt.Errorf("AdminClient.DescribeConsumerGroups: group type %s, want %s (the consumers used group.protocol=consumer)", d.Type, kafka.ConsumerGroupTypeConsumer)
	}
	md, err := adm.GetMetadata(&topic, false, 10000)
	if err != nil {
		return st, fmt.Errorf("AdminClient.GetMetadata: %w", err)
	}
	var tps []kafka.TopicPartition
	specs := map[kafka.TopicPartition]kafka.OffsetSpec{}
	for _, p := range md.Topics[topic].Partitions {
		tps = append(tps, kafka.TopicPartition{Topic: &topic, Partition: p.ID})
		specs[kafka.TopicPartition{Topic: &topic, Partition: p.ID}] = kafka.LatestOffsetSpec
	}
	ofs, err := adm.ListConsumerGroupOffsets(ctx, []kafka.ConsumerGroupTopicPartitions{{Group: group, Partitions: tps}})
	if err != nil {
		return st, fmt.Errorf("AdminClient.ListConsumerGroupOffsets: %w", err)
	}
	for _, g := range ofs.ConsumerGroupsTopicPartitions {
		for _, tp := range g.Partitions {
			if tp.Error != nil {
				return st, fmt.Errorf("ListConsumerGroupOffsets partition %d: %w", tp.Partition, tp.Error)
			}
			if tp.Offset >= 0 {
				st.Committed[tp.Partition] = int64(tp.Offset)
			}
		}
	}
	lo, err := adm.ListOffsets(ctx, specs)
	if err != nil {
		return st, fmt.Errorf("AdminClient.ListOffsets: %w", err)
	}
	for tp, r := range lo.ResultInfos {
		if r.Error.Code() != kafka.ErrNoError {
			return st, fmt.Errorf("ListOffsets partition %d: %v", tp.Partition, r.Error)
		}
		st.Ends[tp.Partition] = int64(r.Offset)
	}
	return st, nil
}

var _ = time.Second
