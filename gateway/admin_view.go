package gateway

import (
	"errors"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/groupcoord"
)

// ErrNotServing is Ready's error before Listen and once Shutdown started.
var ErrNotServing = errors.New("gateway: the Kafka listener is not open")

// Ready returns nil while the Kafka listener is open and Shutdown has not
// started (the admin listener's /readyz), else ErrNotServing.
func (s *Server) Ready() error {
	if len(s.listeners) == 0 {
		return ErrNotServing
	}
	select {
	case <-s.closing:
		return ErrNotServing
	default:
		return nil
	}
}

// Coordinator is the consumer-group coordinator, for read-only views
// (the admin console and the lag metrics).
func (s *Server) Coordinator() *groupcoord.Coordinator { return s.groups }

// Backend is the backend the server was made with.
func (s *Server) Backend() disbackend.Backend { return s.backend }

// Cluster is the backend's view of the gateway nodes (docs/cluster.md),
// nil on one node: the admin listener's readiness, metrics and console.
func (s *Server) Cluster() disbackend.Cluster { return s.cluster }
