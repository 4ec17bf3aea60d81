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

// Principals returns the principal ("" for none) and listener name of
// every open connection of s.
func Principals(s *Server) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for c := range s.conns {
		p := ""
		if v := c.principal.Load(); v != nil {
			p = *v
		}
		out[p] = c.listener
	}
	return out
}
