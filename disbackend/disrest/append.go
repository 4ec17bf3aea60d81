package disrest

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/def"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2/model"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/kafkawire"
)

// writer sends one partition's appends, one PutRecords at a time, in the
// order they were enqueued.
type writer struct {
	s *Store
	k partKey

	// mu guards q and stopped.
	mu      sync.Mutex
	q       []job
	stopped bool
	wake    chan struct{} // cap 1

	pace pacer // only the run goroutine uses it
}

type job struct {
	b disbackend.Batch
	p *disbackend.Pending
}

func (w *writer) enqueue(j job) {
	w.mu.Lock()
	w.q = append(w.q, j)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *writer) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *writer) run() {
	defer w.s.wg.Done()
	for {
		w.mu.Lock()
		if len(w.q) == 0 {
			stopped := w.stopped
			w.mu.Unlock()
			if stopped {
				return
			}
			<-w.wake
			continue
		}
		j := w.q[0]
		w.q[0] = job{}
		w.q = w.q[1:]
		w.mu.Unlock()
		res, err := w.s.appendBatch(w.k, j.b, &w.pace)
		j.p.Complete(res, err)
	}
}

// Append enqueues the batch on the partition's writer; see the package
// comment for what happens to it.
func (s *Store) Append(stream string, part int32, b disbackend.Batch) *disbackend.Pending {
	p := disbackend.NewPending()
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		p.Complete(disbackend.AppendResult{}, fmt.Errorf("disrest: append to %s/%d: %w", stream, part, disbackend.ErrClosed))
		return p
	}
	k := partKey{stream, part}
	w := s.writers[k]
	if w == nil {
		w = &writer{s: s, k: k, wake: make(chan struct{}, 1)}
		s.writers[k] = w
		s.wg.Add(1)
		go w.run()
	}
	w.enqueue(job{b: b, p: p})
	return p
}

// appendBatch writes one batch's records and returns the first one's
// sequence number. Runs on the partition's writer goroutine.
func (s *Store) appendBatch(k partKey, b disbackend.Batch, pc *pacer) (disbackend.AppendResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.RetryTimeout+s.opts.RequestTimeout)
	defer cancel()
	fail := func(err error) (disbackend.AppendResult, error) {
		return disbackend.AppendResult{}, fmt.Errorf("disrest: append to %s/%d: %w", k.stream, k.part, err)
	}
	si, err := s.streamInfo(ctx, k.stream, false)
	if err == nil && k.part >= si.st.PartitionCount {
		si, err = s.streamInfo(ctx, k.stream, true) // grown by another node?
	}
	if err != nil {
		return disbackend.AppendResult{}, err
	}
	if k.part < 0 || k.part >= si.st.PartitionCount {
		return fail(disbackend.ErrPartitionNotFound)
	}
	if b.ProducerID >= 0 {
		dup, err := s.idem.check(k, b)
		if err != nil {
			return fail(err)
		}
		if dup != nil {
			return disbackend.AppendResult{BaseOffset: dup.base, LogStartOffset: s.ranges.first(k), LogAppendTime: -1, Duplicate: true}, nil
		}
	}
	recs, err := kafkawire.DecodeRecords(b.Raw)
	if err != nil {
		return fail(err)
	}
	if len(recs) == 0 {
		return fail(errors.New("batch has no records"))
	}
	logAppend := si.st.Config.TimestampType == disbackend.LogAppendTime
	out := make([]disRecord, len(recs))
	for i := range recs {
		d, err := toDIS(&recs[i], recs[i].TimestampDelta64, s.opts.RecordFormat)
		if err != nil {
			return fail(fmt.Errorf("record %d: %w", i, err))
		}
		if len(d.data) > maxRecordBytes {
			return fail(fmt.Errorf("%w: record %d: %d bytes, more than the %d DIS takes in one record", disbackend.ErrInvalidRecord, i, len(d.data), maxRecordBytes))
		}
		if logAppend {
			d.ts = -1 // DIS stamps it
		}
		out[i] = d
	}
	base := int64(-1)
	var last int64
	for start := 0; start < len(out); {
		end, size := start, 0
		for end < len(out) && end-start < s.opts.BatchCount && (end == start || size+len(out[end].data) <= s.opts.BatchBytes) {
			size += len(out[end].data)
			end++
		}
		sns, err := s.putRecords(ctx, k, out[start:end], pc, si.advanced)
		if err != nil {
			return fail(err)
		}
		for i, sn := range sns {
			if base < 0 {
				base = sn
			} else if want := base + int64(start+i); sn != want {
				// Another writer interleaved, or DIS accepted a later record
				// after refusing an earlier one: the producer is told base,
				// and the records are where DIS put them.
				s.outOfOrder.Add(1)
				s.log.Warn("sequence numbers of a batch not contiguous",
					zap.String("stream", k.stream), zap.Int32("partition", k.part),
					zap.Int64("want", want), zap.Int64("got", sn))
			}
			last = sn
		}
		start = end
	}
	if b.ProducerID >= 0 {
		s.idem.remember(k, b, base, last)
	}
	s.ranges.put(k, disbackend.PartitionRange{First: s.ranges.first(k), Next: last + 1})
	s.notify()
	res := disbackend.AppendResult{BaseOffset: base, LogStartOffset: s.ranges.first(k), LogAppendTime: -1}
	if logAppend {
		res.LogAppendTime = time.Now().UnixMilli() // DIS's own stamp is not returned by PutRecords
	}
	return res, nil
}

// putEntry is a PutRecords entry with the record timestamp, which the SDK's
// model lacks (the Java SDK and the protobuf schema have it).
type putEntry struct {
	Data         string  `json:"data"`
	PartitionID  string  `json:"partition_id"`
	PartitionKey *string `json:"partition_key,omitempty"`
	Timestamp    *int64  `json:"timestamp,omitempty"`
}

type putBody struct {
	StreamName string     `json:"stream_name"`
	Records    []putEntry `json:"records"`
}

type putRequest struct {
	Body *putBody `json:"body,omitempty"`
}

// putRecordsDef is the SDK's SendRecords definition with our request model.
func putRecordsDef() *def.HttpRequestDef {
	return def.NewHttpRequestDefBuilder().
		WithMethod(http.MethodPost).
		WithPath("/v2/{project_id}/records").
		WithResponse(new(model.SendRecordsResponse)).
		WithContentType("application/json").
		WithRequestField(def.NewFieldDef().WithName("Body").WithLocationType(def.Body)).
		Build()
}

// putRecords sends records to partition k and returns their sequence
// numbers. Every request first waits for the partition's pacer. Records refused with a retriable code (DIS.4303, DIS.5xxx) are
// sent again, with backoff and jitter, before anything else of the
// partition; so is the whole request after DIS.4303/4305/4309/5xxx or no
// answer. It gives up after RetryTimeout with ErrUnavailable.
func (s *Store) putRecords(ctx context.Context, k partKey, recs []disRecord, pc *pacer, advanced bool) ([]int64, error) {
	sns := make([]int64, len(recs))
	todo := make([]int, len(recs))
	for i := range todo {
		todo[i] = i
	}
	pid := disbackend.PartitionID(k.part)
	deadline := time.Now().Add(s.opts.RetryTimeout)
	backoff := s.opts.RetryBackoff
	for attempt := 0; ; attempt++ {
		size := 0
		for _, idx := range todo {
			size += len(recs[idx].data)
		}
		if err := pc.wait(ctx, advanced, len(todo), size); err != nil {
			return nil, fmt.Errorf("%w: put records to %s/%d: %v", disbackend.ErrUnavailable, k.stream, k.part, err)
		}
		body := &putBody{StreamName: k.stream, Records: make([]putEntry, len(todo))}
		for i, idx := range todo {
			r := recs[idx]
			e := putEntry{Data: base64.StdEncoding.EncodeToString(r.data), PartitionID: pid, PartitionKey: r.key}
			if r.ts >= 0 {
				ts := r.ts
				e.Timestamp = &ts
			}
			body.Records[i] = e
		}
		rctx, cancel := context.WithTimeout(ctx, s.opts.RequestTimeout)
		resp, err := call(rctx, s, "put records", func() (*model.SendRecordsResponse, error) {
			v, err := s.hc().Sync(&putRequest{Body: body}, putRecordsDef())
			if err != nil {
				return nil, err
			}
			return v.(*model.SendRecordsResponse), nil
		})
		cancel()
		var retry []int
		var lastErr error
		if err != nil {
			var de *disError
			if !errors.As(err, &de) || !de.retriable() {
				if ctx.Err() != nil {
					return nil, fmt.Errorf("%w: %v", disbackend.ErrUnavailable, err)
				}
				return nil, err
			}
			retry, lastErr = todo, err
		} else {
			if resp.Records == nil || len(*resp.Records) != len(todo) {
				return nil, fmt.Errorf("put records: %d results for %d records", lenOf(resp.Records), len(todo))
			}
			failedBefore := false
			for i, r := range *resp.Records {
				idx := todo[i]
				if r.ErrorCode != nil && *r.ErrorCode != "" {
					msg := ""
					if r.ErrorMessage != nil {
						msg = *r.ErrorMessage
					}
					de := &disError{status: 200, code: *r.ErrorCode, message: msg, sentinel: sentinelFor(*r.ErrorCode)}
					if !de.retriable() {
						return nil, fmt.Errorf("put records: record %d: %w", idx, de)
					}
					retry = append(retry, idx)
					lastErr = de
					failedBefore = true
					continue
				}
				if failedBefore {
					s.outOfOrder.Add(1)
					s.log.Warn("DIS accepted a record after refusing an earlier one of the partition",
						zap.String("stream", k.stream), zap.Int32("partition", k.part))
				}
				if r.SequenceNumber == nil {
					return nil, fmt.Errorf("put records: record %d: no sequence number", idx)
				}
				sn, err := strconv.ParseInt(*r.SequenceNumber, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("put records: record %d: sequence number %q", idx, *r.SequenceNumber)
				}
				sns[idx] = sn
			}
		}
		if len(retry) == 0 {
			return sns, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: put records to %s/%d: still refused after %v: %v",
				disbackend.ErrUnavailable, k.stream, k.part, s.opts.RetryTimeout, lastErr)
		}
		todo = retry
		d := backoff/2 + rand.N(backoff/2+1)
		s.log.Debug("retrying put records", zap.String("stream", k.stream), zap.Int32("partition", k.part),
			zap.Int("records", len(todo)), zap.Duration("backoff", d), zap.Error(lastErr))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w: put records to %s/%d: %v", disbackend.ErrUnavailable, k.stream, k.part, ctx.Err())
		case <-t.C:
		}
		backoff = min(2*backoff, maxRetryBackoff)
	}
}

func lenOf[T any](p *[]T) int {
	if p == nil {
		return 0
	}
	return len(*p)
}
