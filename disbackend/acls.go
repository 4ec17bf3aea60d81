package disbackend

import "context"

// ACL is one Kafka ACL binding (Kafka AclBinding), kept by an ACLStore.
// The numeric fields hold Kafka's wire codes (kmsg.ACLResourceType,
// ACLResourcePatternType, ACLOperation, ACLPermissionType): this package
// imports no Kafka wire types.
type ACL struct {
	ResourceType int8   // TOPIC 2, GROUP 3, CLUSTER 4, TRANSACTIONAL_ID 5, DELEGATION_TOKEN 6, USER 7
	ResourceName string // a name, a prefix (PREFIXED) or "*" (LITERAL wildcard)
	PatternType  int8   // LITERAL 3, PREFIXED 4
	Principal    string // "User:alice", "User:*"
	Host         string // an IP address or "*"
	Operation    int8   // ALL 2, READ 3, WRITE 4, ... (kmsg.ACLOperation)
	Permission   int8   // DENY 2, ALLOW 3
}

// ACLStore keeps the cluster's ACL bindings where every gateway node
// reads them and a restart finds them: the embedded store in its Pebble
// metadata, the DIS backend in DIS (checkpoint metadata of gateway-owned
// apps). A backend that can keep ACLs implements it; the gateway's
// authorizer needs it.
type ACLStore interface {
	// ACLs returns every binding, in no particular order. Errors:
	// ErrClosed, or a storage error.
	ACLs(ctx context.Context) ([]ACL, error)
	// UpdateACLs replaces the bindings with what update returns given the
	// current ones, durably. update may run more than once and must not
	// keep its argument; an error from it is returned unchanged and
	// nothing is written. The embedded store serialises updates; on DIS
	// two nodes updating at the same instant can lose one update (DIS has
	// no conditional write). Errors: ErrClosed, ErrInvalidConfig (the
	// bindings do not fit in what the backend can keep), a storage error.
	UpdateACLs(ctx context.Context, update func([]ACL) ([]ACL, error)) error
}
