package gateway

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/kafkawire"
)

const (
	apiKeyProduce     = 0
	apiKeyApiVersions = 18
)

// apiEntry is one row of the dispatch table: the versions we serve of an
// API key and its handler. ApiVersions advertises exactly these rows, and
// the connection reader refuses any other key or version.
type apiEntry struct {
	key      int16
	name     string
	min, max int16
	// handle runs on the connection's reader goroutine, in request order;
	// work that waits (syncs, long polls) goes into the reply's finish.
	handle func(c *conn, req *kafkawire.Request) reply
}

var apiTable [kmsg.MaxKey + 1]*apiEntry

// registerAPI adds a row; each api file calls it from init.
func registerAPI(key, min, max int16, handle func(c *conn, req *kafkawire.Request) reply) {
	if apiTable[key] != nil {
		panic("gateway: API key registered twice: " + kmsg.NameForKey(key))
	}
	apiTable[key] = &apiEntry{key: key, name: kmsg.NameForKey(key), min: min, max: max, handle: handle}
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
