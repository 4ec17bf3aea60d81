package gateway

import (
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Authorized operations (KIP-430) as Kafka computes them with no
// authorizer configured: every operation the resource type supports, one
// bit per AclOperation code (AuthHelper.authorizedOperations over
// ResourceType's supported operations; checked against Apache Kafka 4.4:
// a topic 3576, the cluster 8096). That is disgw's answer without the
// authorizer (Config.Authorizer off); with it, authorize.go computes the
// operations the principal is allowed.
const (
	// topicAuthorizedOps: READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE,
	// DESCRIBE_CONFIGS, ALTER_CONFIGS.
	topicAuthorizedOps = int32(1<<kmsg.ACLOperationRead | 1<<kmsg.ACLOperationWrite |
		1<<kmsg.ACLOperationCreate | 1<<kmsg.ACLOperationDelete | 1<<kmsg.ACLOperationAlter |
		1<<kmsg.ACLOperationDescribe | 1<<kmsg.ACLOperationDescribeConfigs | 1<<kmsg.ACLOperationAlterConfigs)
	// clusterAuthorizedOps: CREATE, ALTER, DESCRIBE, CLUSTER_ACTION,
	// DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE.
	clusterAuthorizedOps = int32(1<<kmsg.ACLOperationCreate | 1<<kmsg.ACLOperationAlter |
		1<<kmsg.ACLOperationDescribe | 1<<kmsg.ACLOperationClusterAction |
		1<<kmsg.ACLOperationDescribeConfigs | 1<<kmsg.ACLOperationAlterConfigs |
		1<<kmsg.ACLOperationIdempotentWrite)
	// opsNotRequested is Kafka's value of an authorized-operations field
	// the request did not ask for (Integer.MIN_VALUE).
	opsNotRequested = int32(math.MinInt32)
)

// authorizedOps is ops when asked for, else opsNotRequested.
func authorizedOps(asked bool, ops int32) int32 {
	if asked {
		return ops
	}
	return opsNotRequested
}
