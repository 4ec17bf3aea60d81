package gateway

// SaslHandshake: v0-1. v0 is listed because librdkafka requires it to
// be advertised (its SASL_HANDSHAKE feature) though it then sends v1; a
// v0 client that follows with raw, unframed SASL tokens (Kafka < 1.0)
// is not served: its next frame does not parse and closes the connection.
//
// Picks the mechanism of the SaslAuthenticate exchange that follows; the
// answer lists the enabled mechanisms (SASLConfig.Mechanisms). A mechanism
// not enabled gets UNSUPPORTED_SASL_MECHANISM and the connection is
// closed; on a listener without SASL, ILLEGAL_SASL_STATE with no
// mechanisms and the connection kept, as Kafka's KafkaApis answers. After authentication, a handshake starts a KIP-368
// re-authentication with the same mechanism.

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/disgw/disgw/kafkawire"
)

const (
	apiKeySaslHandshake    = 17
	apiKeySaslAuthenticate = 36
)

func init() { registerAPI(apiKeySaslHandshake, 0, 1, (*conn).handleSaslHandshake) }

func (c *conn) handleSaslHandshake(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.SASLHandshakeRequest)
	resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = slices.Clone(c.s.cfg.SASL.Mechanisms)
	if resp.SupportedMechanisms == nil {
		resp.SupportedMechanisms = []string{}
	}
	st := &c.sasl
	switch {
	case c.lst == nil || !c.lst.usesSASL():
		// As Kafka's KafkaApis: ILLEGAL_SASL_STATE, no mechanisms, and
		// the connection stays open.
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.SupportedMechanisms = nil
		return ready(req, resp)
	case st.mechanism != "":
		resp.ErrorCode = kerr.IllegalSaslState.Code
		c.log.Info("second SASL handshake before authenticating, closing connection")
		return reply{req: req, resp: resp, closeAfter: true}
	case !slices.Contains(c.s.cfg.SASL.Mechanisms, r.Mechanism):
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		c.log.Info("unsupported SASL mechanism, closing connection", zap.String("mechanism", r.Mechanism))
		return reply{req: req, resp: resp, closeAfter: true}
	case st.authenticated && r.Mechanism != st.authMechanism:
		resp.ErrorCode = kerr.IllegalSaslState.Code
		c.log.Info("re-authentication with another SASL mechanism, closing connection",
			zap.String("mechanism", r.Mechanism), zap.String("previous_mechanism", st.authMechanism))
		return reply{req: req, resp: resp, closeAfter: true}
	}
	st.mechanism = r.Mechanism
	st.scram, st.scramFinal = nil, nil
	return ready(req, resp)
}

// authFailed answers a failed SaslAuthenticate with
// SASL_AUTHENTICATION_FAILED and msg, then closes the connection.
func (c *conn) authFailed(req *kafkawire.Request, resp *kmsg.SASLAuthenticateResponse, user, msg string) reply {
	resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
	resp.ErrorMessage = &msg
	c.log.Info("SASL authentication failed, closing connection",
		zap.String("mechanism", c.sasl.mechanism), zap.String("user", user), zap.String("listener", c.listener))
	c.sasl.mechanism, c.sasl.scram, c.sasl.scramFinal = "", nil, nil
	return reply{req: req, resp: resp, closeAfter: true}
}
