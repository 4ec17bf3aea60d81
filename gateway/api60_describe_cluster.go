package gateway

// DescribeCluster: v0-2 (KIP-700), flexible.
//
// Version notes: v1 adds EndpointType (KIP-919); v2 adds
// IncludeFencedBrokers and the brokers' IsFenced (KIP-1073).
//
// The answer is this node alone (Config.NodeID, the advertised host and
// port), the cluster id Metadata gives (Config.ClusterID, stable for the
// data), and this node as the controller id (a Kafka broker reports a
// live broker there, and a one-node Kafka reports itself). With several
// nodes (cluster.go), the brokers and the controller are Metadata's: the
// view's nodes with an address on the request's listener and the view's
// controller. No broker is ever fenced. ClusterAuthorizedOperations when asked: every cluster operation
// (no authorizer, authops.go), else -2147483648.
//
// EndpointType 2 (controller) gets MISMATCHED_ENDPOINT_TYPE and any type
// but 1 and 2 UNSUPPORTED_ENDPOINT_TYPE, with Kafka 4.4's messages: this
// is a broker endpoint.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

// DescribeCluster needs DESCRIBE on the cluster; the cluster's authorized
// operations, when asked for, are the principal's.
func init() {
	registerAPI(60, 0, 2, (*conn).handleDescribeCluster,
		clusterOp(acl.OpDescribe, refuseDescribeCluster), (*conn).clusterOpsAsked)
}

// refuseDescribeCluster answers the request with code.
func refuseDescribeCluster(r *kmsg.DescribeClusterRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.ErrorCode = code
	return resp
}

// clusterOpsAsked sets the cluster's authorized operations (KIP-430) to the
// principal's when the request asks for them.
func (c *conn) clusterOpsAsked(req *kafkawire.Request) (kmsg.Response, postAuth) {
	if !req.Body.(*kmsg.DescribeClusterRequest).IncludeClusterAuthorizedOperations {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) error {
		resp.(*kmsg.DescribeClusterResponse).ClusterAuthorizedOperations = c.opsOf(acl.ResourceCluster, acl.ClusterName, clusterAuthorizedOps)
		return nil
	}
}

func (c *conn) handleDescribeCluster(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.DescribeClusterRequest)
	resp := r.ResponseKind().(*kmsg.DescribeClusterResponse)
	s := c.s
	switch r.EndpointType {
	case 1:
	case 2:
		msg := "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"
		resp.ErrorCode, resp.ErrorMessage = kerr.MismatchedEndpointType.Code, &msg
		return ready(req, resp)
	default:
		msg := fmt.Sprintf("Unsupported endpoint type %d", r.EndpointType)
		resp.ErrorCode, resp.ErrorMessage = kerr.UnsupportedEndpointType.Code, &msg
		return ready(req, resp)
	}
	resp.ClusterID = s.cfg.ClusterID
	if kv := c.kafkaView(); kv != nil {
		resp.ControllerID = kv.v.Controller
		resp.Brokers = make([]kmsg.DescribeClusterResponseBroker, 0, len(kv.brokers))
		for _, ep := range kv.brokers {
			b := kmsg.NewDescribeClusterResponseBroker()
			b.NodeID, b.Host, b.Port = ep.id, ep.host, ep.port
			resp.Brokers = append(resp.Brokers, b)
		}
	} else {
		resp.ControllerID = s.cfg.NodeID
		b := kmsg.NewDescribeClusterResponseBroker()
		b.NodeID, b.Host, b.Port = s.cfg.NodeID, c.lst.advHost, c.lst.advPort
		resp.Brokers = []kmsg.DescribeClusterResponseBroker{b}
	}
	resp.ClusterAuthorizedOperations = authorizedOps(r.IncludeClusterAuthorizedOperations, clusterAuthorizedOps)
	return ready(req, resp)
}
