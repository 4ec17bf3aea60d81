package disrest

// putRecords: the PutRecords of a partition's records, each paced
// (pace.go), its answer sorted into records accepted and records to send
// again, retried with backoff until RetryTimeout, and looked for in DIS
// (verify.go) before records whose PutRecords got no answer go again.

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/def"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2/model"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/disapi"
)

// putRequest is the SDK's request of a PutRecords: its body is ours, with
// the records' timestamps, which the SDK's model lacks.
type putRequest struct {
	Body *disapi.PutRecordsRequest `json:"body,omitempty"`
}

// putRecordsBody is the PutRecords body of the records of recs at todo
// (indexes into recs, in order) to partition part of stream: each with its
// data in Base64, its partition_key when it has one and its timestamp
// unless DIS stamps it (ts < 0).
func putRecordsBody(stream string, part int32, recs []disRecord, todo []int) *disapi.PutRecordsRequest {
	pid := disbackend.PartitionID(part)
	body := &disapi.PutRecordsRequest{StreamName: stream, Records: make([]disapi.PutRecordsRequestEntry, len(todo))}
	data := make([]string, len(todo))
	for i, idx := range todo {
		rec := recs[idx]
		data[i] = base64.StdEncoding.EncodeToString(rec.data)
		e := disapi.PutRecordsRequestEntry{Data: &data[i], PartitionID: pid, PartitionKey: rec.key}
		if rec.ts >= 0 {
			ts := rec.ts
			e.Timestamp = &ts
		}
		body.Records[i] = e
	}
	return body
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
// numbers, and how long it waited for DIS's limits (the pacer's waits and
// the backoffs after DIS.4303: the throttle time reported to the producer).
// Every request first waits for the partition's pacer. Records refused with a retriable code (DIS.4303, DIS.5xxx) are
// sent again, with backoff and jitter, before anything else of the
// partition; so is the whole request after DIS.4303/4305/4309/5xxx or no
// answer. It gives up after RetryTimeout with ErrUnavailable.
//
// creds, when not nil, are the principal's the records are written with
// (all of the group's: run never mixes them); a PutRecords DIS refuses
// for them (403 DIS.4116) fails with ErrNotAuthorized, not retried.
//
// The fence is asked for the partition's key before every PutRecords,
// retries included (putRecordsFenced).
func (s *Store) putRecords(ctx context.Context, k partKey, recs []disRecord, ps *putState, advanced bool, creds *disbackend.Credentials) (sns []int64, throttle time.Duration, err error) {
	key := disbackend.PartitionKey(k.stream, k.part)
	return s.putRecordsFenced(ctx, k, recs, ps, advanced, creds, func() error { return s.fenced(key) })
}

// errFenced marks a putRecords that stopped because the fence refused a
// PutRecords (putRun.fence): the error also wraps the fence's.
var errFenced = errors.New("the fence refused the write")

// putRecordsFenced is putRecords asking fence before every PutRecords: an
// error from it ends putRecords with errFenced and that error, the
// records not sent (those accepted by earlier PutRecords are in DIS).
func (s *Store) putRecordsFenced(ctx context.Context, k partKey, recs []disRecord, ps *putState, advanced bool, creds *disbackend.Credentials, fence func() error) (sns []int64, throttle time.Duration, err error) {
	sns, err = s.putRecordsThrottled(ctx, k, recs, ps, advanced, creds, fence, &throttle)
	return sns, throttle, err
}

// putRun is the state of one putRecords across its attempts. Only the
// partition's writer goroutine uses it.
type putRun struct {
	s        *Store
	k        partKey
	recs     []disRecord
	ps       *putState
	advanced bool
	creds    *disbackend.Credentials // nil: the gateway's
	// fence is asked before every PutRecords (fence.go).
	fence func() error
	// throttle adds up the pacer's waits and the backoffs after DIS.4303.
	throttle *time.Duration
	sns      []int64 // by index into recs, set as DIS accepts them
	todo     []int   // indexes into recs still to be written, in order
	deadline time.Time
	backoff  time.Duration // of the next retry, before jitter
	// unverified: the last PutRecords got no answer and DIS may have
	// applied it; look (verifyPut) before sending its records again.
	unverified bool
	lastErr    error // the last reason to send records again
}

// putOutcome is what one PutRecords came to, as classify sorts it and
// apply carries it out.
type putOutcome struct {
	accepted []acceptedRecord // in the call's order
	retry    []int            // indexes into recs to send again, in order
	limited  bool             // a DIS.4303 among the reasons to retry
	// maybeApplied: no answer, or DIS failed, while the partition's next
	// sequence number is known: DIS may have written the records.
	maybeApplied bool
	reason       error // the last reason to retry
	// outOfOrder are the records DIS accepted after refusing an earlier
	// one of the call: the first of each run of acceptances.
	outOfOrder []int
	// fatal, when set, ends putRecords: what precedes it in the answer is
	// still in the outcome (apply then only warns and notes the pressure).
	fatal error
}

type acceptedRecord struct {
	idx int // into recs
	sn  int64
}

// putRecordsThrottled is putRecords, adding to *throttle as it waits. Each
// attempt paces, asks the fence, sends, classifies the answer and applies it; an attempt
// that leaves records to send again backs off first (backOff), and one
// whose PutRecords may have been applied without an answer is checked
// (verifyPut) before its records go again.
func (s *Store) putRecordsThrottled(ctx context.Context, k partKey, recs []disRecord, ps *putState, advanced bool, creds *disbackend.Credentials, fence func() error, throttle *time.Duration) ([]int64, error) {
	r := &putRun{s: s, k: k, recs: recs, ps: ps, advanced: advanced, creds: creds, fence: fence, throttle: throttle,
		sns: make([]int64, len(recs)), todo: make([]int, len(recs)),
		deadline: time.Now().Add(s.opts.RetryTimeout), backoff: s.opts.RetryBackoff}
	for i := range r.todo {
		r.todo[i] = i
	}
	s.learn(ctx, k, ps)
	for attempt := 0; ; attempt++ {
		if r.unverified {
			if left, ok := s.verifyPut(ctx, k, recs, r.todo, r.sns, ps); ok {
				r.unverified, r.todo = false, left
				if len(r.todo) == 0 {
					return r.sns, nil
				}
			}
		}
		out := putOutcome{retry: r.todo} // still unverified: DIS could not be asked; ask again after the backoff
		if !r.unverified {
			size, err := r.pace(ctx)
			if err != nil {
				return nil, err
			}
			if err := r.fence(); err != nil {
				return nil, fmt.Errorf("%w: %w", errFenced, err)
			}
			sendCtx := ctx
			if bp := s.beforePut; bp != nil && bp(k.stream, k.part) {
				// The failpoint of the late write (tests) held the writer:
				// a writer paused just before its request leaves. The
				// request leaves when it resumes, however long the pause
				// (past ctx's deadline too), as it would from a paused
				// process.
				sendCtx = context.WithoutCancel(ctx)
			}
			resp, err := r.send(sendCtx, size)
			out = r.classify(sendCtx, resp, err)
			r.apply(out)
			if out.fatal != nil {
				return nil, out.fatal
			}
			if len(out.retry) == 0 {
				return r.sns, nil
			}
		}
		if err := r.backOff(ctx, attempt, out); err != nil {
			return nil, err
		}
		r.todo = out.retry
	}
}

// pace waits until the partition's pacer lets the records still to be
// written go, and adds the wait to the throttle time. It returns their data
// bytes; an error (ctx ended) wraps ErrUnavailable.
func (r *putRun) pace(ctx context.Context) (size int, err error) {
	for _, idx := range r.todo {
		size += len(r.recs[idx].data)
	}
	waited, err := r.ps.wait(ctx, r.advanced, len(r.todo), size)
	*r.throttle += waited
	r.s.opts.Metrics.Throttled(waited)
	if err != nil {
		return 0, fmt.Errorf("%w: put records to %s/%d: %v", disbackend.ErrUnavailable, r.k.stream, r.k.part, err)
	}
	return size, nil
}

// send writes the records still to be written, size bytes of data, with
// one PutRecords bounded by RequestTimeout (callToEnd: it waits for the
// request to end even when ctx ends first), then charges the pacer with
// them, whatever the answer.
func (r *putRun) send(ctx context.Context, size int) (*model.SendRecordsResponse, error) {
	s := r.s
	body := putRecordsBody(r.k.stream, r.k.part, r.recs, r.todo)
	rctx, cancel := context.WithTimeout(disbackend.WithCredentials(ctx, r.creds), s.opts.RequestTimeout)
	hc := s.hcOf(r.creds)
	resp, err := callToEnd(rctx, s, "put records", func() (*model.SendRecordsResponse, error) {
		v, err := hc.Sync(&putRequest{Body: body}, putRecordsDef())
		if err != nil {
			return nil, err
		}
		return v.(*model.SendRecordsResponse), nil
	})
	cancel()
	s.opts.Metrics.PutRecords(len(r.todo), size)
	r.ps.charge(time.Now(), r.advanced, len(r.todo), size)
	return resp, err
}

// classify sorts what a PutRecords came to, its answer or its error, into
// a putOutcome. It changes nothing; apply does.
func (r *putRun) classify(ctx context.Context, resp *model.SendRecordsResponse, err error) putOutcome {
	if err != nil {
		return r.classifyError(ctx, err)
	}
	return r.classifyAnswer(resp)
}

// classifyError: the whole PutRecords failed. A retriable failure (see
// disError.retriable; also this request's own timeout) sends every record
// again, after a look (maybeApplied) when there was no answer or DIS
// failed; any other is fatal, as ErrUnavailable once ctx has ended.
func (r *putRun) classifyError(ctx context.Context, err error) putOutcome {
	var de *disError
	if !errors.As(err, &de) && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		// This request's own timeout: no answer, like a dropped
		// connection.
		de = &disError{cause: err, sentinel: disbackend.ErrUnavailable}
	}
	if de == nil || !de.retriable() {
		if ctx.Err() != nil {
			return putOutcome{fatal: fmt.Errorf("%w: %v", disbackend.ErrUnavailable, err)}
		}
		return putOutcome{fatal: err}
	}
	return putOutcome{
		retry: r.todo, reason: err, limited: de.flowControl(),
		// No answer, or DIS failed: it may have written them.
		maybeApplied: r.ps.known && (de.status == 0 || de.status >= 500),
	}
}

// classifyAnswer sorts an answer's records, in order: accepted with their
// sequence numbers, refused with a retriable code (DIS.4303, DIS.5xxx) to
// send again, and accepted after a refusal (outOfOrder). A refusal that is
// not retriable, a record without a valid sequence number, or an answer
// that does not match the request is fatal.
func (r *putRun) classifyAnswer(resp *model.SendRecordsResponse) putOutcome {
	var out putOutcome
	if resp.Records == nil || len(*resp.Records) != len(r.todo) {
		out.fatal = fmt.Errorf("put records: %d results for %d records", lenOf(resp.Records), len(r.todo))
		return out
	}
	out.accepted = make([]acceptedRecord, 0, len(r.todo))
	failedBefore := false
	for i, e := range *resp.Records {
		idx := r.todo[i]
		if e.ErrorCode != nil && *e.ErrorCode != "" {
			de := refusal(e)
			if !de.retriable() {
				out.fatal = fmt.Errorf("put records: record %d: %w", idx, de)
				return out
			}
			out.retry, out.reason = append(out.retry, idx), de
			out.limited = out.limited || de.flowControl()
			failedBefore = true
			continue
		}
		if failedBefore {
			failedBefore = false // one warning per run of refusals
			out.outOfOrder = append(out.outOfOrder, idx)
		}
		if e.SequenceNumber == nil {
			out.fatal = fmt.Errorf("put records: record %d: no sequence number", idx)
			return out
		}
		sn, err := strconv.ParseInt(*e.SequenceNumber, 10, 64)
		if err != nil {
			out.fatal = fmt.Errorf("put records: record %d: sequence number %q", idx, *e.SequenceNumber)
			return out
		}
		out.accepted = append(out.accepted, acceptedRecord{idx: idx, sn: sn})
	}
	return out
}

// refusal is the disError of a record that a PutRecords answer refused.
func refusal(e model.PutRecordsResultEntry) *disError {
	msg := ""
	if e.ErrorMessage != nil {
		msg = *e.ErrorMessage
	}
	return &disError{status: 200, code: *e.ErrorCode, message: msg, sentinel: sentinelFor(*e.ErrorCode)}
}

// apply carries out an outcome: a DIS.4303 marks the partition as pressed
// (pacer.underPressure), and each record accepted out of order is logged
// and counted (OutOfOrder). Unless the outcome is fatal, the accepted
// records get their sequence numbers, the partition's next one advances
// (putState.advance), and the run notes whether to look before sending
// again and why it retries.
func (r *putRun) apply(out putOutcome) {
	if out.limited {
		r.ps.pressed = time.Now()
	}
	for _, idx := range out.outOfOrder {
		r.s.log.Warn("DIS accepted a record after refusing an earlier one of the partition",
			zap.String("stream", r.k.stream), zap.Int32("partition", r.k.part),
			zap.Int("record", idx), zap.Int64("out_of_order_total", r.s.outOfOrder.Add(1)))
	}
	if out.fatal != nil {
		return
	}
	sns := make([]int64, len(out.accepted))
	for i, a := range out.accepted {
		r.sns[a.idx], sns[i] = a.sn, a.sn
	}
	r.ps.advance(sns)
	r.unverified = out.maybeApplied
	if out.reason != nil {
		r.lastErr = out.reason
	}
}

// backOff comes between an attempt that left out.retry to send and the
// next: past the deadline (RetryTimeout) it gives up with ErrUnavailable;
// otherwise it sleeps the backoff with jitter, counted as throttle time
// when DIS.4303 was among the reasons, and doubles it up to
// maxRetryBackoff. DIS failing (not its rate limits, which pacing meets)
// is warned about once per putRecords, not per retry.
func (r *putRun) backOff(ctx context.Context, attempt int, out putOutcome) error {
	s, k := r.s, r.k
	if time.Now().After(r.deadline) {
		s.log.Warn("put records failed: giving up", zap.String("stream", k.stream), zap.Int32("partition", k.part),
			zap.Int("records", len(out.retry)), zap.Duration("retried_for", s.opts.RetryTimeout), zap.Error(r.lastErr))
		return fmt.Errorf("%w: put records to %s/%d: still refused after %v: %v",
			disbackend.ErrUnavailable, k.stream, k.part, s.opts.RetryTimeout, r.lastErr)
	}
	if attempt == 0 && !out.limited {
		s.log.Warn("put records failed: retrying", zap.String("stream", k.stream), zap.Int32("partition", k.part),
			zap.Int("records", len(out.retry)), zap.Error(r.lastErr))
	}
	d := r.backoff/2 + rand.N(r.backoff/2+1)
	s.log.Debug("retrying put records", zap.String("stream", k.stream), zap.Int32("partition", k.part),
		zap.Int("records", len(out.retry)), zap.Duration("backoff", d), zap.Error(r.lastErr))
	t := time.NewTimer(d)
	select {
	case <-ctx.Done():
		t.Stop()
		return fmt.Errorf("%w: put records to %s/%d: %v", disbackend.ErrUnavailable, k.stream, k.part, ctx.Err())
	case <-t.C:
	}
	if out.limited {
		*r.throttle += d
		s.opts.Metrics.Throttled(d)
	}
	r.backoff = min(2*r.backoff, maxRetryBackoff)
	return nil
}

func lenOf[T any](p *[]T) int {
	if p == nil {
		return 0
	}
	return len(*p)
}
