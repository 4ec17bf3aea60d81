package gateway

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"errors"
	"fmt"
	"hash"
	"maps"
	"slices"
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
	authenticated bool                      // a session was established
	authMechanism string                    // the mechanism of the session
	user          string                    // the authenticated user
	expires       time.Time                 // zero: the session does not expire
}

// initSASL sets up the credential store (the backend's when it implements
// disbackend.CredentialStore, else one in memory) and seeds the configured
// SCRAM users.
func (s *Server) initSASL(ctx context.Context) error {
	if cs, ok := s.backend.(disbackend.CredentialStore); ok {
		s.creds = cs
	} else {
		s.creds = newMemCredentials()
	}
	s.plainUsers = make(map[string]string)
	for _, u := range s.cfg.SASL.Users {
		switch u.Mechanism {
		case MechanismPlain:
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
func (s *Server) scramServer(ctx context.Context, mechanism string) (*scram.Server, error) {
	return saslMechanisms[mechanism].NewServer(func(user string) (scram.StoredCredentials, error) {
		creds, err := s.creds.ScramCredentials(ctx, user)
		if err != nil {
			return scram.StoredCredentials{}, err
		}
		for _, c := range creds {
			if c.Mechanism == mechanism {
				return scram.StoredCredentials{KeyFactors: scram.KeyFactors{Salt: string(c.Salt), Iters: int(c.Iterations)},
					StoredKey: c.StoredKey, ServerKey: c.ServerKey}, nil
			}
		}
		return scram.StoredCredentials{}, errAuthFailed
	})
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
