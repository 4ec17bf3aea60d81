package gateway

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/kafkawire"
)

// rawSASLToken serves one raw SASL token frame, read after a v0
// SaslHandshake (saslState.rawTokens): the token is handled as the
// SaslAuthenticate v0 that carries it in later clients, and the reply
// writes the server's token as a raw frame. The exchange ends raw mode
// when it authenticates; a failure closes the connection without an
// answer (Kafka's SaslServerAuthenticator, which has no error frame for
// raw tokens).
func (c *conn) rawSASLToken(token []byte) reply {
	body := kmsg.NewPtrSASLAuthenticateRequest()
	body.SASLAuthBytes = token
	req := &kafkawire.Request{Key: apiKeySaslAuthenticate, Version: 0, Body: body}
	r := c.handleSaslAuthenticate(req)
	r.raw = true
	if resp, ok := r.resp.(*kmsg.SASLAuthenticateResponse); ok && resp.ErrorCode == 0 {
		r.rawToken = resp.SASLAuthBytes
	} else {
		r.closeAfter = true
	}
	if c.sasl.authenticated || r.closeAfter {
		c.sasl.rawTokens = false
	}
	return r
}
