package admin

import (
	"sync"
	"time"

	"go.uber.org/zap/zapcore"
)

// ErrorRing keeps the last entries logged at Warn or above, for the
// console's "recent errors": a bounded ring, the oldest dropped first.
// Wrap the logger's core with Core.
type ErrorRing struct {
	mu      sync.Mutex
	entries []LogEntry // ring of cap entries
	next    int
	full    bool
}

// LogEntry is one logged warning or error.
type LogEntry struct {
	Time    time.Time
	Level   string
	Logger  string
	Message string
	Fields  string // the entry's fields, JSON
}

// NewErrorRing returns a ring of the last n (at least 1) warnings and errors.
func NewErrorRing(n int) *ErrorRing {
	return &ErrorRing{entries: make([]LogEntry, max(n, 1))}
}

// Core returns core teed with a core that copies Warn and above into the
// ring.
func (r *ErrorRing) Core(core zapcore.Core) zapcore.Core {
	return zapcore.NewTee(core, &ringCore{ring: r, enc: zapcore.NewJSONEncoder(zapcore.EncoderConfig{})})
}

func (r *ErrorRing) add(e LogEntry) {
	r.mu.Lock()
	r.entries[r.next] = e
	r.next = (r.next + 1) % len(r.entries)
	if r.next == 0 {
		r.full = true
	}
	r.mu.Unlock()
}

// Entries returns the kept entries, newest first.
func (r *ErrorRing) Entries() []LogEntry {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.next
	if r.full {
		n = len(r.entries)
	}
	out := make([]LogEntry, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, r.entries[(r.next-i+len(r.entries))%len(r.entries)])
	}
	return out
}

type ringCore struct {
	ring   *ErrorRing
	enc    zapcore.Encoder // fields added by With, already encoded
	fields []zapcore.Field
}

func (c *ringCore) Enabled(l zapcore.Level) bool { return l >= zapcore.WarnLevel }

func (c *ringCore) With(fields []zapcore.Field) zapcore.Core {
	return &ringCore{ring: c.ring, enc: c.enc, fields: append(c.fields[:len(c.fields):len(c.fields)], fields...)}
}

func (c *ringCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *ringCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	all := append(c.fields[:len(c.fields):len(c.fields)], fields...)
	text := ""
	if buf, err := c.enc.EncodeEntry(zapcore.Entry{}, all); err == nil {
		text = buf.String()
		buf.Free()
	}
	const maxFields = 2000 // bounded memory per entry
	if len(text) > maxFields {
		text = text[:maxFields] + "…"
	}
	msg := e.Message
	if len(msg) > 500 {
		msg = msg[:500] + "…"
	}
	c.ring.add(LogEntry{Time: e.Time, Level: e.Level.String(), Logger: e.LoggerName, Message: msg, Fields: text})
	return nil
}

func (c *ringCore) Sync() error { return nil }
