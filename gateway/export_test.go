package gateway

import "time"

// SetLimitsClock replaces the clock of s's request limits (the auto-create
// token bucket and the limit log throttle).
func SetLimitsClock(s *Server, now func() time.Time) {
	s.limits.mu.Lock()
	defer s.limits.mu.Unlock()
	s.limits.now = now
	s.limits.refilled = now()
}
