// Package disapi holds facts of the Huawei Cloud DIS REST API v2 that are
// shared by the client (disbackend/disrest) and the emulator
// (disbackend/dislocal): DIS's error codes and its documented limits, as
// named constants, each with DIS's meaning as docs/dis-api.md (§6 and §7)
// gives it.
//
// It owns no behaviour: no HTTP, no mapping of codes to backend errors
// (disrest's errors.go does that) and nothing of Kafka. Its one model is
// the JSON body of PutRecords (records.go), which disrest encodes and
// dislocal decodes. It imports only the standard library, so that both
// sides of the wire can use it without depending on each other.
package disapi

// DIS error codes (docs/dis-api.md §7). DIS answers them in the body
// {"errorCode":"DIS.xxxx","message":"..."}, with HTTP 441 for the
// authentication failures DIS.4100-DIS.4115, 403 for DIS.4116, 500 for
// DIS.5xxx and 400 otherwise; PutRecords also returns them per record in an
// HTTP 200 answer.
const (
	// CodePrefixAuth begins every authentication and authorization code:
	// DIS.4100-DIS.4115 (HTTP 441), DIS.4116 (403) and DIS.4117 (invalid
	// project ID): the caller's credentials or project are wrong.
	CodePrefixAuth = "DIS.41"

	// CodeBadSignature is DIS.4100: "signature (AK/SK) wrong".
	CodeBadSignature = "DIS.4100"
	// CodeAuthorizationEmpty is DIS.4101: "Authorization header empty".
	CodeAuthorizationEmpty = "DIS.4101"
	// CodeAuthorizationUnparsable is DIS.4102: "Authorization header
	// unparsable".
	CodeAuthorizationUnparsable = "DIS.4102"
	// CodeSDKDateEmpty is DIS.4103: "X-Sdk-Date empty".
	CodeSDKDateEmpty = "DIS.4103"
	// CodeSDKDateUnparsable is DIS.4104: "X-Sdk-Date unparsable".
	CodeSDKDateUnparsable = "DIS.4104"
	// CodeSDKDateInvalid is DIS.4105: "X-Sdk-Date invalid (e.g. skew)".
	CodeSDKDateInvalid = "DIS.4105"
	// CodeAKMissing is DIS.4106: "AK missing in Authorization".
	CodeAKMissing = "DIS.4106"
	// CodeAKInvalid is DIS.4107: "AK invalid/deleted/expired".
	CodeAKInvalid = "DIS.4107"
	// CodeServiceNameMissing is DIS.4108: "service name (dis) missing in
	// Authorization".
	CodeServiceNameMissing = "DIS.4108"
	// CodeAuthorizationIncomplete is DIS.4109: "Authorization lacks
	// Credential/SignedHeaders/Signature".
	CodeAuthorizationIncomplete = "DIS.4109"
	// CodeSignedHeadersMissing is DIS.4110: "SignedHeaders missing".
	CodeSignedHeadersMissing = "DIS.4110"
	// CodeRegionInvalid is DIS.4111: "region in Authorization invalid".
	CodeRegionInvalid = "DIS.4111"
	// CodeAuthorizationInvalid is DIS.4112: "invalid authorization request
	// (signature/AK/SK/region)".
	CodeAuthorizationInvalid = "DIS.4112"
	// CodeTokenEmpty is DIS.4113: "X-Auth-Token empty".
	CodeTokenEmpty = "DIS.4113"
	// CodeTokenInvalid is DIS.4114: "X-Auth-Token invalid".
	CodeTokenInvalid = "DIS.4114"
	// CodeForbidden is DIS.4116 (HTTP 403): "RBAC: operation not permitted
	// (no permission, arrears, not real-name verified)".
	CodeForbidden = "DIS.4116"
	// CodeProjectIDInvalid is DIS.4117: "invalid project ID".
	CodeProjectIDInvalid = "DIS.4117"

	// CodeInvalidRequest is DIS.4200: "invalid request".
	CodeInvalidRequest = "DIS.4200"
	// CodePartitionIDInvalid is DIS.4201: "invalid partition_id".
	CodePartitionIDInvalid = "DIS.4201"
	// CodeEmptyRequest is DIS.4202: "empty request".
	CodeEmptyRequest = "DIS.4202"
	// CodeMetricsLabelInvalid is DIS.4209: "invalid metrics label".
	CodeMetricsLabelInvalid = "DIS.4209"
	// CodeCursorTypeInvalid is DIS.4215: "invalid cursor-type".
	CodeCursorTypeInvalid = "DIS.4215"
	// CodeSequenceNumberInvalid is DIS.4216: "invalid
	// starting-sequence-number".
	CodeSequenceNumberInvalid = "DIS.4216"
	// CodeCursorInvalid is DIS.4217: "invalid partition-cursor".
	CodeCursorInvalid = "DIS.4217"
	// CodeSequenceNumberOutOfRange is DIS.4224: "sequence number out of
	// range (GetCursor)".
	CodeSequenceNumberOutOfRange = "DIS.4224"
	// CodeCursorExpired is DIS.4225: "partition cursor expired".
	CodeCursorExpired = "DIS.4225"
	// CodeSequenceNumberExpired is DIS.4226: "SN behind the cursor has
	// expired / iterator error (GetRecords) — get a new cursor".
	CodeSequenceNumberExpired = "DIS.4226"

	// CodeBodyError is DIS.4300: "request body error".
	CodeBodyError = "DIS.4300"
	// CodeStreamNotFound is DIS.4301: "stream does not exist".
	CodeStreamNotFound = "DIS.4301"
	// CodePartitionNotFound is DIS.4302: "partition does not exist".
	CodePartitionNotFound = "DIS.4302"
	// CodeFlowControl is DIS.4303: "exceeded traffic control limit (also
	// per-record in PutRecords)".
	CodeFlowControl = "DIS.4303"
	// CodeTooManyRequests is DIS.4305: "too many stream requests" (the
	// per-user request rate).
	CodeTooManyRequests = "DIS.4305"
	// CodeStreamExists is DIS.4307: "stream already exists".
	CodeStreamExists = "DIS.4307"
	// CodePartitionQuota is DIS.4308: "insufficient stream/partition
	// quota".
	CodePartitionQuota = "DIS.4308"
	// CodeIPBlacklisted is DIS.4309: "IP black-listed after too many failed
	// requests" (temporarily).
	CodeIPBlacklisted = "DIS.4309"
	// CodePartitionExpired is DIS.4319: "partition expired (after
	// scale-down)".
	CodePartitionExpired = "DIS.4319"
	// CodeAppExists is DIS.4330: "app already exists".
	CodeAppExists = "DIS.4330"
	// CodeAppNotFound is DIS.4332: "app not found".
	CodeAppNotFound = "DIS.4332"
	// CodeAgencyInvalid is DIS.4335: "invalid IAM agency (dump)".
	CodeAgencyInvalid = "DIS.4335"
	// CodeTransferTaskNotFound is DIS.4354: "dump task does not exist".
	CodeTransferTaskNotFound = "DIS.4354"
	// CodeNoCheckpoint is DIS.4375: "app has not committed a checkpoint on
	// this stream".
	CodeNoCheckpoint = "DIS.4375"

	// CodeTagQuota is DIS.4601: "tag quota (10) reached".
	CodeTagQuota = "DIS.4601"
	// CodeResourceNotFound is DIS.4603: "resource does not exist".
	CodeResourceNotFound = "DIS.4603"
	// CodeTagKeyNotFound is DIS.4604: "tag key does not exist".
	CodeTagKeyNotFound = "DIS.4604"
	// CodeTagActionUnsupported is DIS.4605: "tag action not supported (only
	// create/delete)".
	CodeTagActionUnsupported = "DIS.4605"

	// CodeGroupRebalancing is DIS.4701: "consumer group rebalance in
	// progress" (a CommitCheckpoint with client_id and generation_id while
	// the app's consumer group rebalances; the Java SDK's
	// DISConsumerGroupRebalanceInProgressException).
	CodeGroupRebalancing = "DIS.4701"
	// CodeGroupMemberNotFound is DIS.4702: "consumer member does not exist"
	// (DISConsumerMemberNotExistsException).
	CodeGroupMemberNotFound = "DIS.4702"
	// CodeGroupIllegalGeneration is DIS.4703: "illegal consumer group
	// generation" (DISConsumerGroupIllegalGenerationException).
	CodeGroupIllegalGeneration = "DIS.4703"

	// CodePrefixSystem begins DIS's system errors, DIS.5000-DIS.5999 (HTTP
	// 500): "system error; SDKs treat DIS.5* as retriable".
	CodePrefixSystem = "DIS.5"
	// CodeSystemError is DIS.5000: "system error".
	CodeSystemError = "DIS.5000"
)
