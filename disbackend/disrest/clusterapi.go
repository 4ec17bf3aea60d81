package disrest

// DIS's consumer-group calls, which cluster mode uses for the membership
// of the gateway nodes (docs/cluster.md §1-2; the wire shapes are in
// docs/dis-api.md §4.1). The Go SDK has no models for them, so they are
// sent, like PutRecords (putrecords.go), with request definitions of our
// own through the SDK's HTTP client, which signs them.

import (
	"context"
	"net/http"

	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/def"
)

// The answers' states (the Java SDK's JoinGroupResponseState,
// SyncGroupResponseState and HeartBeatResponseState).
const (
	groupOK             = "OK"
	groupRejoin         = "REJOIN"
	groupWaiting        = "WAITING"
	groupErrSub         = "ERR_SUBSCRIPTION"
	groupNotExist       = "GROUP_NOT_EXIST"
	groupStateJoining   = "JOINING"
	groupStateSyncing   = "SYNCING"
	groupStateStable    = "STABLE"
	groupNoGeneration   = int64(-1) // SyncGroup's generation before the first assignment
	groupSyncRetryDelay = 500       // ms between SyncGroups answered WAITING (the adapter's)
)

// joinGroupBody is JoinGroup's body (the Java SDK's JoinGroupRequest).
type joinGroupBody struct {
	GroupID                 string   `json:"groupId"`
	ClientID                string   `json:"clientId"`
	InterestedStream        []string `json:"interestedStream"`
	InterestedStreamIDList  []string `json:"interestedStreamIdList"`
	AccelerateAssignEnabled bool     `json:"accelerateAssignEnabled"`
	RebalanceTimeoutMs      int64    `json:"rebalanceTimeoutMs"`
}

// memberBody is SyncGroup's and Heartbeat's body.
type memberBody struct {
	GroupID    string `json:"groupId"`
	ClientID   string `json:"clientId"`
	Generation int64  `json:"generation"`
}

// groupRequest is the request of a group call: the path's app and client
// id, and the body (none for LeaveGroup).
type groupRequest struct {
	AppName  string `json:"app_name"`
	ClientID string `json:"client_id"`
	Body     any    `json:"body,omitempty"`
}

// groupResponse is the answer of any group call (HTTP 200, its outcome in
// State): JoinGroup's syncDelayedTimeMs, SyncGroup's generation and
// assignment ({stream: [partition, ...]}).
type groupResponse struct {
	HttpStatusCode    int                `json:"-"` // set by the SDK, by this name
	State             string             `json:"state"`
	SyncDelayedTimeMs *int64             `json:"syncDelayedTimeMs,omitempty"`
	Generation        *int64             `json:"generation,omitempty"`
	Assignment        map[string][]int32 `json:"assignment,omitempty"`
}

// groupRequestDef is the definition of a group call: method, path (relative to
// /v2/{project_id}/apps/{app_name}/consumers/, with {client_id}), and
// whether it has a body.
func groupRequestDef(method, path string, body bool) *def.HttpRequestDef {
	b := def.NewHttpRequestDefBuilder().
		WithMethod(method).
		WithPath("/v2/{project_id}/apps/{app_name}/consumers/" + path).
		WithResponse(new(groupResponse)).
		WithContentType("application/json").
		WithRequestField(def.NewFieldDef().WithName("AppName").WithJsonTag("app_name").WithLocationType(def.Path))
	if path != "" {
		b = b.WithRequestField(def.NewFieldDef().WithName("ClientID").WithJsonTag("client_id").WithLocationType(def.Path))
	}
	if body {
		b = b.WithRequestField(def.NewFieldDef().WithName("Body").WithLocationType(def.Body))
	}
	return b.Build()
}

// groupCall sends one group call with callIdempotent's retries (DIS.5xxx,
// DIS.4303/4305/4309, no answer): every one of them may be sent again (a
// JoinGroup sent twice joins once, a SyncGroup or Heartbeat only reads, a
// LeaveGroup of a member gone is OK).
func (s *Store) groupCall(ctx context.Context, op, method, path string, req *groupRequest) (*groupResponse, error) {
	return callIdempotent(ctx, s, op, func() (*groupResponse, error) {
		v, err := s.c.HcClient.Sync(req, groupRequestDef(method, path, req.Body != nil))
		if err != nil {
			return nil, err
		}
		return v.(*groupResponse), nil
	})
}

// joinGroup is DIS JoinGroup, POST /v2/{project_id}/apps/{app}/consumers/:
// clientID joins app's group subscribed to stream, asking for a join
// window of rebalanceMs. Answers state OK with syncDelayedTimeMs (how long
// to wait before SyncGroup), GROUP_NOT_EXIST (no such app),
// ERR_SUBSCRIPTION (no such stream), REJOIN or ERROR.
func (s *Store) joinGroup(ctx context.Context, app, clientID, stream string, rebalanceMs int64) (*groupResponse, error) {
	return s.groupCall(ctx, "join group", http.MethodPost, "", &groupRequest{AppName: app, Body: &joinGroupBody{
		GroupID: app, ClientID: clientID, InterestedStream: []string{stream}, InterestedStreamIDList: []string{},
		RebalanceTimeoutMs: rebalanceMs,
	}})
}

// syncGroup is DIS SyncGroup, POST
// /v2/{project_id}/apps/{app}/consumers/{client}/partitions/ (generation:
// the member's last one, -1 before its first). Answers state OK with
// generation and assignment, WAITING (the rebalance is not done: ask
// again), REJOIN or GROUP_NOT_EXIST.
func (s *Store) syncGroup(ctx context.Context, app, clientID string, generation int64) (*groupResponse, error) {
	return s.groupCall(ctx, "sync group", http.MethodPost, "{client_id}/partitions/", &groupRequest{AppName: app, ClientID: clientID,
		Body: &memberBody{GroupID: app, ClientID: clientID, Generation: generation}})
}

// heartbeat is DIS Heartbeat, POST
// /v2/{project_id}/apps/{app}/consumers/{client}/heartbeats/. Answers state
// STABLE (generation is current), SYNCING (a new assignment to fetch with
// SyncGroup), JOINING (join again) or GROUP_NOT_EXIST.
func (s *Store) heartbeat(ctx context.Context, app, clientID string, generation int64) (*groupResponse, error) {
	return s.groupCall(ctx, "heartbeat", http.MethodPost, "{client_id}/heartbeats/", &groupRequest{AppName: app, ClientID: clientID,
		Body: &memberBody{GroupID: app, ClientID: clientID, Generation: generation}})
}

// leaveGroup is DIS LeaveGroup, DELETE
// /v2/{project_id}/apps/{app}/consumers/{client}/ (no body): the others
// rebalance at once instead of after the session timeout.
func (s *Store) leaveGroup(ctx context.Context, app, clientID string) error {
	_, err := s.groupCall(ctx, "leave group", http.MethodDelete, "{client_id}/", &groupRequest{AppName: app, ClientID: clientID})
	return err
}
