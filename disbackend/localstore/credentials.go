package localstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/disgw/disgw/disbackend"
)

var _ disbackend.CredentialStore = (*Store)(nil)

// scramKey is 'S' user: the JSON list of the user's SCRAM credentials.
func scramKey(user string) []byte { return append([]byte{prefixScram}, user...) }

// ScramCredentials returns user's SCRAM credentials (none for an unknown
// user). Errors: ErrClosed, errCorrupt, or a storage error.
func (s *Store) ScramCredentials(ctx context.Context, user string) ([]disbackend.ScramCredential, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.enter("read scram credentials"); err != nil {
		return nil, err
	}
	defer s.dbMu.RUnlock()
	return s.getScram(user)
}

func (s *Store) getScram(user string) ([]disbackend.ScramCredential, error) {
	v, closer, err := s.db.Get(scramKey(user))
	if err == pebble.ErrNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("localstore: scram credentials: %w", err)
	}
	defer closer.Close()
	var creds []disbackend.ScramCredential
	if err := json.Unmarshal(v, &creds); err != nil {
		return nil, fmt.Errorf("localstore: scram credentials of %q: %w: %v", user, errCorrupt, err)
	}
	return creds, nil
}

// ListScramCredentials returns every user's SCRAM credentials.
func (s *Store) ListScramCredentials(ctx context.Context) (map[string][]disbackend.ScramCredential, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.enter("list scram credentials"); err != nil {
		return nil, err
	}
	defer s.dbMu.RUnlock()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixScram}, UpperBound: []byte{prefixScram + 1}})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	out := make(map[string][]disbackend.ScramCredential)
	for it.First(); it.Valid(); it.Next() {
		var creds []disbackend.ScramCredential
		if err := json.Unmarshal(it.Value(), &creds); err != nil {
			return nil, fmt.Errorf("localstore: scram credentials of %q: %w: %v", it.Key()[1:], errCorrupt, err)
		}
		out[string(it.Key()[1:])] = creds
	}
	return out, it.Error()
}

// PutScramCredential creates or replaces user's credential of
// cred.Mechanism, synced.
func (s *Store) PutScramCredential(ctx context.Context, user string, cred disbackend.ScramCredential) error {
	return s.updateScram(ctx, user, func(creds []disbackend.ScramCredential) ([]disbackend.ScramCredential, error) {
		creds = slices.DeleteFunc(creds, func(c disbackend.ScramCredential) bool { return c.Mechanism == cred.Mechanism })
		return append(creds, cred), nil
	})
}

// DeleteScramCredential removes user's credential of mechanism;
// disbackend.ErrCredentialNotFound when there is none.
func (s *Store) DeleteScramCredential(ctx context.Context, user, mechanism string) error {
	return s.updateScram(ctx, user, func(creds []disbackend.ScramCredential) ([]disbackend.ScramCredential, error) {
		n := len(creds)
		creds = slices.DeleteFunc(creds, func(c disbackend.ScramCredential) bool { return c.Mechanism == mechanism })
		if len(creds) == n {
			return nil, disbackend.ErrCredentialNotFound
		}
		return creds, nil
	})
}

func (s *Store) updateScram(ctx context.Context, user string, f func([]disbackend.ScramCredential) ([]disbackend.ScramCredential, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.enter("write scram credentials"); err != nil {
		return err
	}
	defer s.dbMu.RUnlock()
	s.scramMu.Lock()
	defer s.scramMu.Unlock()
	creds, err := s.getScram(user)
	if err != nil {
		return err
	}
	creds, err = f(creds)
	if err != nil {
		return err
	}
	if len(creds) == 0 {
		err = s.db.Delete(scramKey(user), pebble.Sync)
	} else {
		err = s.db.Set(scramKey(user), mustJSON(creds), pebble.Sync)
	}
	if err != nil {
		return fmt.Errorf("localstore: write scram credentials: %w", metaErr(err))
	}
	return nil
}
