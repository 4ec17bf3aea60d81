package disrest

import (
	"fmt"
	"slices"
	"sync"
	"time"
	"unsafe"

	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/kafkawire/batch"
)

// writer is one partition's accumulator: it merges the records of
// consecutive Appends into one PutRecords when they arrive within Linger of
// the first waiting one, up to BatchBytes or BatchCount (a full batch goes
// at once), and sends them one PutRecords at a time, in the order they were
// enqueued.
type writer struct {
	s *Store
	k partKey

	// mu guards q, qRecs, qBytes, stopped and lost.
	mu      sync.Mutex
	q       []job
	qRecs   int // records waiting in q
	qBytes  int // raw bytes waiting in q
	stopped bool
	// lost: the partition moved to another node (viewChanged): what is
	// queued fails with ErrNotLeader instead of being sent.
	lost bool
	wake chan struct{} // cap 1
	// after, when not nil, is the done of the partition's previous writer
	// (dropped by viewChanged), awaited before the first write; done is
	// closed when run returns.
	after <-chan struct{}
	done  chan struct{}

	put putState // only the run goroutine uses it
}

type job struct {
	b   disbackend.Batch
	p   *disbackend.Pending
	at  time.Time // enqueued
	mem int       // bytes held while it waits: Raw, and the decompressed records of a compressed batch
	// src, for a compactor's copy job, is the offset each record copies
	// (compact.go); nil for a producer's batch.
	src []int64
	// key is the fence key the job is written under (fence.go): the
	// partition's PartitionKey, or for the gateway's shared streams
	// (sharedStream) the key of what the record is about.
	key string
}

func (j *job) size() int { return len(j.b.Raw) }

// jobMem is what a waiting batch holds in memory, in bytes: its raw
// bytes, its decoded records (the Record and RecordHeader values) and,
// when it is compressed, the decompressed data they alias.
func jobMem(b *disbackend.Batch) int {
	n := len(b.Raw) + len(b.Records)*int(unsafe.Sizeof(disbackend.Record{}))
	compressed := b.Codec() != batch.CodecNone || b.Raw == nil // nil: the compactor's, records of their own
	for i := range b.Records {
		r := &b.Records[i]
		n += len(r.Headers) * int(unsafe.Sizeof(disbackend.RecordHeader{}))
		if compressed {
			n += batch.RecordLen(r, 0, 0)
		}
	}
	return n
}

// sleepUnlocked releases w.mu (held by the caller) and waits up to d, or
// until signal wakes the writer.
func (w *writer) sleepUnlocked(d time.Duration) {
	w.mu.Unlock()
	t := time.NewTimer(d)
	select {
	case <-w.wake:
	case <-t.C:
	}
	t.Stop()
}

func (w *writer) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *writer) enqueue(j job) {
	w.mu.Lock()
	w.q = append(w.q, j)
	w.qRecs += int(j.b.NumRecords)
	w.qBytes += j.size()
	w.mu.Unlock()
	w.signal()
}

func (w *writer) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	w.signal()
}

// drop stops the writer of a partition this node no longer leads: the
// queued jobs fail with ErrNotLeader at once; the group being sent ends
// (its fence checks refuse it), and what it gives back fails too.
func (w *writer) drop() {
	w.mu.Lock()
	w.stopped, w.lost = true, true
	w.failLost()
	w.signal()
}

// failLost fails the queued jobs of a dropped writer (w.mu held; released).
func (w *writer) failLost() {
	q := w.q
	w.q, w.qRecs, w.qBytes = nil, 0, 0
	w.mu.Unlock()
	for i := range q {
		w.s.complete(&q[i], disbackend.AppendResult{}, fmt.Errorf("disrest: append to %s/%d: %w: the partition moved to another node",
			w.k.stream, w.k.part, disbackend.ErrNotLeader))
	}
}

// run takes batches of jobs off the queue: once the first waiting job has
// lingered for Linger, or the waiting records fill a PutRecords, or the
// Store is closing.
func (w *writer) run() {
	defer w.s.wg.Done()
	defer close(w.done)
	if w.after != nil {
		<-w.after // the previous writer's last PutRecords has ended
	}
	o := &w.s.opts
	for {
		w.mu.Lock()
		if w.lost {
			w.failLost()
			return
		}
		if len(w.q) == 0 {
			stopped := w.stopped
			w.mu.Unlock()
			if stopped {
				return
			}
			<-w.wake
			continue
		}
		if p := w.s.idem.held(w.k); p != nil && !w.stopped {
			// A batch cut short holds the partition's other writes until
			// its retry comes (idem.go): that goes first.
			i := slices.IndexFunc(w.q, func(j job) bool { return p.isRetry(&j.b) })
			wait := time.Until(p.until)
			if i < 0 && slices.ContainsFunc(w.q, func(j job) bool { return p.endedBy(&j.b) }) {
				w.mu.Unlock()
				w.s.idem.clearPartial(w.k)
				w.s.log.Info("a batch cut short belongs to a transaction that ended (its marker waits to be written): its retry is not awaited",
					zap.String("stream", w.k.stream), zap.Int32("partition", w.k.part), zap.Int64("producer_id", p.pid),
					zap.Int32("sequence", p.seq), zap.Int64("base_offset", p.base), zap.Int32("written", p.done), zap.Int32("records", p.n))
				continue
			}
			if i < 0 && wait > 0 {
				w.sleepUnlocked(wait)
				continue
			}
			if i > 0 {
				w.q = slices.Concat(w.q[i:i+1], w.q[:i], w.q[i+1:])
			}
		}
		full := w.qRecs >= o.BatchCount || w.qBytes >= o.BatchBytes
		if wait := time.Until(w.q[0].at.Add(o.Linger)); !full && !w.stopped && wait > 0 {
			w.sleepUnlocked(wait)
			continue
		}
		n, recs, size := 0, 0, 0
		for n < len(w.q) {
			j := &w.q[n]
			r, b := int(j.b.NumRecords), j.size()
			if n > 0 && (recs+r > o.BatchCount || size+b > o.BatchBytes || !sameCredentials(j.b.Credentials, w.q[0].b.Credentials)) {
				// Full, or another principal's batch (dis authentication
				// mode): it waits for a PutRecords signed with its own
				// credentials.
				break
			}
			n, recs, size = n+1, recs+r, size+b
		}
		group := make([]job, n)
		copy(group, w.q[:n])
		clear(w.q[:n])
		w.q = w.q[n:]
		w.qRecs -= recs
		w.qBytes -= size
		w.mu.Unlock()
		if rest := w.s.sendGroup(w.k, group, &w.put); len(rest) > 0 {
			w.requeue(rest)
		}
	}
}

// sameCredentials reports whether two batches are written with the same
// credentials (nil: the gateway's), so may share one PutRecords.
func sameCredentials(a, b *disbackend.Credentials) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.AK == b.AK && a.SK == b.SK
}

// requeue puts jobs back at the front of the queue, in order.
func (w *writer) requeue(jobs []job) {
	w.mu.Lock()
	for _, j := range jobs {
		w.qRecs += int(j.b.NumRecords)
		w.qBytes += j.size()
	}
	w.q = append(jobs, w.q...)
	w.mu.Unlock()
}

// Append enqueues the batch on the partition's writer; see the package
// comment for what happens to it. When BufferBytes are already waiting
// across the Store, Append blocks until there is room (backpressure on the
// caller, which keeps one caller's batches in order); after BufferWait it
// returns a Pending completed with ErrUnavailable (Kafka REQUEST_TIMED_OUT).
// In cluster mode, a partition this node does not lead, or while its lease
// has lapsed, fails at once with ErrNotLeader (docs/cluster.md §4).
func (s *Store) Append(stream string, part int32, b disbackend.Batch) *disbackend.Pending {
	return s.appendJob(partKey{stream, part}, b, nil)
}

// appendJob is Append of a batch, or with src of a compactor's copy job,
// under the partition's own fence key.
func (s *Store) appendJob(k partKey, b disbackend.Batch, src []int64) *disbackend.Pending {
	return s.appendFenced(k, b, src, disbackend.PartitionKey(k.stream, k.part))
}

// appendFenced is appendJob written under fence key key (job.key): a key
// the fence refuses fails the append at once with the fence's error.
func (s *Store) appendFenced(k partKey, b disbackend.Batch, src []int64, key string) *disbackend.Pending {
	stream, part := k.stream, k.part
	p := disbackend.NewPending()
	if err := s.fenced(key); err != nil {
		p.Complete(disbackend.AppendResult{}, fmt.Errorf("disrest: append to %s/%d: %w", stream, part, err))
		return p
	}
	mem := jobMem(&b)
	if !s.buf.acquire(mem, s.opts.BufferWait) {
		p.Complete(disbackend.AppendResult{}, fmt.Errorf("disrest: append to %s/%d: %w: %d bytes waiting for DIS for more than %v (buffer of %d bytes full)",
			stream, part, disbackend.ErrUnavailable, s.buf.waiting(), s.opts.BufferWait, s.opts.BufferBytes))
		return p
	}
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		s.buf.release(mem)
		p.Complete(disbackend.AppendResult{}, fmt.Errorf("disrest: append to %s/%d: %w", stream, part, disbackend.ErrClosed))
		return p
	}
	w := s.writers[k]
	if w == nil {
		w = &writer{s: s, k: k, wake: make(chan struct{}, 1), done: make(chan struct{})}
		if after, ok := s.retired[k]; ok {
			w.after = after
			delete(s.retired, k)
		}
		s.writers[k] = w
		s.wg.Add(1)
		go w.run()
	}
	w.enqueue(job{b: b, p: p, at: time.Now(), mem: mem, src: src, key: key})
	return p
}

// isClosed reports whether Close was called.
func (s *Store) isClosed() bool {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	return s.closed
}

// complete completes a job, then gives its bytes back to the buffer.
func (s *Store) complete(j *job, res disbackend.AppendResult, err error) {
	j.p.Complete(res, err)
	s.buf.release(j.mem)
}
