package gateway

// ApiVersions: v0-5.
//
// Version notes:
//   - v0: the key table.
//   - v1: ThrottleMillis.
//   - v3: flexible; ClientSoftwareName and ClientSoftwareVersion, which Kafka
//     validates (INVALID_REQUEST when malformed); features (KIP-584):
//     group.version only, and only when ConsumerGroupHeartbeat is served
//     (advertisedFeatures).
//   - v5: ClusterID and NodeID the client expects (KIP-1242):
//     REBOOTSTRAP_REQUIRED when they are not us (the node id is the
//     view's Self with several nodes, cluster.go).
//
// A request at a version above ours is answered as Kafka answers it
// (KIP-511): UNSUPPORTED_VERSION in a v0 body and header, listing our table,
// without parsing the request body. The response header is always v0.

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/kafkawire"
)

func init() { registerAPI(apiKeyApiVersions, 0, 5, nil, authNone) }

// advertisedKeys returns our dispatch table as ApiVersions lists it.
// advertisedKeys are the API keys this server lists: every registered
// one, but KIP-848's consumer group APIs (68, 69) only when
// Config.ConsumerGroupProtocol is set.
func (s *Server) advertisedKeys() []kmsg.ApiVersionsResponseApiKey {
	var keys []kmsg.ApiVersionsResponseApiKey
	for _, e := range apiTable {
		if e == nil || !s.serves(e.key) {
			continue
		}
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = e.key, e.min, e.max
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].ApiKey < keys[j].ApiKey })
	return keys
}

func (s *Server) handleApiVersions(req *kafkawire.Request) kmsg.Response {
	self := apiTable[apiKeyApiVersions]
	if req.Body == nil || req.Version > self.max || req.Version < self.min {
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = 0
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		resp.ApiKeys = s.advertisedKeys()
		return resp
	}
	r := req.Body.(*kmsg.ApiVersionsRequest)
	resp := r.ResponseKind().(*kmsg.ApiVersionsResponse)
	if r.Version >= 3 && (!validSoftwareNameVersion(r.ClientSoftwareName) || !validSoftwareNameVersion(r.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	if r.Version >= 5 {
		hasCluster, hasNode := r.ClusterID != nil, r.NodeID != -1
		switch {
		case hasCluster != hasNode:
			resp.ErrorCode = kerr.InvalidRequest.Code
			return resp
		case hasCluster && (*r.ClusterID != s.cfg.ClusterID || r.NodeID != s.nodeID()):
			resp.ErrorCode = kerr.RebootstrapRequired.Code
			return resp
		}
	}
	resp.ApiKeys = s.advertisedKeys()
	if r.Version >= 3 {
		s.advertiseFeatures(resp)
	}
	return resp
}

// groupVersionLevel is the level of the group.version feature that KIP-848's
// consumer protocol needs (Kafka 4.4's GroupVersion.GV_1, also its highest).
const groupVersionLevel = 1

// featuresEpoch is the FinalizedFeaturesEpoch answered with the features:
// Kafka answers the metadata log offset of the last feature change; disgw's
// features change only with the setting at a restart, so a constant
// positive epoch (clients keep the finalized features of the highest epoch
// they saw, -1 meaning none).
const featuresEpoch = 1

// advertiseFeatures fills ApiVersions v3+'s features (KIP-584) as Kafka 4.4's
// broker answers them, for what disgw serves: with
// Config.ConsumerGroupProtocol (API 68 served), SupportedFeatures
// group.version 0-1 and FinalizedFeatures group.version 1-1, which clients
// and kafka-features.sh read as "the consumer protocol is on". Without it,
// no feature at all (group.version at level 0, which Kafka leaves out of
// FinalizedFeatures too). Kafka 4.4 also lists metadata.version and
// kraft.version (a controller quorum disgw has none of), transaction.version
// 2 (KIP-890 part 2: EndTxn v5, Produce v12 adding partitions implicitly,
// not served, docs/transactions.md), share.version and streams.version
// (share groups, KIP-1071 streams groups: not served) and
// eligible.leader.replicas.version (KIP-966, replicas disgw has none of):
// none is advertised.
func (s *Server) advertiseFeatures(resp *kmsg.ApiVersionsResponse) {
	if !s.serves(68) {
		return
	}
	sf := kmsg.NewApiVersionsResponseSupportedFeature()
	sf.Name, sf.MinVersion, sf.MaxVersion = "group.version", 0, groupVersionLevel
	ff := kmsg.NewApiVersionsResponseFinalizedFeature()
	ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = "group.version", groupVersionLevel, groupVersionLevel
	resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
	resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
	resp.FinalizedFeaturesEpoch = featuresEpoch
}

// validSoftwareNameVersion is Kafka's rule for ApiVersions v3+ client
// software fields: [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?
func validSoftwareNameVersion(s string) bool {
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	if len(s) == 0 || !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; !alnum(c) && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

// serves reports whether this server serves API key (registered, and for
// the consumer group APIs, enabled).
func (s *Server) serves(key int16) bool {
	switch key {
	case 68, 69: // ConsumerGroupHeartbeat, ConsumerGroupDescribe
		return s.cfg.ConsumerGroupProtocol
	}
	return lookupAPI(key) != nil
}
