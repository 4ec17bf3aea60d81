package gateway

// AlterUserScramCredentials: v0 (KIP-554), flexible.
//
// Upsertions carry the client-salted password (Salt, Iterations,
// SaltedPassword); the gateway stores only the salt, the iteration count,
// StoredKey and ServerKey (RFC 5802) in the credential store
// (disbackend.CredentialStore: the backend's, so every node shares them
// and they survive restarts). One result per user; a user whose
// operations are not all valid has none applied. Errors as Kafka 4.4:
// UNACCEPTABLE_CREDENTIAL (empty user name, iterations outside
// 4096..16384, empty salt or salted password), UNSUPPORTED_SASL_MECHANISM
// (a mechanism other than 1 SCRAM-SHA-256 and 2 SCRAM-SHA-512),
// DUPLICATE_RESOURCE (a user and mechanism altered twice in the request),
// RESOURCE_NOT_FOUND (deleting a credential that does not exist); store
// failures map through errmap.

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

func init() {
	registerAPI(51, 0, 0, (*conn).handleAlterUserScramCredentials, clusterOp(acl.OpAlter, refuseAlterUserSCRAMCredentials))
	// Nothing to read again: SCRAM credentials are read from the backend
	// at each authentication.
	controllerOnly(51, refuseAlterUserSCRAMCredentials, nil)
}

// refuseAlterUserSCRAMCredentials answers each user the request names,
// once, with code.
func refuseAlterUserSCRAMCredentials(r *kmsg.AlterUserSCRAMCredentialsRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	seen := map[string]bool{}
	add := func(user string) {
		if !seen[user] {
			seen[user] = true
			res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			res.User, res.ErrorCode = user, code
			resp.Results = append(resp.Results, res)
		}
	}
	for _, d := range r.Deletions {
		add(d.Name)
	}
	for _, u := range r.Upsertions {
		add(u.Name)
	}
	return resp
}

// scramOp is one deletion (cred nil) or upsertion of a user.
type scramOp struct {
	mechanism string
	cred      *disbackend.ScramCredential
}

func (c *conn) handleAlterUserScramCredentials(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := r.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)

	var order []string
	ops := map[string][]scramOp{}
	fail := map[string]*kerr.Error{}
	msgs := map[string]string{}
	seen := map[[2]string]bool{}
	setFail := func(user string, e *kerr.Error, msg string) {
		if fail[user] == nil {
			fail[user], msgs[user] = e, msg
		}
	}
	add := func(user string, mech int8, op scramOp, check func() (*kerr.Error, string)) {
		if _, ok := ops[user]; !ok {
			order = append(order, user)
			ops[user] = nil
		}
		name := scramMechanismName(mech)
		switch {
		case user == "":
			setFail(user, kerr.UnacceptableCredential, "Username must not be empty")
			return
		case name == "":
			setFail(user, kerr.UnsupportedSaslMechanism, fmt.Sprintf("Unknown SCRAM mechanism %d", mech))
			return
		case seen[[2]string{user, name}]:
			setFail(user, kerr.DuplicateResource, "A user credential cannot be altered twice in the same request")
			return
		}
		seen[[2]string{user, name}] = true
		if check != nil {
			if e, msg := check(); e != nil {
				setFail(user, e, msg)
				return
			}
		}
		op.mechanism = name
		if op.cred != nil {
			op.cred.Mechanism = name
		}
		ops[user] = append(ops[user], op)
	}
	for _, d := range r.Deletions {
		add(d.Name, d.Mechanism, scramOp{}, nil)
	}
	for _, u := range r.Upsertions {
		cred := scramFromSaltedPassword(scramMechanismName(u.Mechanism), u.Salt, u.SaltedPassword, u.Iterations)
		add(u.Name, u.Mechanism, scramOp{cred: &cred}, func() (*kerr.Error, string) {
			switch {
			case u.Iterations < MinScramIterations:
				return kerr.UnacceptableCredential, fmt.Sprintf("Too few iterations: %d is below the minimum %d", u.Iterations, MinScramIterations)
			case u.Iterations > MaxScramIterations:
				return kerr.UnacceptableCredential, fmt.Sprintf("Too many iterations: %d is above the maximum %d", u.Iterations, MaxScramIterations)
			case len(u.Salt) == 0:
				return kerr.UnacceptableCredential, "Salt must not be empty"
			case len(u.SaltedPassword) == 0:
				return kerr.UnacceptableCredential, "Salted password must not be empty"
			}
			return nil, ""
		})
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.s.cfg.RequestOverhead)
	defer cancel()
	for _, user := range order {
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = user
		if e := fail[user]; e != nil {
			res.ErrorCode = e.Code
			msg := msgs[user]
			res.ErrorMessage = &msg
			resp.Results = append(resp.Results, res)
			continue
		}
		var err error
		for _, op := range ops[user] {
			if op.cred == nil {
				err = c.s.creds.DeleteScramCredential(ctx, user, op.mechanism)
			} else {
				err = c.s.creds.PutScramCredential(ctx, user, *op.cred)
			}
			if err != nil {
				break
			}
		}
		if err != nil {
			res.ErrorCode = kafkaError(c.log, err)
			msg := kerr.ErrorForCode(res.ErrorCode).Error()
			if errors.Is(err, disbackend.ErrCredentialNotFound) {
				msg = "Attempt to delete a user credential that does not exist"
			}
			res.ErrorMessage = &msg
		} else {
			c.log.Info("SCRAM credentials altered", zap.String("user", user), zap.Int("operations", len(ops[user])))
		}
		resp.Results = append(resp.Results, res)
	}
	return ready(req, resp)
}
