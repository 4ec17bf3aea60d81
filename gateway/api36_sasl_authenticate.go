package gateway

// SaslAuthenticate: v0-2 (v1 adds SessionLifetimeMillis, KIP-368; v2 is
// flexible).
//
// Carries the tokens of the mechanism SaslHandshake chose: one PLAIN
// message (RFC 4616), or SCRAM's client-first and client-final messages
// (RFC 5802, one request each). Success sets the connection's principal
// to "User:<name>"; v1+ answers SessionLifetimeMillis when
// SASLConfig.MaxReauth is set. Wrong credentials, an unknown user or a
// malformed token get SASL_AUTHENTICATION_FAILED and the connection is
// closed; a SaslAuthenticate without a handshake gets ILLEGAL_SASL_STATE
// and a close. A re-authentication must keep the principal, else
// SASL_AUTHENTICATION_FAILED and a close.
//
// Tokens, passwords and proofs are never logged.

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/kafkawire"
)

func init() { registerAPI(apiKeySaslAuthenticate, 0, 2, (*conn).handleSaslAuthenticate) }

func (c *conn) handleSaslAuthenticate(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.SASLAuthenticateRequest)
	resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	st := &c.sasl
	if c.lst == nil || !c.lst.usesSASL() {
		// Kafka's KafkaApis answers this on a listener without SASL
		// (its connections are authenticated from the start) and keeps
		// the connection.
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate request received after successful authentication"
		resp.ErrorMessage = &msg
		return ready(req, resp)
	}
	if st.mechanism == "" {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "Unexpected SASL authenticate request: no SaslHandshake before it"
		resp.ErrorMessage = &msg
		c.log.Info("SASL authenticate without a handshake, closing connection")
		return reply{req: req, resp: resp, closeAfter: true}
	}
	mech := st.mechanism
	if mech == MechanismPlain {
		user, password, err := parsePlain(r.SASLAuthBytes)
		if err != nil {
			return c.authFailed(req, resp, "", "Authentication failed: "+err.Error())
		}
		if !c.s.checkPlain(user, password) {
			return c.authFailed(req, resp, user, "Authentication failed: Invalid username or password")
		}
		return c.authenticated(req, resp, user)
	}
	failMsg := fmt.Sprintf("Authentication failed during authentication due to invalid credentials with SASL mechanism %s", mech)
	if st.scramFinal == nil {
		var cred disbackend.ScramCredential
		srv, err := c.s.scramServer(c.ctx, mech, &cred)
		if err != nil {
			return c.authFailed(req, resp, "", failMsg)
		}
		st.scram = srv.NewConversation()
		first := string(r.SASLAuthBytes)
		out, err := scramStep(st.scram, first)
		if err != nil {
			return c.authFailed(req, resp, st.scram.Username(), failMsg)
		}
		if st.scramFinal, err = newScramFinal(mech, cred, first, out); err != nil {
			return c.authFailed(req, resp, st.scram.Username(), failMsg)
		}
		resp.SASLAuthBytes = []byte(out)
		return ready(req, resp)
	}
	user := st.scram.Username()
	out, err := st.scramFinal.verify(string(r.SASLAuthBytes))
	if err != nil {
		return c.authFailed(req, resp, user, failMsg)
	}
	resp.SASLAuthBytes = []byte(out)
	return c.authenticated(req, resp, user)
}

// authenticated ends a successful exchange: the principal, the session's
// expiry, the answer.
func (c *conn) authenticated(req *kafkawire.Request, resp *kmsg.SASLAuthenticateResponse, user string) reply {
	st := &c.sasl
	if st.authenticated && user != st.user {
		msg := "Cannot change principals during re-authentication from User:" + st.user + ": User:" + user
		return c.authFailed(req, resp, user, msg)
	}
	reauth := st.authenticated
	st.authMechanism, st.mechanism, st.scram, st.scramFinal = st.mechanism, "", nil, nil
	st.authenticated, st.user = true, user
	principal := "User:" + user
	c.principal.Store(&principal)
	st.expires = time.Time{}
	if d := c.s.cfg.SASL.MaxReauth; d > 0 {
		st.expires = time.Now().Add(d)
		if req.Version >= 1 {
			resp.SessionLifetimeMillis = d.Milliseconds()
		}
	}
	c.log.Info("SASL authenticated", zap.String("principal", principal), zap.String("mechanism", st.authMechanism),
		zap.Bool("reauthentication", reauth), zap.String("listener", c.listener))
	return ready(req, resp)
}
