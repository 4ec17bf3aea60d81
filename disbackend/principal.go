package disbackend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
)

// ErrNotAuthorized: the backend refused the operation for the credentials
// it was made with (DIS: HTTP 403 DIS.4116, the principal's IAM policy
// does not allow it). Kafka TOPIC_AUTHORIZATION_FAILED (29).
var ErrNotAuthorized = errors.New("not authorized")

// ErrAuthenticationFailed: the backend refused the credentials themselves
// (DIS: HTTP 441 DIS.4100-DIS.4115, DIS.4117: wrong AK/SK, unknown or
// expired AK). Kafka SASL_AUTHENTICATION_FAILED (58) at SaslAuthenticate.
var ErrAuthenticationFailed = errors.New("authentication failed")

// Credentials are a principal's own DIS key pair, with which a backend
// that supports it (disrest, through CredentialVerifier) signs the calls
// made for that principal: the gateway's `dis` authentication mode, where
// SASL PLAIN's username and password are a DIS AK and SK. The SK is never
// printed: String, GoString, Format and LogValue show the AK only.
type Credentials struct {
	// AK is the access key id; it names the principal ("User:" + AK).
	AK string
	// SK is the secret access key. Never logged.
	SK string
}

// String shows the AK and hides the SK.
func (c Credentials) String() string { return "Credentials{AK:" + c.AK + ", SK:<redacted>}" }

// GoString is String, for %#v.
func (c Credentials) GoString() string { return c.String() }

// Format prints String for every verb (%v, %+v, %s, %q, ...), so the SK
// cannot reach a formatted message.
func (c Credentials) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(c.String())) }

// LogValue is String, for log/slog.
func (c Credentials) LogValue() slog.Value { return slog.StringValue(c.String()) }

type credentialsKey struct{}

// WithCredentials returns ctx carrying c: the backend calls made with it
// are signed with c (CredentialVerifier backends; others ignore it).
func WithCredentials(ctx context.Context, c *Credentials) context.Context {
	if c == nil {
		return ctx
	}
	return context.WithValue(ctx, credentialsKey{}, c)
}

// CredentialsFrom returns the credentials WithCredentials put in ctx, nil
// when none: the backend's own credentials apply.
func CredentialsFrom(ctx context.Context) *Credentials {
	c, _ := ctx.Value(credentialsKey{}).(*Credentials)
	return c
}

// CredentialVerifier is implemented by backends that act with a
// principal's own credentials (disrest): the gateway's `dis`
// authentication mode needs it.
type CredentialVerifier interface {
	// VerifyCredentials checks c with one cheap call signed with it.
	// Errors: ErrAuthenticationFailed when the backend refused the
	// credentials; ErrUnavailable (or a context error) when it could not
	// be asked; others as they come.
	VerifyCredentials(ctx context.Context, c Credentials) error
	// AuthorizeStream checks that the credentials in ctx (CredentialsFrom)
	// may have access to stream, with a call signed with them unless one succeeded
	// recently; nil when ctx has none. Errors: ErrNotAuthorized,
	// ErrStreamNotFound, ErrUnavailable.
	AuthorizeStream(ctx context.Context, stream string, access StreamAccess) error
}

// StreamAccess is what AuthorizeStream checks.
type StreamAccess int

const (
	// AccessRead: reading records (DIS GetCursor).
	AccessRead StreamAccess = iota
	// AccessDescribe: seeing the stream (DIS DescribeStream), as Kafka's
	// DESCRIBE on a topic for Metadata.
	AccessDescribe
)

// String names the access: "read", "describe".
func (a StreamAccess) String() string {
	if a == AccessRead {
		return "read"
	}
	return "describe"
}
