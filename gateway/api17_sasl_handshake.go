package gateway

// SaslHandshake: v0-1. After a v1 handshake the tokens come in
// SaslAuthenticate requests; after a v0 handshake (Kafka < 1.0 clients:
// kafka-python 2.0, sarama before V1_0_0_0) they come as raw frames, a
// 4-byte size and the token without a request header, each answered by a
// raw frame of the server's token (empty for PLAIN's success); a failed
// raw exchange closes the connection without an answer, as Kafka's
// SaslServerAuthenticator does (rawsasl.go).
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

func init() { registerAPI(apiKeySaslHandshake, 0, 1, (*conn).handleSaslHandshake, authNone) }

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
	st.rawTokens = req.Version == 0 && !st.authenticated
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
