package disrest

import (
	"strconv"
	"strings"
)

// opNames maps the prefixes of call's op texts to the DIS operation names
// of the op label of disgw_backend_calls_total (a bounded set: the texts
// carry stream and app names).
var opNames = []struct{ prefix, name string }{
	{"put records", "PutRecords"},
	{"get records", "GetRecords"},
	{"get cursor", "GetCursor"},
	{"commit checkpoint", "CommitCheckpoint"},
	{"get checkpoint", "GetCheckpoint"},
	{"delete checkpoint", "DeleteCheckpoint"},
	{"create app", "CreateApp"},
	{"delete app", "DeleteApp"},
	{"describe app", "DescribeApp"},
	{"list apps", "ListApps"},
	{"consumer state", "ListConsumerState"},
	{"create stream", "CreateStream"},
	{"delete stream", "DeleteStream"},
	{"list streams", "ListStreams"},
	{"describe stream", "DescribeStream"},
	{"update partition count", "UpdatePartitionCount"},
	{"update stream", "UpdateStream"},
	{"delete tags", "DeleteStreamTags"},
	{"tag stream", "CreateStreamTags"},
	{"join group", "JoinGroup"},
	{"sync group", "SyncGroup"},
	{"heartbeat", "Heartbeat"},
	{"leave group", "LeaveGroup"},
}

// opName is the DIS operation of an op text, "Other" when unknown.
func opName(op string) string {
	for _, o := range opNames {
		if strings.HasPrefix(op, o.prefix) {
			return o.name
		}
	}
	return "Other"
}

// metricCode is the code label of a call's outcome: OK, the DIS error code
// (DIS.4303), HTTP_<status> for an error answer without one, or TRANSPORT
// when there was no answer.
func (s *Store) metricCode(err error) string {
	if err == nil {
		return "OK"
	}
	de := s.mapError(err)
	switch {
	case de.code != "":
		return de.code
	case de.status != 0:
		return "HTTP_" + strconv.Itoa(de.status)
	}
	return "TRANSPORT"
}
