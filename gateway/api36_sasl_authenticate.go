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
// In the dis authentication mode (SASLConfig.PlainDIS) PLAIN's username
// and password are a DIS AK and SK, checked by a DIS call signed with
// them; the principal is "User:<AK>".
//
// Tokens, passwords and proofs are never logged.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/kafkawire"
)

func init() { registerAPI(apiKeySaslAuthenticate, 0, 2, (*conn).handleSaslAuthenticate, authNone) }

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
		if c.s.disAuth != nil {
			return c.authenticateDIS(req, resp, user, password)
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

// disAuthTimeout bounds the DIS call that checks a PLAIN AK/SK in the dis
// authentication mode.
const disAuthTimeout = 30 * time.Second

// authenticateDIS is PLAIN in the dis authentication mode: ak and sk are
// checked with a DIS call signed with them. DIS refusing them is
// SASL_AUTHENTICATION_FAILED "Invalid username or password"; DIS not
// answering is SASL_AUTHENTICATION_FAILED saying so (the client may retry;
// the credentials were not judged). Both close the connection. The SK is
// never logged nor put in a message.
func (c *conn) authenticateDIS(req *kafkawire.Request, resp *kmsg.SASLAuthenticateResponse, ak, sk string) reply {
	ctx, cancel := context.WithTimeout(c.ctx, disAuthTimeout)
	defer cancel()
	creds := &disbackend.Credentials{AK: ak, SK: sk}
	if err := c.s.disAuth.VerifyCredentials(ctx, *creds); err != nil {
		if errors.Is(err, disbackend.ErrAuthenticationFailed) {
			c.log.Debug("DIS refused the PLAIN credentials", zap.String("user", ak), zapErr(err))
			return c.authFailed(req, resp, ak, "Authentication failed: Invalid username or password")
		}
		c.log.Warn("DIS could not check the PLAIN credentials", zap.String("user", ak), zapErr(err))
		return c.authFailed(req, resp, ak, "Authentication failed: DIS could not be reached to check the credentials; try again later")
	}
	if st := &c.sasl; st.authenticated && ak != st.user {
		return c.authenticated(req, resp, ak) // refuses the change of principal
	}
	c.disCreds.Store(creds)
	return c.authenticated(req, resp, ak)
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
