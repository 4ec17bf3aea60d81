package gateway

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/kafkawire"
)

const (
	apiKeyProduce     = 0
	apiKeyFetch       = 1
	apiKeyApiVersions = 18
)

// apiEntry is one row of the dispatch table: the versions we serve of an
// API key, its handler and how it is authorized. ApiVersions advertises
// exactly these rows, and the connection reader refuses any other key or
// version.
type apiEntry struct {
	key      int16
	name     string
	min, max int16
	// handle runs on the connection's reader goroutine, in request order;
	// work that waits (syncs, long polls) goes into the reply's finish.
	handle func(c *conn, req *kafkawire.Request) reply
	// auth are the checks the request passes, in order, before handle when
	// an authorizer is configured (authorize.go); authNone for an API that
	// is not authorized. Never empty.
	auth []authCheck
	// controller: an admin write the controller alone applies with
	// several nodes, forwarded to it by the others (forward.go,
	// controllerOnly); nil for the rest.
	controller *controllerAPI
}

var apiTable [kmsg.MaxKey + 1]*apiEntry

// registerAPI adds a row; each api file calls it from init. auth is how
// the API is authorized (at least one check, authNone for none): a row
// without it panics, so the gateway does not start serving an API whose
// authorization was not decided.
func registerAPI(key, min, max int16, handle func(c *conn, req *kafkawire.Request) reply, auth ...authCheck) {
	name := kmsg.NameForKey(key)
	if apiTable[key] != nil {
		panic("gateway: API key registered twice: " + name)
	}
	if len(auth) == 0 {
		panic("gateway: API " + name + " registered without its authorization: give registerAPI its checks (authorize.go), or authNone")
	}
	for _, check := range auth {
		if check == nil {
			panic("gateway: API " + name + " registered with a nil authorization check")
		}
	}
	apiTable[key] = &apiEntry{key: key, name: name, min: min, max: max, handle: handle, auth: auth}
}

func lookupAPI(key int16) *apiEntry {
	if key < 0 || int(key) >= len(apiTable) {
		return nil
	}
	return apiTable[key]
}

// ready is a reply whose response is complete at once.
func ready(req *kafkawire.Request, resp kmsg.Response) reply {
	return reply{req: req, resp: resp}
}
