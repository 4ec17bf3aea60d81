package gateway

// DescribeLogDirs: v1-5 (as Kafka 4.4, which removed v0 with KIP-896;
// disbackend.LogDirDescriber).
//
// Version notes: v1 no change (throttle after the response); v2 flexible;
// v3 top-level error code; v4 total and usable bytes of the dir; v5 is
// cordoned (KIP-1066; never: the gateway does not cordon).
//
// One log dir, as a one-node Kafka with one log.dirs entry answers: the
// embedded store's data directory (absolute), or on DIS
// "dis:<endpoint>/<project id>". Topics null asks for every topic; listed
// topics and partitions that do not exist are left out, as Kafka leaves
// them out. Each partition's size is the bytes of its stored batches from
// the log start offset on (the embedded store), or -1 where the backend
// does not know it (DIS); offset lag 0 and is-future false (no replica
// moves). Total and usable bytes (v4+) are the data directory's volume's,
// -1 on DIS.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

func init() {
	registerAPI(35, 1, 5, (*conn).handleDescribeLogDirs, clusterOp(acl.OpDescribe, refuseDescribeLogDirs))
}

// refuseDescribeLogDirs answers the request with code.
func refuseDescribeLogDirs(r *kmsg.DescribeLogDirsRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	resp.ErrorCode = code
	return resp
}

func (c *conn) handleDescribeLogDirs(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.DescribeLogDirsRequest)
	return reply{req: req, finish: func() (kmsg.Response, error) {
		return c.s.describeLogDirs(r), nil
	}}
}

func (s *Server) describeLogDirs(r *kmsg.DescribeLogDirsRequest) *kmsg.DescribeLogDirsResponse {
	resp := r.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	d, ok := s.backend.(disbackend.LogDirDescriber)
	if !ok {
		resp.ErrorCode = kerr.UnknownServerError.Code
		return resp
	}
	ld, err := d.LogDir()
	if err != nil {
		resp.ErrorCode = kafkaError(s.log, err)
		return resp
	}
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = ld.Dir
	dir.TotalBytes, dir.UsableBytes = ld.TotalBytes, ld.UsableBytes
	add := func(st *disbackend.Stream, parts []int32) {
		t := kmsg.NewDescribeLogDirsResponseDirTopic()
		t.Topic = st.TopicName
		for _, part := range parts {
			if part < 0 || part >= st.PartitionCount {
				continue
			}
			size, err := d.PartitionBytes(st.Name, part)
			if err != nil {
				continue // deleted meanwhile
			}
			p := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			p.Partition, p.Size = part, size
			t.Partitions = append(t.Partitions, p)
		}
		if len(t.Partitions) > 0 {
			dir.Topics = append(dir.Topics, t)
		}
	}
	if r.Topics == nil {
		for _, st := range s.topics.all() {
			parts := make([]int32, st.PartitionCount)
			for i := range parts {
				parts[i] = int32(i)
			}
			add(st, parts)
		}
	} else {
		for _, rt := range r.Topics {
			if st := s.topics.get(rt.Topic); st != nil {
				add(st, rt.Partitions)
			}
		}
	}
	resp.Dirs = []kmsg.DescribeLogDirsResponseDir{dir}
	return resp
}
