package localstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/disgw/disgw/disbackend"
)

var _ disbackend.ACLStore = (*Store)(nil)

// ACLs returns the ACL bindings kept under keyACLs. Errors: ErrClosed, a
// Pebble error, or an unreadable value.
func (s *Store) ACLs(ctx context.Context) ([]disbackend.ACL, error) {
	if err := s.enter("acls"); err != nil {
		return nil, err
	}
	defer s.dbMu.RUnlock()
	return s.readACLs()
}

// readACLs reads the bindings. Requires dbMu.
func (s *Store) readACLs() ([]disbackend.ACL, error) {
	v, closer, err := s.db.Get([]byte{keyACLs})
	if err == pebble.ErrNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("localstore: acls: %w", err)
	}
	defer closer.Close()
	var acls []disbackend.ACL
	if err := json.Unmarshal(v, &acls); err != nil {
		return nil, fmt.Errorf("localstore: acls: unreadable: %w", err)
	}
	return acls, nil
}

// UpdateACLs replaces the ACL bindings with update's result and syncs
// them; updates are serialised. Errors: ErrClosed, update's error, a
// Pebble error.
func (s *Store) UpdateACLs(ctx context.Context, update func([]disbackend.ACL) ([]disbackend.ACL, error)) error {
	s.aclMu.Lock()
	defer s.aclMu.Unlock()
	if err := s.enter("acls"); err != nil {
		return err
	}
	defer s.dbMu.RUnlock()
	cur, err := s.readACLs()
	if err != nil {
		return err
	}
	next, err := update(cur)
	if err != nil {
		return err
	}
	v, err := json.Marshal(next)
	if err != nil {
		return fmt.Errorf("localstore: acls: %w", err)
	}
	if err := s.db.Set([]byte{keyACLs}, v, pebble.Sync); err != nil {
		return fmt.Errorf("localstore: acls: %w", metaErr(err))
	}
	return nil
}
