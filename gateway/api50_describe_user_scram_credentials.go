package gateway

// DescribeUserScramCredentials: v0 (KIP-554), flexible.
//
// Lists the SCRAM mechanisms and iteration counts of the users asked (all
// users with a credential when Users is null or empty), from the
// credential store (disbackend.CredentialStore; never salts or keys). A
// user without a credential gets RESOURCE_NOT_FOUND, a user asked twice
// DUPLICATE_RESOURCE, as Kafka 4.4 answers; a store failure is the
// top-level error (errmap).

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

func init() {
	registerAPI(50, 0, 0, (*conn).handleDescribeUserScramCredentials, clusterOp(acl.OpDescribe, refuseDescribeUserSCRAMCredentials))
}

// refuseDescribeUserSCRAMCredentials answers the request with code.
func refuseDescribeUserSCRAMCredentials(r *kmsg.DescribeUserSCRAMCredentialsRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	resp.ErrorCode = code
	return resp
}

// scramMechanismCode is the int8 of a mechanism in the SCRAM APIs
// (Kafka's ScramMechanism): 1 SCRAM-SHA-256, 2 SCRAM-SHA-512, 0 unknown.
func scramMechanismCode(m string) int8 {
	switch m {
	case disbackend.ScramSHA256:
		return 1
	case disbackend.ScramSHA512:
		return 2
	}
	return 0
}

func scramMechanismName(code int8) string {
	switch code {
	case 1:
		return disbackend.ScramSHA256
	case 2:
		return disbackend.ScramSHA512
	}
	return ""
}

func (c *conn) handleDescribeUserScramCredentials(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	ctx, cancel := context.WithTimeout(c.ctx, c.s.cfg.RequestOverhead)
	defer cancel()
	all, err := c.s.creds.ListScramCredentials(ctx)
	if err != nil {
		resp.ErrorCode = kafkaError(c.log, err)
		msg := kerr.ErrorForCode(resp.ErrorCode).Error()
		resp.ErrorMessage = &msg
		return ready(req, resp)
	}
	result := func(user string, creds []disbackend.ScramCredential) kmsg.DescribeUserSCRAMCredentialsResponseResult {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = user
		slices.SortFunc(creds, func(a, b disbackend.ScramCredential) int { return strings.Compare(a.Mechanism, b.Mechanism) })
		for _, cr := range creds {
			ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
			ci.Mechanism, ci.Iterations = scramMechanismCode(cr.Mechanism), cr.Iterations
			res.CredentialInfos = append(res.CredentialInfos, ci)
		}
		return res
	}
	if len(r.Users) == 0 {
		names := slices.Sorted(func(yield func(string) bool) {
			for u, cs := range all {
				if len(cs) > 0 && !yield(u) {
					return
				}
			}
		})
		for _, u := range names {
			resp.Results = append(resp.Results, result(u, all[u]))
		}
		return ready(req, resp)
	}
	count := map[string]int{}
	for _, u := range r.Users {
		count[u.Name]++
	}
	done := map[string]bool{}
	for _, u := range r.Users {
		if done[u.Name] {
			continue
		}
		done[u.Name] = true
		res := result(u.Name, all[u.Name])
		switch {
		case count[u.Name] > 1:
			res.CredentialInfos = nil
			res.ErrorCode = kerr.DuplicateResource.Code
			msg := "Cannot describe SCRAM credentials for the same user twice in a single request: " + u.Name
			res.ErrorMessage = &msg
		case len(all[u.Name]) == 0:
			res.ErrorCode = kerr.ResourceNotFound.Code
			msg := "Attempt to describe a user credential that does not exist: " + u.Name
			res.ErrorMessage = &msg
		}
		resp.Results = append(resp.Results, res)
	}
	return ready(req, resp)
}
