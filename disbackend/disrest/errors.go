package disrest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/sdkerr"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/disapi"
)

// disError is a DIS failure: the HTTP status (0 for transport errors), the
// DIS.xxxx code and message, and the backend sentinel it maps to.
type disError struct {
	status   int
	code     string
	message  string
	sentinel error // nil when unmapped
	cause    error
	// principal is the AK of a principal's own credentials the call was
	// signed with (principals.go); "" for the gateway's.
	principal string
}

func (e *disError) Error() string {
	switch {
	case e.principal != "" && e.code == disapi.CodeForbidden:
		return fmt.Sprintf("%s %s (DIS's IAM does not allow it for access key %s)", e.code, e.message, e.principal)
	case e.principal != "" && strings.HasPrefix(e.code, disapi.CodePrefixAuth):
		return fmt.Sprintf("%s %s (DIS refused the credentials of access key %s)", e.code, e.message, e.principal)
	case e.code == disapi.CodeForbidden:
		return fmt.Sprintf("%s %s (DIS's IAM does not allow it for the gateway's credentials)", e.code, e.message)
	case strings.HasPrefix(e.code, disapi.CodePrefixAuth):
		// 441 DIS.4100-4115 and 403 DIS.4116: the gateway's own credentials.
		return fmt.Sprintf("%s %s (DIS refused the gateway's credentials: check the AK/SK or token, the project id and the clock)", e.code, e.message)
	case e.code != "":
		return fmt.Sprintf("%s %s", e.code, e.message)
	case e.status != 0:
		return fmt.Sprintf("HTTP %d %s", e.status, e.message)
	}
	return e.cause.Error()
}

// Unwrap lets errors.Is find the sentinel (and the cause).
func (e *disError) Unwrap() []error {
	var out []error
	if e.sentinel != nil {
		out = append(out, e.sentinel)
	}
	if e.cause != nil {
		out = append(out, e.cause)
	}
	return out
}

// retriable reports whether the request may be sent again: flow control
// (DIS.4303), the request rate (DIS.4305), a temporary IP black-list
// (DIS.4309), a DIS system error (DIS.5xxx), or no answer at all.
func (e *disError) retriable() bool {
	switch {
	case e.code == disapi.CodeFlowControl, e.code == disapi.CodeTooManyRequests, e.code == disapi.CodeIPBlacklisted:
		return true
	case strings.HasPrefix(e.code, disapi.CodePrefixSystem):
		return true
	case e.code == "" && (e.status == 0 || e.status >= 500):
		return true
	}
	return false
}

// flowControl reports whether DIS refused for its flow control (DIS.4303):
// the partition is at its write limits.
func (e *disError) flowControl() bool { return e.code == disapi.CodeFlowControl }

// codeTable maps DIS error codes to backend sentinels; the one place they
// are mapped. A code ending in "*" is a prefix. Codes not listed (auth
// failures DIS.4100-4115 among them) stay unmapped: the gateway answers
// UNKNOWN_SERVER_ERROR and logs them.
var codeTable = []struct {
	code string
	err  error
}{
	{disapi.CodeStreamNotFound, disbackend.ErrStreamNotFound},
	{disapi.CodePartitionNotFound, disbackend.ErrPartitionNotFound},
	{disapi.CodePartitionIDInvalid, disbackend.ErrPartitionNotFound},
	{disapi.CodePartitionExpired, disbackend.ErrPartitionNotFound}, // expired after a scale-down
	{disapi.CodeStreamExists, disbackend.ErrStreamExists},
	{disapi.CodeAppExists, disbackend.ErrAppExists},
	{disapi.CodeAppNotFound, disbackend.ErrAppNotFound},
	{disapi.CodeSequenceNumberOutOfRange, disbackend.ErrOffsetOutOfRange},
	{disapi.CodeSequenceNumberInvalid, disbackend.ErrOffsetOutOfRange}, // a sequence number DIS cannot take (negative)
	{disapi.CodeSequenceNumberExpired, disbackend.ErrOffsetOutOfRange},
	{disapi.CodePartitionQuota, disbackend.ErrInvalidPartitionCount}, // partition quota
	{disapi.CodeFlowControl, disbackend.ErrUnavailable},
	{disapi.CodeTooManyRequests, disbackend.ErrUnavailable},
	{disapi.CodeIPBlacklisted, disbackend.ErrUnavailable},
	{disapi.CodePrefixSystem + "*", disbackend.ErrUnavailable},
	{disapi.CodeInvalidRequest, disbackend.ErrInvalidConfig},
	{disapi.CodeForbidden, disbackend.ErrNotAuthorized}, // 403: IAM refused the operation
}

func sentinelFor(code string) error {
	for _, row := range codeTable {
		if p, ok := strings.CutSuffix(row.code, "*"); ok {
			if strings.HasPrefix(code, p) {
				return row.err
			}
		} else if row.code == code {
			return row.err
		}
	}
	return nil
}

// mapError turns an SDK error into a disError. The Go SDK does not parse
// DIS's {"errorCode","message"} body, so the code is read out of the raw
// body it leaves in ErrorMessage.
func (s *Store) mapError(err error) *disError {
	var de *disError
	if errors.As(err, &de) {
		return de
	}
	var se *sdkerr.ServiceResponseError
	if errors.As(err, &se) {
		de = &disError{status: se.StatusCode, code: se.ErrorCode, message: se.ErrorMessage}
		var body struct {
			ErrorCode string `json:"errorCode"`
			Message   string `json:"message"`
		}
		if json.Unmarshal([]byte(se.ErrorMessage), &body) == nil && body.ErrorCode != "" {
			de.code, de.message = body.ErrorCode, body.Message
		}
		de.sentinel = sentinelFor(de.code)
		if de.sentinel == nil && de.code == "" && de.status >= 500 {
			de.sentinel = disbackend.ErrUnavailable
		}
		return de
	}
	// Transport errors (connection refused, timeouts): retriable.
	return &disError{cause: err, sentinel: disbackend.ErrUnavailable}
}

// codeOf returns the DIS code of an error from call, "" when none.
func codeOf(err error) string {
	var de *disError
	if errors.As(err, &de) {
		return de.code
	}
	return ""
}
