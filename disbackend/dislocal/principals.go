package dislocal

// Several key pairs, per-key denials and the record of who called: what a
// test of a client acting with its users' own credentials (disgw's dis
// authentication mode) needs from DIS's IAM.

import (
	"context"
	"net/http"
	"strings"
)

// maxCallLog bounds Options.CallLog.
const maxCallLog = 100000

type accessKeyCtx struct{}

// withAccessKey returns ctx carrying the AK a request was signed with.
func withAccessKey(ctx context.Context, ak string) context.Context {
	return context.WithValue(ctx, accessKeyCtx{}, ak)
}

// accessKeyOf is the AK a request was signed with; "" for a token or no
// authentication.
func accessKeyOf(ctx context.Context) string {
	ak, _ := ctx.Value(accessKeyCtx{}).(string)
	return ak
}

// secretOf returns the SK of ak among Options.AK and Options.Keys.
func (s *Server) secretOf(ak string) (string, bool) {
	if ak != "" && ak == s.opts.AK {
		return s.opts.SK, true
	}
	sk, ok := s.opts.Keys[ak]
	return sk, ok
}

// signing reports whether requests must be signed: Options.AK or Keys set.
func (s *Server) signing() bool { return s.opts.AK != "" || len(s.opts.Keys) > 0 }

// denied answers 403 DIS.4116, as DIS's IAM does, when the request's AK
// may not touch stream (Options.Deny); nil otherwise.
func (s *Server) denied(ctx context.Context, stream string) *disError {
	if stream == "" || len(s.opts.Deny) == 0 {
		return nil
	}
	ak := accessKeyOf(ctx)
	for _, prefix := range s.opts.Deny[ak] {
		if strings.HasPrefix(stream, prefix) {
			return errf(403, "DIS.4116", "RBAC: operation not permitted. [access key %s on stream %s]", ak, stream)
		}
	}
	return nil
}

// deniedRoute is denied for the stream a route names in its path or
// query (stream_name, stream-name).
func (s *Server) deniedRoute(r *http.Request, vars map[string]string) *disError {
	name := vars["stream_name"]
	if name == "" {
		q := r.URL.Query()
		name = q.Get("stream-name")
		if name == "" {
			name = q.Get("stream_name")
		}
	}
	return s.denied(r.Context(), name)
}

// Call is one PutRecords served (Options.CallLog): who signed it and what
// it carried.
type Call struct {
	// Op is the operation, "SendRecords".
	Op string `json:"op"`
	// AccessKey is the AK the request was signed with ("" for a token or
	// no authentication).
	AccessKey string `json:"access_key"`
	// Stream is the stream written to.
	Stream string `json:"stream"`
	// Data are the records' data, in the request's order.
	Data [][]byte `json:"data"`
}

// logCall keeps c in the call log (the last Options.CallLog calls).
func (s *Server) logCall(c Call) {
	n := min(s.opts.CallLog, maxCallLog)
	if n <= 0 {
		return
	}
	s.countMu.Lock()
	defer s.countMu.Unlock()
	s.calls = append(s.calls, c)
	if len(s.calls) > n {
		s.calls = append(s.calls[:0:0], s.calls[len(s.calls)-n:]...)
	}
}

// Calls returns a copy of the call log, oldest first.
func (s *Server) Calls() []Call {
	s.countMu.Lock()
	defer s.countMu.Unlock()
	return append([]Call(nil), s.calls...)
}
