package disbackend

import (
	"context"
	"errors"
)

// SCRAM mechanisms as Kafka names them (sasl.enabled.mechanisms).
const (
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
)

// ErrCredentialNotFound: the user has no SCRAM credential of that mechanism
// (Kafka's RESOURCE_NOT_FOUND in AlterUserScramCredentials and
// DescribeUserScramCredentials).
var ErrCredentialNotFound = errors.New("scram credential not found")

// ScramCredential is one user's SCRAM credential for one mechanism, as
// RFC 5802 keeps it: never the password, only the salt, the iteration
// count and the two keys derived from the salted password.
type ScramCredential struct {
	// Mechanism is ScramSHA256 or ScramSHA512.
	Mechanism string `json:"mechanism"`
	// Salt is the random salt of the PBKDF2 derivation.
	Salt []byte `json:"salt"`
	// Iterations is the PBKDF2 iteration count, 4096 to 16384 (Kafka's
	// bounds).
	Iterations int32 `json:"iterations"`
	// StoredKey is H(HMAC(SaltedPassword, "Client Key")).
	StoredKey []byte `json:"stored_key"`
	// ServerKey is HMAC(SaltedPassword, "Server Key").
	ServerKey []byte `json:"server_key"`
}

// CredentialStore keeps SCRAM credentials in the backend, so that every
// gateway node sharing the backend sees the same users and they survive
// restarts. The gateway uses it when its backend implements it (SASL
// SCRAM-SHA-256/512, DescribeUserScramCredentials and
// AlterUserScramCredentials).
type CredentialStore interface {
	// ScramCredentials returns user's credentials, one per mechanism,
	// none (no error) for an unknown user.
	ScramCredentials(ctx context.Context, user string) ([]ScramCredential, error)
	// ListScramCredentials returns every user's credentials.
	ListScramCredentials(ctx context.Context) (map[string][]ScramCredential, error)
	// PutScramCredential creates or replaces user's credential of
	// cred.Mechanism.
	PutScramCredential(ctx context.Context, user string, cred ScramCredential) error
	// DeleteScramCredential removes user's credential of mechanism;
	// ErrCredentialNotFound when there is none.
	DeleteScramCredential(ctx context.Context, user, mechanism string) error
}
