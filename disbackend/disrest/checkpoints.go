package disrest

// Fenced checkpoints (docs/cluster.md §1): a CommitCheckpoint carrying the
// committing member's client_id and generation_id, which DIS checks
// against the consumer group of the app committed to, refusing it while
// the group rebalances (DIS.4701), for a member it does not know (DIS.4702)
// and for a generation that is not the group's current one (DIS.4703). The
// SDK's CommitCheckpointReq has neither field, so the request is sent with
// a definition of our own, as PutRecords is (putrecords.go).

import (
	"context"
	"net/http"
	"strconv"

	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/def"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2/model"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/disapi"
)

// nodesApp is the membership app of cluster mode: its consumer group's
// members are the gateway nodes, and its checkpoints are the commits DIS
// fences (the lease, the idempotence intents).
const nodesApp = "__disgw-nodes"

// fencedCheckpointBody is CommitCheckpoint's body (POST
// /v2/{project_id}/checkpoints) with the member fields the SDK lacks.
type fencedCheckpointBody struct {
	AppName        string  `json:"app_name"`
	CheckpointType string  `json:"checkpoint_type"`
	StreamName     string  `json:"stream_name"`
	PartitionID    string  `json:"partition_id"`
	SequenceNumber string  `json:"sequence_number"`
	Metadata       *string `json:"metadata,omitempty"`
	ClientID       string  `json:"client_id"`
	GenerationID   int64   `json:"generation_id"`
}

type fencedCheckpointRequest struct {
	Body *fencedCheckpointBody `json:"body,omitempty"`
}

// fencedCheckpointDef is the SDK's CommitCheckpoint definition with our
// request model.
func fencedCheckpointDef() *def.HttpRequestDef {
	return def.NewHttpRequestDefBuilder().
		WithMethod(http.MethodPost).
		WithPath("/v2/{project_id}/checkpoints").
		WithResponse(new(model.CommitCheckpointResponse)).
		WithContentType("application/json").
		WithRequestField(def.NewFieldDef().WithName("Body").WithLocationType(def.Body)).
		Build()
}

// commitFenced writes app's LAST_READ checkpoint of partition part of
// stream at sequence number sn with metadata meta, as member clientID of
// app's consumer group in generation gen: DIS takes it only while clientID
// is a member of the group's current generation gen (see fenceRefused).
// Sent again on DIS.5xxx, DIS.4303/4305/4309 or no answer, as commit is
// (callIdempotent). DIS CommitCheckpoint with client_id and generation_id.
func (s *Store) commitFenced(ctx context.Context, app, stream string, part int32, sn int64, meta, clientID string, gen int64) error {
	body := &fencedCheckpointBody{AppName: app, CheckpointType: model.GetCommitCheckpointReqCheckpointTypeEnum().LAST_READ.Value(),
		StreamName: stream, PartitionID: disbackend.PartitionID(part), SequenceNumber: strconv.FormatInt(sn, 10),
		Metadata: &meta, ClientID: clientID, GenerationID: gen}
	_, err := callIdempotent(ctx, s, "commit checkpoint", func() (*model.CommitCheckpointResponse, error) {
		v, err := s.c.HcClient.Sync(&fencedCheckpointRequest{Body: body}, fencedCheckpointDef())
		if err != nil {
			return nil, err
		}
		return v.(*model.CommitCheckpointResponse), nil
	})
	return err
}

// fenceRefused reports whether err is DIS refusing a fenced checkpoint:
// the group rebalancing (DIS.4701), the member unknown (DIS.4702) or its
// generation stale (DIS.4703).
func fenceRefused(err error) bool {
	switch codeOf(err) {
	case disapi.CodeGroupRebalancing, disapi.CodeGroupMemberNotFound, disapi.CodeGroupIllegalGeneration:
		return true
	}
	return false
}
