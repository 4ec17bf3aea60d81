package groupcoord

import "time"

// Clock is the coordinator's source of time and timers. Session, rebalance,
// sync and retention timers all go through it, so tests can use a fake clock
// and advance it by hand. A timer's function must not block: the
// coordinator's only posts a message to the group's own goroutine.
type Clock interface {
	Now() time.Time
	// AfterFunc runs f once, in its own goroutine or the caller of a fake
	// clock's Advance, after d.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer interface {
	// Stop prevents the function from running if it has not started; it
	// reports whether it did.
	Stop() bool
}

// RealClock returns the wall clock (time.Now, time.AfterFunc).
func RealClock() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
