package gateway

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/xdg-go/scram"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
)

// SASL mechanisms (Kafka sasl.enabled.mechanisms).
const (
	MechanismPlain = "PLAIN"
)

// saslMechanisms are the mechanisms the gateway knows, with the SCRAM hash
// of the SCRAM ones.
var saslMechanisms = map[string]scram.HashGeneratorFcn{
	MechanismPlain:         nil,
	disbackend.ScramSHA256: scram.SHA256,
	disbackend.ScramSHA512: scram.SHA512,
}

// Kafka's bounds on SCRAM iterations (ScramMechanism.minIterations,
// maxIterations).
const (
	MinScramIterations = 4096
	MaxScramIterations = 16384
)

// SASLConfig is the authentication of the SASL listeners.
type SASLConfig struct {
	// Mechanisms are the enabled mechanisms, in the order SaslHandshake
	// lists them: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (Kafka
	// sasl.enabled.mechanisms).
	Mechanisms []string
	// Users are the initial users: PLAIN users are checked against their
	// password held in memory (as Kafka's JAAS user_NAME entries); a SCRAM
	// user's credential is written, salted and hashed, to the backend's
	// credential store at start unless the user already has one of that
	// mechanism (so AlterUserScramCredentials changes are kept).
	Users []SASLUser
	// PlainDIS is the dis authentication mode of PLAIN (config
	// sasl_plain_authentication: dis): the username and password are a
	// DIS AK and SK, checked at SaslAuthenticate with a call signed with
	// them (disbackend.CredentialVerifier.VerifyCredentials), and the
	// connection's backend calls are then made with them (its produce
	// batches, topic admin calls, reads checked by AuthorizeStream), so
	// that DIS's IAM decides. PLAIN users of Users are not used then.
	// Needs a backend that implements disbackend.CredentialVerifier.
	PlainDIS bool
	// MaxReauth is Kafka's connections.max.reauth.ms: a SASL session ends
	// this long after authentication (SaslAuthenticate v1+ tells the
	// client, which re-authenticates, KIP-368); a request other than
	// ApiVersions and re-authentication after that closes the
	// connection. 0 means sessions do not expire.
	MaxReauth time.Duration
}

// SASLUser is one configured user of one mechanism.
type SASLUser struct {
	Mechanism string
	Name      string
	Password  string
}

// saslState is a connection's authentication, owned by its reader.
type saslState struct {
	mechanism     string                    // chosen by SaslHandshake; "" before
	scram         *scram.ServerConversation // the SCRAM exchange under way
	scramFinal    *scramFinal               // its state after the first step
	authenticated bool                      // a session was established
	authMechanism string                    // the mechanism of the session
	user          string                    // the authenticated user
	expires       time.Time                 // zero: the session does not expire
	// rawTokens: a v0 SaslHandshake chose the mechanism, so its tokens
	// follow as raw frames (a 4-byte size and the token, no request
	// header), as Kafka serves clients from before SaslAuthenticate
	// (kafka-python 2.0, sarama before V1_0_0_0).
	rawTokens bool
}

// initSASL sets up the credential store (the backend's when it implements
// disbackend.CredentialStore, else one in memory) and seeds the configured
// SCRAM users.
func (s *Server) initSASL(ctx context.Context) error {
	if s.cfg.SASL.PlainDIS {
		v, ok := s.backend.(disbackend.CredentialVerifier)
		if !ok {
			return errors.New("gateway: the dis authentication mode of PLAIN needs the DIS backend")
		}
		s.disAuth = v
	}
	if cs, ok := s.backend.(disbackend.CredentialStore); ok {
		s.creds = cs
	} else {
		s.creds = newMemCredentials()
	}
	s.plainUsers = make(map[string]string)
	for _, u := range s.cfg.SASL.Users {
		switch u.Mechanism {
		case MechanismPlain:
			if s.cfg.SASL.PlainDIS {
				continue // PLAIN is checked against DIS
			}
			s.plainUsers[u.Name] = u.Password
		case disbackend.ScramSHA256, disbackend.ScramSHA512:
			have, err := s.creds.ScramCredentials(ctx, u.Name)
			if err != nil {
				return fmt.Errorf("gateway: read SCRAM credentials of %q: %w", u.Name, err)
			}
			if slices.ContainsFunc(have, func(c disbackend.ScramCredential) bool { return c.Mechanism == u.Mechanism }) {
				continue
			}
			cred, err := NewScramCredential(u.Mechanism, u.Password, MinScramIterations)
			if err != nil {
				return err
			}
			if err := s.creds.PutScramCredential(ctx, u.Name, cred); err != nil {
				return fmt.Errorf("gateway: store SCRAM credential of %q: %w", u.Name, err)
			}
			// One line per user at start: a credential deleted through
			// AlterUserScramCredentials comes back here while the user
			// is in the file.
			s.log.Info("SCRAM credential of a sasl_users_file user written", zap.String("user", u.Name), zap.String("mechanism", u.Mechanism))
		default:
			return fmt.Errorf("gateway: SASL user %q: mechanism %q is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", u.Name, u.Mechanism)
		}
	}
	return nil
}

// NewScramCredential salts and hashes password for mechanism (RFC 5802:
// a random 32-byte salt, PBKDF2 with iterations, StoredKey and ServerKey).
func NewScramCredential(mechanism, password string, iterations int) (disbackend.ScramCredential, error) {
	hf := saslMechanisms[mechanism]
	if hf == nil {
		return disbackend.ScramCredential{}, fmt.Errorf("gateway: %q is not a SCRAM mechanism", mechanism)
	}
	salt := make([]byte, 32)
	_, _ = rand.Read(salt)
	client, err := hf.NewClient("", password, "")
	if err != nil {
		return disbackend.ScramCredential{}, fmt.Errorf("gateway: SCRAM password: %w", errors.New("not a valid SASLprep string"))
	}
	sc := client.GetStoredCredentials(scram.KeyFactors{Salt: string(salt), Iters: iterations})
	return disbackend.ScramCredential{Mechanism: mechanism, Salt: salt, Iterations: int32(iterations), StoredKey: sc.StoredKey, ServerKey: sc.ServerKey}, nil
}

// scramFromSaltedPassword is the credential AlterUserScramCredentials
// sends: the client salted the password; StoredKey and ServerKey are
// derived here.
func scramFromSaltedPassword(mechanism string, salt, salted []byte, iterations int32) disbackend.ScramCredential {
	var h func() hash.Hash = sha256.New
	if mechanism == disbackend.ScramSHA512 {
		h = sha512.New
	}
	mac := func(key []byte, msg string) []byte {
		m := hmac.New(h, key)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	ck := mac(salted, "Client Key")
	hh := h()
	hh.Write(ck)
	return disbackend.ScramCredential{Mechanism: mechanism, Salt: bytes.Clone(salt), Iterations: iterations,
		StoredKey: hh.Sum(nil), ServerKey: mac(salted, "Server Key")}
}

// errAuthFailed is the error of every failed authentication; it says
// nothing of which part was wrong.
var errAuthFailed = errors.New("invalid credentials")

// parsePlain splits a PLAIN message (RFC 4616: authzid NUL authcid NUL
// passwd). An authzid other than empty or the username is refused, as
// Kafka's PlainSaslServer does.
func parsePlain(msg []byte) (user, password string, err error) {
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return "", "", errors.New("invalid SASL/PLAIN message: expected 3 NUL-separated fields")
	}
	authz, authc := string(parts[0]), string(parts[1])
	if authc == "" {
		return "", "", errors.New("authentication failed: username not specified")
	}
	if len(parts[2]) == 0 {
		return "", "", errors.New("authentication failed: password not specified")
	}
	if authz != "" && authz != authc {
		return "", "", errors.New("authentication failed: client requested an authorization id that is different from username")
	}
	return authc, string(parts[2]), nil
}

// checkPlain verifies a PLAIN user's password in constant time.
func (s *Server) checkPlain(user, password string) bool {
	want, ok := s.plainUsers[user]
	if !ok {
		want = "\x00never"
	}
	eq := subtle.ConstantTimeCompare([]byte(want), []byte(password)) == 1
	return ok && eq
}

// scramServer returns the SCRAM server of mechanism, looking credentials up
// in the credential store.
func (s *Server) scramServer(ctx context.Context, mechanism string, found *disbackend.ScramCredential) (*scram.Server, error) {
	srv, err := saslMechanisms[mechanism].NewServer(func(user string) (scram.StoredCredentials, error) {
		creds, err := s.creds.ScramCredentials(ctx, user)
		if err != nil {
			return scram.StoredCredentials{}, err
		}
		for _, c := range creds {
			if c.Mechanism == mechanism {
				*found = c
				return scram.StoredCredentials{KeyFactors: scram.KeyFactors{Salt: string(c.Salt), Iters: int(c.Iterations)},
					StoredKey: c.StoredKey, ServerKey: c.ServerKey}, nil
			}
		}
		return scram.StoredCredentials{}, errAuthFailed
	})
	if err != nil {
		return nil, err
	}
	return srv.WithNonceGenerator(scramNonce), nil
}

// scramNonce is the server's part of the SCRAM nonce: 32 random
// alphanumerics. xdg-go/scram's default is standard base64, whose '='
// librdkafka does not echo back intact (its client-final then failed
// with "nonce received did not match nonce sent").
func scramNonce() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// memCredentials is the credential store of a backend that has none: it
// lives and dies with the process.
type memCredentials struct {
	mu    sync.Mutex
	users map[string][]disbackend.ScramCredential
}

func newMemCredentials() *memCredentials {
	return &memCredentials{users: make(map[string][]disbackend.ScramCredential)}
}

func (m *memCredentials) ScramCredentials(_ context.Context, user string) ([]disbackend.ScramCredential, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.users[user]), nil
}

func (m *memCredentials) ListScramCredentials(context.Context) (map[string][]disbackend.ScramCredential, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.users), nil
}

func (m *memCredentials) PutScramCredential(_ context.Context, user string, cred disbackend.ScramCredential) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cs := slices.DeleteFunc(slices.Clone(m.users[user]), func(c disbackend.ScramCredential) bool { return c.Mechanism == cred.Mechanism })
	m.users[user] = append(cs, cred)
	return nil
}

func (m *memCredentials) DeleteScramCredential(_ context.Context, user, mechanism string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cs := m.users[user]
	n := len(cs)
	cs = slices.DeleteFunc(slices.Clone(cs), func(c disbackend.ScramCredential) bool { return c.Mechanism == mechanism })
	if len(cs) == n {
		return disbackend.ErrCredentialNotFound
	}
	if len(cs) == 0 {
		delete(m.users, user)
	} else {
		m.users[user] = cs
	}
	return nil
}

// saslGate decides whether a request may run on a SASL listener's
// connection: ApiVersions and the SASL APIs always; anything else only in
// an authenticated, unexpired session. false closes the connection.
func (c *conn) saslGate(key int16) bool {
	if c.lst == nil || !c.lst.usesSASL() {
		return true
	}
	switch key {
	case apiKeyApiVersions, apiKeySaslHandshake, apiKeySaslAuthenticate:
		return true
	}
	st := &c.sasl
	if !st.authenticated || st.mechanism != "" {
		c.log.Info("request before SASL authentication, closing connection", zap.Int16("api_key", key))
		return false
	}
	if !st.expires.IsZero() && !time.Now().Before(st.expires) {
		c.log.Info("SASL session expired without re-authentication, closing connection", zap.String("user", st.user))
		return false
	}
	return true
}

// scramStep runs one step of a SCRAM server conversation. xdg-go/scram
// v1.1.2 panics on some malformed client-first messages (an empty GS2
// flag, e.g. ",,n=u,r=x"; found by FuzzScramServer): such a message is an
// authentication failure, not a crash.
func scramStep(conv *scram.ServerConversation, msg string) (out string, err error) {
	defer func() {
		if recover() != nil {
			out, err = "", errors.New("malformed SCRAM message")
		}
	}()
	return conv.Step(msg)
}

// scramFinal is what a SCRAM exchange keeps between the client-first and
// client-final messages to check the proof (RFC 5802 section 3).
type scramFinal struct {
	mechanism   string
	cred        disbackend.ScramCredential
	gs2Header   string // "n,," or "n,a=...,"
	clientBare  string // client-first-message-bare
	serverFirst string
	nonce       string // client nonce + server nonce
}

// newScramFinal keeps the first step's messages: first is the client's,
// serverFirst the answer xdg-go/scram made.
func newScramFinal(mechanism string, cred disbackend.ScramCredential, first, serverFirst string) (*scramFinal, error) {
	// gs2-header is "flag,[a=authzid]," : the first two commas.
	i := strings.IndexByte(first, ',')
	if i < 0 {
		return nil, errors.New("malformed SCRAM client-first message")
	}
	j := strings.IndexByte(first[i+1:], ',')
	if j < 0 {
		return nil, errors.New("malformed SCRAM client-first message")
	}
	n := i + 1 + j + 1
	nonce, ok := strings.CutPrefix(strings.SplitN(serverFirst, ",", 2)[0], "r=")
	if !ok {
		return nil, errors.New("malformed SCRAM server-first message")
	}
	return &scramFinal{mechanism: mechanism, cred: cred, gs2Header: first[:n], clientBare: first[n:], serverFirst: serverFirst, nonce: nonce}, nil
}

// verify checks a client-final message ("c=...,r=...[,ext],p=...") and
// returns the server-final message. As Kafka's ScramSaslServer, the
// nonce must end with the one the server sent: librdkafka sends the
// client nonce again in front of it, which xdg-go/scram refuses.
func (f *scramFinal) verify(final string) (string, error) {
	k := strings.LastIndex(final, ",p=")
	if k < 0 {
		return "", errors.New("SCRAM client-final message without a proof")
	}
	withoutProof, proofB64 := final[:k], final[k+3:]
	fields := strings.Split(withoutProof, ",")
	if len(fields) < 2 || !strings.HasPrefix(fields[0], "c=") || !strings.HasPrefix(fields[1], "r=") {
		return "", errors.New("malformed SCRAM client-final message")
	}
	cb, err := base64.StdEncoding.DecodeString(fields[0][2:])
	if err != nil || string(cb) != f.gs2Header {
		return "", errors.New("SCRAM channel binding does not match")
	}
	if !strings.HasSuffix(fields[1][2:], f.nonce) {
		return "", errors.New("invalid client nonce in the final client message")
	}
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	if err != nil {
		return "", errors.New("malformed SCRAM proof")
	}
	h := sha256.New
	if f.mechanism == disbackend.ScramSHA512 {
		h = sha512.New
	}
	authMsg := f.clientBare + "," + f.serverFirst + "," + withoutProof
	mac := func(key []byte) []byte {
		m := hmac.New(h, key)
		m.Write([]byte(authMsg))
		return m.Sum(nil)
	}
	sig := mac(f.cred.StoredKey)
	if len(proof) != len(sig) {
		return "", errAuthFailed
	}
	clientKey := make([]byte, len(sig))
	for i := range sig {
		clientKey[i] = proof[i] ^ sig[i]
	}
	hh := h()
	hh.Write(clientKey)
	if !hmac.Equal(hh.Sum(nil), f.cred.StoredKey) {
		return "", errAuthFailed
	}
	return "v=" + base64.StdEncoding.EncodeToString(mac(f.cred.ServerKey)), nil
}

// CheckPassword reports whether password is user's: a PLAIN user of
// SASLConfig.Users, or a user with a SCRAM credential in the credential
// store (the password is salted and hashed with the credential's salt and
// iterations, and StoredKey compared in constant time). It serves the
// admin listener's HTTP basic authentication. A failed store lookup is a
// refusal.
func (s *Server) CheckPassword(ctx context.Context, user, password string) bool {
	if _, ok := s.plainUsers[user]; ok {
		return s.checkPlain(user, password)
	}
	if s.creds == nil {
		return false
	}
	creds, err := s.creds.ScramCredentials(ctx, user)
	if err != nil {
		return false
	}
	for _, c := range creds {
		hf := saslMechanisms[c.Mechanism]
		if hf == nil {
			continue
		}
		client, err := hf.NewClient("", password, "")
		if err != nil {
			continue
		}
		sc := client.GetStoredCredentials(scram.KeyFactors{Salt: string(c.Salt), Iters: int(c.Iterations)})
		if subtle.ConstantTimeCompare(sc.StoredKey, c.StoredKey) == 1 {
			return true
		}
	}
	return false
}

// HasUsers reports whether the gateway authenticates anyone: a listener
// with SASL, or SASL users configured.
func (s *Server) HasUsers() bool {
	if len(s.plainUsers) > 0 {
		return true
	}
	for _, l := range s.cfg.listeners() {
		if l.SecurityProtocol == ProtocolSASLPlaintext || l.SecurityProtocol == ProtocolSASLSSL {
			return true
		}
	}
	return false
}
