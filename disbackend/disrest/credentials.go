package disrest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2/model"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/disapi"
)

// SCRAM credentials are kept in DIS, so every gateway node sees the same
// users and they survive restarts: one gateway-owned app per user,
// scramAppPrefix and 32 hex digits of the SHA-256 of the user name, whose
// checkpoint on MetaStream's partition 0 holds, as its metadata, the JSON
// scramRecord: the user name and its credentials (salt, iterations,
// StoredKey, ServerKey; never a password). A user's credential record is
// at most disapi.MaxCheckpointMetadataLen characters (with both
// mechanisms, user names up to about 400 bytes). Two nodes altering the
// same user at once: the last write wins.
const scramAppPrefix = "__disgw-scram-"

var _ disbackend.CredentialStore = (*Store)(nil)

type scramRecord struct {
	User  string                       `json:"u"`
	Creds []disbackend.ScramCredential `json:"c"`
}

func scramApp(user string) string {
	sum := sha256.Sum256([]byte(user))
	return scramAppPrefix + hex.EncodeToString(sum[:16])
}

// ScramCredentials returns user's credentials (none for an unknown
// user). DIS GetCheckpoint.
func (s *Store) ScramCredentials(ctx context.Context, user string) ([]disbackend.ScramCredential, error) {
	rec, err := s.scramRecordOf(ctx, scramApp(user))
	if err != nil || rec.User != user {
		return nil, err
	}
	return rec.Creds, nil
}

func (s *Store) scramRecordOf(ctx context.Context, app string) (scramRecord, error) {
	_, meta, err := s.checkpointOf(ctx, app, MetaStream, 0)
	if err != nil {
		if errors.Is(err, disbackend.ErrAppNotFound) || errors.Is(err, disbackend.ErrStreamNotFound) {
			return scramRecord{}, nil
		}
		return scramRecord{}, fmt.Errorf("disrest: read SCRAM credentials: %w", err)
	}
	var rec scramRecord
	if meta == "" {
		return rec, nil
	}
	if err := json.Unmarshal([]byte(meta), &rec); err != nil {
		return scramRecord{}, fmt.Errorf("disrest: SCRAM credentials of app %s are not readable: %v", app, err)
	}
	return rec, nil
}

// ListScramCredentials returns every user's credentials. DIS ListApp, and
// GetCheckpoint per user.
func (s *Store) ListScramCredentials(ctx context.Context) (map[string][]disbackend.ScramCredential, error) {
	out := make(map[string][]disbackend.ScramCredential)
	start := scramAppPrefix
	for {
		limit := int32(disapi.MaxListAppsLimit)
		st := start
		resp, err := callIdempotent(ctx, s, "list apps", func() (*model.ListAppResponse, error) {
			return s.c.ListApp(&model.ListAppRequest{Limit: &limit, StartAppName: &st})
		})
		if err != nil {
			return nil, err
		}
		if resp.Apps == nil || len(*resp.Apps) == 0 {
			break
		}
		past := false
		for _, a := range *resp.Apps {
			if a.AppName == nil {
				continue
			}
			start = *a.AppName
			if !strings.HasPrefix(*a.AppName, scramAppPrefix) {
				if *a.AppName > scramAppPrefix {
					past = true
				}
				continue
			}
			rec, err := s.scramRecordOf(ctx, *a.AppName)
			if err != nil {
				return nil, err
			}
			if rec.User != "" && len(rec.Creds) > 0 {
				out[rec.User] = rec.Creds
			}
		}
		if past || resp.HasMoreApp == nil || !*resp.HasMoreApp {
			break
		}
	}
	return out, nil
}

// PutScramCredential creates or replaces user's credential of
// cred.Mechanism. In cluster mode only the controller writes
// (ErrNotController). DIS CreateApp, DescribeStream, CommitCheckpoint.
func (s *Store) PutScramCredential(ctx context.Context, user string, cred disbackend.ScramCredential) error {
	if err := s.controllerWrite("put SCRAM credential"); err != nil {
		return err
	}
	creds, err := s.ScramCredentials(ctx, user)
	if err != nil {
		return err
	}
	creds = slices.DeleteFunc(creds, func(c disbackend.ScramCredential) bool { return c.Mechanism == cred.Mechanism })
	return s.writeScram(ctx, user, append(creds, cred))
}

// DeleteScramCredential removes user's credential of mechanism
// (ErrCredentialNotFound when there is none); the user's app goes with
// the last one. In cluster mode only the controller writes
// (ErrNotController). DIS DeleteApp or CommitCheckpoint.
func (s *Store) DeleteScramCredential(ctx context.Context, user, mechanism string) error {
	if err := s.controllerWrite("delete SCRAM credential"); err != nil {
		return err
	}
	creds, err := s.ScramCredentials(ctx, user)
	if err != nil {
		return err
	}
	n := len(creds)
	creds = slices.DeleteFunc(creds, func(c disbackend.ScramCredential) bool { return c.Mechanism == mechanism })
	if len(creds) == n {
		return disbackend.ErrCredentialNotFound
	}
	if len(creds) == 0 {
		if err := s.controllerWrite("delete SCRAM credential"); err != nil {
			return err
		}
		if err := s.deleteApp(ctx, scramApp(user)); err != nil && !errors.Is(err, disbackend.ErrAppNotFound) {
			return err
		}
		return nil
	}
	return s.writeScram(ctx, user, creds)
}

func (s *Store) writeScram(ctx context.Context, user string, creds []disbackend.ScramCredential) error {
	b, err := json.Marshal(scramRecord{User: user, Creds: creds})
	if err != nil {
		return err
	}
	if len(b) > disapi.MaxCheckpointMetadataLen {
		return fmt.Errorf("disrest: the SCRAM credentials of a %d-byte user name do not fit a DIS checkpoint: %w", len(user), disbackend.ErrInvalidConfig)
	}
	if err := s.ensureMeta(ctx); err != nil {
		return err
	}
	app := scramApp(user)
	if err := s.ensureApp(ctx, app); err != nil {
		return err
	}
	r, err := s.describeRange(ctx, MetaStream, 0)
	if err != nil {
		return err
	}
	if err := s.controllerWrite("store SCRAM credentials"); err != nil {
		return err
	}
	if err := s.commit(ctx, app, MetaStream, 0, r.First, string(b)); err != nil {
		return fmt.Errorf("disrest: store SCRAM credentials: %w", err)
	}
	return nil
}
