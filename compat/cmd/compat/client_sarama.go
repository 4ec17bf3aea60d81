package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/IBM/sarama"

	"github.com/disgw/disgw/compat/internal/scen"
)

// saramaClient: IBM/sarama at a Config.Version (nil: sarama's default).
type saramaClient struct {
	broker  string
	version *sarama.KafkaVersion
	name    string
}

func (s saramaClient) config() *sarama.Config {
	cfg := sarama.NewConfig()
	if s.version != nil {
		cfg.Version = *s.version
	}
	cfg.ClientID = "disgw-compat"
	return cfg
}

func (s saramaClient) Create(ctx context.Context, topic string) (string, error) {
	adm, err := sarama.NewClusterAdmin([]string{s.broker}, s.config())
	if err != nil {
		return "", fmt.Errorf("NewClusterAdmin: %w", err)
	}
	defer adm.Close()
	if err := adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: scen.Partitions, ReplicationFactor: 1}, false); err != nil {
		return "", fmt.Errorf("ClusterAdmin.CreateTopic: %w", err)
	}
	mds, err := adm.DescribeTopics([]string{topic})
	if err != nil {
		return "", fmt.Errorf("ClusterAdmin.DescribeTopics: %w", err)
	}
	if len(mds) != 1 || mds[0].Err != sarama.ErrNoError || len(mds[0].Partitions) != scen.Partitions {
		return "", fmt.Errorf("DescribeTopics after create: %+v, want %d partitions", mds, scen.Partitions)
	}
	return fmt.Sprintf("ClusterAdmin.CreateTopic made %d partitions (Version %s)", scen.Partitions, s.config().Version), nil
}

func (s saramaClient) Produce(ctx context.Context, topic string) (string, error) {
	cfg := s.config()
	cfg.Producer.Return.Successes = true
	p, err := sarama.NewSyncProducer([]string{s.broker}, cfg)
	if err != nil {
		return "", fmt.Errorf("NewSyncProducer: %w", err)
	}
	defer p.Close()
	msgs := make([]*sarama.ProducerMessage, scen.N)
	for i := range msgs {
		m := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(scen.Key(i)), Value: sarama.StringEncoder(scen.Value(i))}
		for _, h := range scen.Headers(i, s.name) {
			m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h[0]), Value: []byte(h[1])})
		}
		msgs[i] = m
	}
	if err := p.SendMessages(msgs); err != nil {
		return "", fmt.Errorf("SyncProducer.SendMessages: %w", err)
	}
	return fmt.Sprintf("%d records acknowledged (acks=%d)", scen.N, cfg.Producer.RequiredAcks), nil
}

type saramaHandler struct {
	mu        sync.Mutex
	out       []scen.Rec
	enough    func([]scen.Rec) bool
	done      chan struct{}
	closeOnce sync.Once
}

func (h *saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *saramaHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case <-sess.Context().Done():
			return nil
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			h.mu.Lock()
			if h.enough(h.out) {
				h.mu.Unlock()
				continue
			}
			r := scen.Rec{Partition: m.Partition, Offset: m.Offset, Key: string(m.Key), Value: string(m.Value), Headers: map[string]string{}}
			for _, hd := range m.Headers {
				r.Headers[string(hd.Key)] = string(hd.Value)
			}
			h.out = append(h.out, r)
			sess.MarkMessage(m, "")
			if h.enough(h.out) {
				sess.Commit()
				h.closeOnce.Do(func() { close(h.done) })
			}
			h.mu.Unlock()
		}
	}
}

func (s saramaClient) Consume(ctx context.Context, topic, group string, enough func([]scen.Rec) bool) ([]scen.Rec, error) {
	cfg := s.config()
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Return.Errors = true
	cg, err := sarama.NewConsumerGroup([]string{s.broker}, group, cfg)
	if err != nil {
		return nil, fmt.Errorf("NewConsumerGroup: %w", err)
	}
	h := &saramaHandler{enough: enough, done: make(chan struct{})}
	var lastErr error
	var errMu sync.Mutex
	go func() {
		for err := range cg.Errors() {
			errMu.Lock()
			lastErr = err
			errMu.Unlock()
		}
	}()
	cctx, cancel := context.WithCancel(ctx)
	consumeDone := make(chan struct{})
	go func() {
		defer close(consumeDone)
		for cctx.Err() == nil {
			if err := cg.Consume(cctx, []string{topic}, h); err != nil {
				errMu.Lock()
				lastErr = err
				errMu.Unlock()
				if cctx.Err() == nil {
					select {
					case <-cctx.Done():
					case <-timeAfter(500):
					}
				}
			}
		}
	}()
	select {
	case <-h.done:
	case <-ctx.Done():
	}
	cancel()
	<-consumeDone
	closeErr := cg.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	if !enough(h.out) {
		errMu.Lock()
		defer errMu.Unlock()
		return h.out, fmt.Errorf("timed out with %d records (last error: %v)", len(h.out), lastErr)
	}
	if closeErr != nil {
		return h.out, fmt.Errorf("ConsumerGroup.Close: %w", closeErr)
	}
	return h.out, nil
}

func (s saramaClient) Describe(ctx context.Context, topic, group string) (groupState, error) {
	st := groupState{Members: -1, Committed: map[int32]int64{}, Ends: map[int32]int64{}}
	cfg := s.config()
	cl, err := sarama.NewClient([]string{s.broker}, cfg)
	if err != nil {
		return st, fmt.Errorf("NewClient: %w", err)
	}
	defer cl.Close()
	adm, err := sarama.NewClusterAdminFromClient(cl)
	if err != nil {
		return st, fmt.Errorf("NewClusterAdmin: %w", err)
	}
	gds, err := adm.DescribeConsumerGroups([]string{group})
	if err != nil {
		return st, fmt.Errorf("ClusterAdmin.DescribeConsumerGroups: %w", err)
	}
	if len(gds) != 1 || gds[0].Err != sarama.ErrNoError {
		return st, fmt.Errorf("ClusterAdmin.DescribeConsumerGroups: %+v", gds)
	}
	st.State, st.Members = gds[0].State, len(gds[0].Members)
	parts, err := cl.Partitions(topic)
	if err != nil {
		return st, fmt.Errorf("Client.Partitions: %w", err)
	}
	resp, err := adm.ListConsumerGroupOffsets(group, map[string][]int32{topic: parts})
	if err != nil {
		return st, fmt.Errorf("ClusterAdmin.ListConsumerGroupOffsets: %w", err)
	}
	if resp.Err != sarama.ErrNoError {
		return st, fmt.Errorf("ClusterAdmin.ListConsumerGroupOffsets: %v", resp.Err)
	}
	for _, p := range parts {
		b := resp.GetBlock(topic, p)
		if b == nil {
			return st, fmt.Errorf("ListConsumerGroupOffsets: no block for partition %d", p)
		}
		if b.Err != sarama.ErrNoError {
			return st, fmt.Errorf("ListConsumerGroupOffsets partition %d: %v", p, b.Err)
		}
		if b.Offset >= 0 {
			st.Committed[p] = b.Offset
		}
		end, err := cl.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			return st, fmt.Errorf("Client.GetOffset(newest) partition %d: %w", p, err)
		}
		st.Ends[p] = end
	}
	return st, nil
}
