package gateway

import (
	"sync"
	"time"

	"go.uber.org/zap"
)

// limitLogEvery is how often each kind of limit may log that it was hit.
const limitLogEvery = 10 * time.Second

// limitLog logs that a limit was hit at most once per limitLogEvery per
// kind, counting the hits in between, so a client hammering a limit cannot
// flood the log.
type limitLog struct {
	log *zap.Logger
	now func() time.Time

	mu    sync.Mutex
	kinds map[string]*limitLogKind // guarded by mu
}

type limitLogKind struct {
	last   time.Time
	missed int64 // hits not logged since last
}

func newLimitLog(log *zap.Logger) *limitLog {
	return &limitLog{log: log, now: time.Now, kinds: make(map[string]*limitLogKind)}
}

// hit records one hit of the limit kind (a config key) and logs it at warn
// level, with fields, unless the kind logged within limitLogEvery; the line
// carries "unlogged_hits", the hits not logged since the last line.
func (l *limitLog) hit(kind string, msg string, fields ...zap.Field) {
	now := l.now()
	l.mu.Lock()
	k := l.kinds[kind]
	if k == nil {
		k = &limitLogKind{}
		l.kinds[kind] = k
	}
	if !k.last.IsZero() && now.Sub(k.last) < limitLogEvery {
		k.missed++
		l.mu.Unlock()
		return
	}
	missed := k.missed
	k.last, k.missed = now, 0
	l.mu.Unlock()
	l.log.Warn(msg, append(fields, zap.String("limit", kind), zap.Int64("unlogged_hits", missed))...)
}
