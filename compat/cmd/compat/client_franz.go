package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strconv"
	"strings"

	saslplain "github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/disgw/disgw/compat/internal/scen"
)

// franzClient: kgo with default options (only the seed broker) for the
// producer, kadm for admin; the group consumer adds the group, the topic,
// the start offset and manual commits.
type franzClient struct{ broker string }

// seeds are the seed brokers (f.broker, comma-separated) and, on a SASL or TLS row, the dialer and
// SASL mechanism of its security settings (scen.SecurityFromEnv).
func (f franzClient) seeds() []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(strings.Split(f.broker, ",")...)}
	sec := scen.SecurityFromEnv()
	if sec.TLS() {
		pool := x509.NewCertPool()
		if pem, err := os.ReadFile(sec.CAFile); err == nil {
			pool.AppendCertsFromPEM(pem)
		}
		opts = append(opts, kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	}
	if sec.SASL() {
		switch sec.Mechanism {
		case "PLAIN":
			opts = append(opts, kgo.SASL(saslplain.Auth{User: sec.Username, Pass: sec.Password}.AsMechanism()))
		case "SCRAM-SHA-256":
			opts = append(opts, kgo.SASL(scram.Auth{User: sec.Username, Pass: sec.Password}.AsSha256Mechanism()))
		case "SCRAM-SHA-512":
			opts = append(opts, kgo.SASL(scram.Auth{User: sec.Username, Pass: sec.Password}.AsSha512Mechanism()))
		}
	}
	return opts
}

func (f franzClient) admin() (*kadm.Client, func(), error) {
	cl, err := kgo.NewClient(f.seeds()...)
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl.Close, nil
}

func (f franzClient) Create(ctx context.Context, topic string) (string, error) {
	adm, done, err := f.admin()
	if err != nil {
		return "", err
	}
	defer done()
	resp, err := adm.CreateTopic(ctx, scen.Partitions, 1, nil, topic)
	if err != nil {
		return "", fmt.Errorf("kadm CreateTopic: %w", err)
	}
	if resp.Err != nil {
		return "", fmt.Errorf("kadm CreateTopic: %v (%s)", resp.Err, resp.ErrMessage)
	}
	tds, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return "", fmt.Errorf("kadm ListTopics: %w", err)
	}
	td := tds[topic]
	if td.Err != nil || len(td.Partitions) != scen.Partitions {
		return "", fmt.Errorf("kadm ListTopics after create: err %v, %d partitions, want %d", td.Err, len(td.Partitions), scen.Partitions)
	}
	return fmt.Sprintf("kadm CreateTopic made %d partitions", scen.Partitions), nil
}

func (f franzClient) Produce(ctx context.Context, topic string) (string, error) {
	cl, err := kgo.NewClient(f.seeds()...)
	if err != nil {
		return "", err
	}
	defer cl.Close()
	recs := make([]*kgo.Record, scen.N)
	for i := range recs {
		r := &kgo.Record{Topic: topic, Key: []byte(scen.Key(i)), Value: []byte(scen.Value(i))}
		for _, h := range scen.Headers(i, "franz-go") {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: h[0], Value: []byte(h[1])})
		}
		recs[i] = r
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return "", fmt.Errorf("ProduceSync (idempotent, acks=all): %w", err)
	}
	return fmt.Sprintf("%d records acknowledged (idempotent, acks=all)", scen.N), nil
}

func (f franzClient) Consume(ctx context.Context, topic, group string, enough func([]scen.Rec) bool) ([]scen.Rec, error) {
	cl, err := kgo.NewClient(append(f.seeds(),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
	)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var out []scen.Rec
	var processed []*kgo.Record
	var lastErr error
	for !enough(out) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		fs.EachError(func(t string, p int32, err error) { lastErr = fmt.Errorf("fetch %s[%d]: %w", t, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if enough(out) {
				return
			}
			rec := scen.Rec{Partition: r.Partition, Offset: r.Offset, Key: string(r.Key), Value: string(r.Value), Headers: map[string]string{}}
			for _, h := range r.Headers {
				rec.Headers[h.Key] = string(h.Value)
			}
			out = append(out, rec)
			processed = append(processed, r)
		})
	}
	if !enough(out) {
		return out, fmt.Errorf("timed out with %d records (last error: %v)", len(out), lastErr)
	}
	cctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if err := cl.CommitRecords(cctx, processed...); err != nil {
		return out, fmt.Errorf("CommitRecords: %w", err)
	}
	return out, nil
}

func (f franzClient) Describe(ctx context.Context, topic, group string) (groupState, error) {
	adm, done, err := f.admin()
	if err != nil {
		return groupState{}, err
	}
	defer done()
	st := groupState{Members: -1, Committed: map[int32]int64{}, Ends: map[int32]int64{}}
	dgs, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return st, fmt.Errorf("kadm DescribeGroups: %w", err)
	}
	dg := dgs[group]
	if dg.Err != nil {
		return st, fmt.Errorf("kadm DescribeGroups: %v", dg.Err)
	}
	st.State, st.Members = dg.State, len(dg.Members)
	ors, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return st, fmt.Errorf("kadm FetchOffsets: %w", err)
	}
	if err := ors.Error(); err != nil {
		return st, fmt.Errorf("kadm FetchOffsets: %w", err)
	}
	ors.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic {
			st.Committed[o.Partition] = o.At
		}
	})
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return st, fmt.Errorf("kadm ListEndOffsets: %w", err)
	}
	ends.Each(func(o kadm.ListedOffset) { st.Ends[o.Partition] = o.Offset })
	return st, nil
}

var _ = strconv.Itoa
