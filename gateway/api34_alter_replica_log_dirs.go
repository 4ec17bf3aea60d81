package gateway

// AlterReplicaLogDirs: v1-2 (as Kafka 4.4, which removed v0 with KIP-896).
//
// Version notes: v1 no change (throttle after the response); v2 flexible.
//
// The gateway has one log dir (DescribeLogDirs), so there is nothing to
// move; it answers as a one-node Kafka with one log dir does (checked
// against it): a partition asked into that dir gets NONE when it exists
// and UNKNOWN_TOPIC_OR_PARTITION when it does not; every partition asked
// into any other path gets LOG_DIR_NOT_FOUND.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

func init() {
	registerAPI(34, 1, 2, (*conn).handleAlterReplicaLogDirs, clusterOp(acl.OpAlter, refuseAlterReplicaLogDirs))
}

// refuseAlterReplicaLogDirs answers every partition of the request with
// code.
func refuseAlterReplicaLogDirs(r *kmsg.AlterReplicaLogDirsRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.AlterReplicaLogDirsResponse)
	for _, d := range r.Dirs {
		for _, t := range d.Topics {
			rt := kmsg.NewAlterReplicaLogDirsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	return resp
}

func (c *conn) handleAlterReplicaLogDirs(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.AlterReplicaLogDirsRequest)
	return reply{req: req, finish: func() (kmsg.Response, error) {
		return c.s.alterReplicaLogDirs(r), nil
	}}
}

func (s *Server) alterReplicaLogDirs(r *kmsg.AlterReplicaLogDirsRequest) *kmsg.AlterReplicaLogDirsResponse {
	resp := r.ResponseKind().(*kmsg.AlterReplicaLogDirsResponse)
	logDir := ""
	if d, ok := s.backend.(disbackend.LogDirDescriber); ok {
		if ld, err := d.LogDir(); err == nil {
			logDir = ld.Dir
		}
	}
	for _, rd := range r.Dirs {
		for _, rt := range rd.Topics {
			t := kmsg.NewAlterReplicaLogDirsResponseTopic()
			t.Topic = rt.Topic
			st := s.topics.get(rt.Topic)
			for _, part := range rt.Partitions {
				p := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
				p.Partition = part
				switch {
				case logDir == "" || rd.Dir != logDir:
					p.ErrorCode = kerr.LogDirNotFound.Code
				case st == nil || part < 0 || part >= st.PartitionCount:
					p.ErrorCode = kerr.UnknownTopicOrPartition.Code
				}
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
	}
	return resp
}
