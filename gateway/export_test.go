package gateway

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// SetLimitsClock replaces the clock of s's request limits (the auto-create
// token bucket and the limit log throttle).
func SetLimitsClock(s *Server, now func() time.Time) {
	s.limits.mu.Lock()
	defer s.limits.mu.Unlock()
	s.limits.now = now
	s.limits.refilled = now()
}

// SetPrincipalsByIP makes each connection from an IP address in m have
// m's principal (what SASL sets once it exists), for authorization tests.
func SetPrincipalsByIP(s *Server, m map[string]string) {
	h := func(c *conn) {
		if p, ok := m[c.ip]; ok {
			c.principal.Store(&p)
		}
	}
	s.acceptHook.Store(&h)
}

// RegisteredAPIKeys returns every API key of the dispatch table.
func RegisteredAPIKeys() []int16 {
	var keys []int16
	for _, e := range apiTable {
		if e != nil {
			keys = append(keys, e.key)
		}
	}
	return keys
}

// AuthorizationChecks returns how many authorization checks the dispatch
// table's row of key names (0 for a key not served).
func AuthorizationChecks(key int16) int {
	if e := lookupAPI(key); e != nil {
		return len(e.auth)
	}
	return 0
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

// SignEnvelope sets env's authentication tag as node sender holding key
// would at at (forward.go).
func SignEnvelope(key []byte, sender int32, at time.Time, env *kmsg.EnvelopeRequest) {
	(&forwarder{key: key}).sign(env, sender, at)
}

// EncodePrincipal is a principal as envelopes carry it.
func EncodePrincipal(p string) []byte { return encodePrincipal(p) }
