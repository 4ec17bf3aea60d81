package gateway

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

// authorizeRequest checks req as Kafka's KafkaApis does (authorize.go).
// It returns either a complete refusal (deny), or nil and, when some
// entries are refused or answers must be filtered, post, which completes
// the handler's response; req.Body may be changed to drop refused entries.
// Every API key of the dispatch table has a case (TestEveryAPIAuthorized).
func (c *conn) authorizeRequest(req *kafkawire.Request) (deny kmsg.Response, post func(kmsg.Response) error) {
	if c.s.authz.IsSuperUser(c.kafkaPrincipal()) {
		return nil, nil
	}
	switch r := req.Body.(type) {
	case *kmsg.ProduceRequest:
		return c.authProduce(r)
	case *kmsg.FetchRequest:
		return c.authFetch(r)
	case *kmsg.ListOffsetsRequest:
		return nil, func(resp kmsg.Response) error {
			for i := range resp.(*kmsg.ListOffsetsResponse).Topics {
				t := &resp.(*kmsg.ListOffsetsResponse).Topics[i]
				if !c.mayTopic(acl.OpDescribe, t.Topic) {
					for j := range t.Partitions {
						p := &t.Partitions[j]
						p.ErrorCode, p.Timestamp, p.Offset, p.LeaderEpoch, p.OldStyleOffsets = errTopicAuth, -1, -1, -1, nil
					}
				}
			}
			return nil
		}
	case *kmsg.MetadataRequest:
		return c.authMetadata(r)
	case *kmsg.OffsetCommitRequest:
		return c.authOffsetCommit(r)
	case *kmsg.OffsetFetchRequest:
		return c.authOffsetFetch(r)
	case *kmsg.FindCoordinatorRequest:
		return nil, func(resp kmsg.Response) error {
			fr := resp.(*kmsg.FindCoordinatorResponse)
			rt, code := acl.ResourceGroup, errGroupAuth
			if r.CoordinatorType == 1 {
				rt, code = acl.ResourceTransactionalID, errTxnAuth
			}
			if r.Version < 4 {
				if !c.may(acl.OpDescribe, rt, r.CoordinatorKey) {
					fr.ErrorCode, fr.NodeID, fr.Host, fr.Port = code, -1, "", -1
				}
				return nil
			}
			for i := range fr.Coordinators {
				k := &fr.Coordinators[i]
				if !c.may(acl.OpDescribe, rt, k.Key) {
					k.ErrorCode, k.NodeID, k.Host, k.Port = code, -1, "", -1
				}
			}
			return nil
		}
	case *kmsg.JoinGroupRequest:
		if !c.mayGroup(acl.OpRead, r.Group) {
			resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
			resp.ErrorCode, resp.Generation = errGroupAuth, -1
			return resp, nil
		}
	case *kmsg.HeartbeatRequest:
		if !c.mayGroup(acl.OpRead, r.Group) {
			resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
			resp.ErrorCode = errGroupAuth
			return resp, nil
		}
	case *kmsg.LeaveGroupRequest:
		if !c.mayGroup(acl.OpRead, r.Group) {
			resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
			resp.ErrorCode = errGroupAuth
			return resp, nil
		}
	case *kmsg.SyncGroupRequest:
		if !c.mayGroup(acl.OpRead, r.Group) {
			resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
			resp.ErrorCode = errGroupAuth
			return resp, nil
		}
	case *kmsg.DescribeGroupsRequest:
		return nil, func(resp kmsg.Response) error {
			dr := resp.(*kmsg.DescribeGroupsResponse)
			for i := range dr.Groups {
				g := &dr.Groups[i]
				if !c.mayGroup(acl.OpDescribe, g.Group) {
					name := g.Group
					*g = kmsg.NewDescribeGroupsResponseGroup()
					g.Group, g.ErrorCode = name, errGroupAuth
					continue
				}
				if r.IncludeAuthorizedOperations {
					g.AuthorizedOperations = c.opsOf(acl.ResourceGroup, g.Group, groupAuthorizedOps)
				}
			}
			return nil
		}
	case *kmsg.ListGroupsRequest:
		if c.mayCluster(acl.OpDescribe) {
			return nil, nil
		}
		return nil, func(resp kmsg.Response) error {
			lr := resp.(*kmsg.ListGroupsResponse)
			kept := lr.Groups[:0]
			for _, g := range lr.Groups {
				if c.mayGroup(acl.OpDescribe, g.Group) {
					kept = append(kept, g)
				}
			}
			lr.Groups = kept
			return nil
		}
	case *kmsg.CreateTopicsRequest:
		// The configs of a created topic (v5+) need DESCRIBE_CONFIGS on it.
		configs := func(resp kmsg.Response) error {
			for i := range resp.(*kmsg.CreateTopicsResponse).Topics {
				t := &resp.(*kmsg.CreateTopicsResponse).Topics[i]
				if t.ErrorCode == 0 && !c.mayTopic(acl.OpDescribeConfigs, t.Topic) {
					t.Configs, t.ConfigErrorCode = nil, errTopicAuth
				}
			}
			return nil
		}
		if c.mayCluster(acl.OpCreate) {
			return nil, configs
		}
		var denied []kmsg.CreateTopicsResponseTopic
		kept := r.Topics[:0]
		for _, t := range r.Topics {
			if c.mayTopic(acl.OpCreate, t.Topic) {
				kept = append(kept, t)
				continue
			}
			d := kmsg.NewCreateTopicsResponseTopic()
			d.Topic, d.ErrorCode, d.ConfigErrorCode, d.NumPartitions, d.ReplicationFactor = t.Topic, errTopicAuth, errTopicAuth, -1, -1
			denied = append(denied, d)
		}
		r.Topics = kept
		return nil, chainPost(configs, appendDenied(denied, func(resp kmsg.Response) *[]kmsg.CreateTopicsResponseTopic {
			return &resp.(*kmsg.CreateTopicsResponse).Topics
		}))
	case *kmsg.DeleteTopicsRequest:
		var denied []kmsg.DeleteTopicsResponseTopic
		deny := func(name *string, id [16]byte, code int16) {
			d := kmsg.NewDeleteTopicsResponseTopic()
			d.Topic, d.TopicID, d.ErrorCode = name, id, code
			denied = append(denied, d)
		}
		keptNames := r.TopicNames[:0]
		for _, n := range r.TopicNames {
			if c.mayTopic(acl.OpDelete, n) {
				keptNames = append(keptNames, n)
			} else {
				deny(&n, [16]byte{}, errTopicAuth)
			}
		}
		r.TopicNames = keptNames
		kept := r.Topics[:0]
		for _, t := range r.Topics {
			var name string
			if t.Topic != nil {
				name = *t.Topic
			}
			name = c.topicName(name, t.TopicID)
			switch {
			case name == "" || c.mayTopic(acl.OpDelete, name):
				kept = append(kept, t)
			case t.Topic == nil && !c.mayTopic(acl.OpDescribe, name):
				deny(nil, t.TopicID, kmsgUnknownTopicID)
			default:
				deny(t.Topic, t.TopicID, errTopicAuth)
			}
		}
		r.Topics = kept
		return nil, appendDenied(denied, func(resp kmsg.Response) *[]kmsg.DeleteTopicsResponseTopic {
			return &resp.(*kmsg.DeleteTopicsResponse).Topics
		})
	case *kmsg.DeleteRecordsRequest:
		var denied []kmsg.DeleteRecordsResponseTopic
		kept := r.Topics[:0]
		for _, t := range r.Topics {
			if c.mayTopic(acl.OpDelete, t.Topic) {
				kept = append(kept, t)
				continue
			}
			d := kmsg.NewDeleteRecordsResponseTopic()
			d.Topic = t.Topic
			for _, p := range t.Partitions {
				dp := kmsg.NewDeleteRecordsResponseTopicPartition()
				dp.Partition, dp.LowWatermark, dp.ErrorCode = p.Partition, -1, errTopicAuth
				d.Partitions = append(d.Partitions, dp)
			}
			denied = append(denied, d)
		}
		r.Topics = kept
		return nil, appendDenied(denied, func(resp kmsg.Response) *[]kmsg.DeleteRecordsResponseTopic {
			return &resp.(*kmsg.DeleteRecordsResponse).Topics
		})
	case *kmsg.InitProducerIDRequest:
		resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		if r.TransactionalID != nil {
			if !c.may(acl.OpWrite, acl.ResourceTransactionalID, *r.TransactionalID) {
				resp.ErrorCode = errTxnAuth
				return resp, nil
			}
		} else if !c.mayCluster(acl.OpIdempotentWrite) &&
			!c.s.authz.AuthorizeByResourceType(c.kafkaPrincipal(), c.ip, acl.OpWrite, acl.ResourceTopic) {
			resp.ErrorCode = errClustAuth
			return resp, nil
		}
	case *kmsg.OffsetForLeaderEpochRequest:
		return nil, func(resp kmsg.Response) error {
			or := resp.(*kmsg.OffsetForLeaderEpochResponse)
			for i := range or.Topics {
				t := &or.Topics[i]
				ok := c.mayTopic(acl.OpDescribe, t.Topic)
				if r.ReplicaID >= 0 && r.Version >= 3 {
					ok = c.mayCluster(acl.OpClusterAction)
				}
				if !ok {
					for j := range t.Partitions {
						p := &t.Partitions[j]
						p.ErrorCode, p.LeaderEpoch, p.EndOffset = errTopicAuth, -1, -1
					}
				}
			}
			return nil
		}
	case *kmsg.DescribeConfigsRequest:
		return nil, func(resp kmsg.Response) error {
			dr := resp.(*kmsg.DescribeConfigsResponse)
			for i := range dr.Resources {
				res := &dr.Resources[i]
				if code := c.configAuth(acl.OpDescribeConfigs, res.ResourceType, res.ResourceName); code != 0 {
					res.ErrorCode, res.Configs = code, nil
					msg := "not authorized to describe the configs of " + res.ResourceName
					res.ErrorMessage = &msg
				}
			}
			return nil
		}
	case *kmsg.AlterConfigsRequest:
		var denied []kmsg.AlterConfigsResponseResource
		kept := r.Resources[:0]
		for _, res := range r.Resources {
			if code := c.configAuth(acl.OpAlterConfigs, res.ResourceType, res.ResourceName); code != 0 {
				d := kmsg.NewAlterConfigsResponseResource()
				d.ResourceType, d.ResourceName, d.ErrorCode = res.ResourceType, res.ResourceName, code
				denied = append(denied, d)
				continue
			}
			kept = append(kept, res)
		}
		r.Resources = kept
		return nil, appendDenied(denied, func(resp kmsg.Response) *[]kmsg.AlterConfigsResponseResource {
			return &resp.(*kmsg.AlterConfigsResponse).Resources
		})
	case *kmsg.IncrementalAlterConfigsRequest:
		var denied []kmsg.IncrementalAlterConfigsResponseResource
		kept := r.Resources[:0]
		for _, res := range r.Resources {
			if code := c.configAuth(acl.OpAlterConfigs, res.ResourceType, res.ResourceName); code != 0 {
				d := kmsg.NewIncrementalAlterConfigsResponseResource()
				d.ResourceType, d.ResourceName, d.ErrorCode = res.ResourceType, res.ResourceName, code
				denied = append(denied, d)
				continue
			}
			kept = append(kept, res)
		}
		r.Resources = kept
		return nil, appendDenied(denied, func(resp kmsg.Response) *[]kmsg.IncrementalAlterConfigsResponseResource {
			return &resp.(*kmsg.IncrementalAlterConfigsResponse).Resources
		})
	case *kmsg.AlterReplicaLogDirsRequest:
		if !c.mayCluster(acl.OpAlter) {
			resp := r.ResponseKind().(*kmsg.AlterReplicaLogDirsResponse)
			for _, d := range r.Dirs {
				for _, t := range d.Topics {
					rt := kmsg.NewAlterReplicaLogDirsResponseTopic()
					rt.Topic = t.Topic
					for _, p := range t.Partitions {
						rp := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
						rp.Partition, rp.ErrorCode = p, errClustAuth
						rt.Partitions = append(rt.Partitions, rp)
					}
					resp.Topics = append(resp.Topics, rt)
				}
			}
			return resp, nil
		}
	case *kmsg.DescribeLogDirsRequest:
		if !c.mayCluster(acl.OpDescribe) {
			resp := r.ResponseKind().(*kmsg.DescribeLogDirsResponse)
			resp.ErrorCode = errClustAuth
			return resp, nil
		}
	case *kmsg.CreatePartitionsRequest:
		var denied []kmsg.CreatePartitionsResponseTopic
		kept := r.Topics[:0]
		for _, t := range r.Topics {
			if c.mayTopic(acl.OpAlter, t.Topic) {
				kept = append(kept, t)
				continue
			}
			d := kmsg.NewCreatePartitionsResponseTopic()
			d.Topic, d.ErrorCode = t.Topic, errTopicAuth
			denied = append(denied, d)
		}
		r.Topics = kept
		return nil, appendDenied(denied, func(resp kmsg.Response) *[]kmsg.CreatePartitionsResponseTopic {
			return &resp.(*kmsg.CreatePartitionsResponse).Topics
		})
	case *kmsg.DeleteGroupsRequest:
		var denied []kmsg.DeleteGroupsResponseGroup
		kept := r.Groups[:0]
		for _, g := range r.Groups {
			if c.mayGroup(acl.OpDelete, g) {
				kept = append(kept, g)
				continue
			}
			d := kmsg.NewDeleteGroupsResponseGroup()
			d.Group, d.ErrorCode = g, errGroupAuth
			denied = append(denied, d)
		}
		r.Groups = kept
		return nil, appendDenied(denied, func(resp kmsg.Response) *[]kmsg.DeleteGroupsResponseGroup {
			return &resp.(*kmsg.DeleteGroupsResponse).Groups
		})
	case *kmsg.ElectLeadersRequest:
		if !c.mayCluster(acl.OpAlter) {
			resp := r.ResponseKind().(*kmsg.ElectLeadersResponse)
			resp.ErrorCode = errClustAuth
			for _, t := range r.Topics {
				rt := kmsg.NewElectLeadersResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewElectLeadersResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p, errClustAuth
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			return resp, nil
		}
	case *kmsg.AlterPartitionAssignmentsRequest:
		if !c.mayCluster(acl.OpAlter) {
			resp := r.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
			resp.ErrorCode = errClustAuth
			return resp, nil
		}
	case *kmsg.ListPartitionReassignmentsRequest:
		if !c.mayCluster(acl.OpDescribe) {
			resp := r.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
			resp.ErrorCode = errClustAuth
			return resp, nil
		}
	case *kmsg.OffsetDeleteRequest:
		if !c.mayGroup(acl.OpDelete, r.Group) {
			resp := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
			resp.ErrorCode = errGroupAuth
			return resp, nil
		}
		var denied []kmsg.OffsetDeleteResponseTopic
		kept := r.Topics[:0]
		for _, t := range r.Topics {
			if c.mayTopic(acl.OpRead, t.Topic) {
				kept = append(kept, t)
				continue
			}
			d := kmsg.NewOffsetDeleteResponseTopic()
			d.Topic = t.Topic
			for _, p := range t.Partitions {
				dp := kmsg.NewOffsetDeleteResponseTopicPartition()
				dp.Partition, dp.ErrorCode = p.Partition, errTopicAuth
				d.Partitions = append(d.Partitions, dp)
			}
			denied = append(denied, d)
		}
		r.Topics = kept
		return nil, appendDenied(denied, func(resp kmsg.Response) *[]kmsg.OffsetDeleteResponseTopic {
			return &resp.(*kmsg.OffsetDeleteResponse).Topics
		})
	case *kmsg.DescribeClusterRequest:
		if !c.mayCluster(acl.OpDescribe) {
			resp := r.ResponseKind().(*kmsg.DescribeClusterResponse)
			resp.ErrorCode = errClustAuth
			return resp, nil
		}
		if r.IncludeClusterAuthorizedOperations {
			return nil, func(resp kmsg.Response) error {
				resp.(*kmsg.DescribeClusterResponse).ClusterAuthorizedOperations = c.opsOf(acl.ResourceCluster, acl.ClusterName, clusterAuthorizedOps)
				return nil
			}
		}
	case *kmsg.DescribeProducersRequest:
		return nil, func(resp kmsg.Response) error {
			dr := resp.(*kmsg.DescribeProducersResponse)
			for i := range dr.Topics {
				t := &dr.Topics[i]
				if !c.mayTopic(acl.OpRead, t.Topic) {
					for j := range t.Partitions {
						p := &t.Partitions[j]
						p.ErrorCode, p.ErrorMessage, p.ActiveProducers = errTopicAuth, nil, nil
					}
				}
			}
			return nil
		}
	case *kmsg.DescribeTopicPartitionsRequest:
		listing := len(r.Topics) == 0
		return nil, func(resp kmsg.Response) error {
			dr := resp.(*kmsg.DescribeTopicPartitionsResponse)
			kept := dr.Topics[:0]
			for _, t := range dr.Topics {
				name := ""
				if t.Topic != nil {
					name = *t.Topic
				}
				if !c.mayTopic(acl.OpDescribe, name) {
					if listing {
						continue
					}
					t.ErrorCode, t.Partitions, t.TopicID, t.IsInternal = errTopicAuth, nil, [16]byte{}, false
				} else if t.ErrorCode == 0 {
					t.AuthorizedOperations = c.opsOf(acl.ResourceTopic, name, topicAuthorizedOps)
				}
				kept = append(kept, t)
			}
			dr.Topics = kept
			return nil
		}
	case *kmsg.DescribeACLsRequest, *kmsg.CreateACLsRequest, *kmsg.DeleteACLsRequest:
		// Checked by their handlers (api29_acls.go).
	case *kmsg.SASLHandshakeRequest, *kmsg.SASLAuthenticateRequest:
		// Not authorized: they establish the principal.
	case *kmsg.DescribeClientQuotasRequest:
		// Kafka: DESCRIBE_CONFIGS on the cluster (ControllerApis).
		if !c.mayCluster(acl.OpDescribeConfigs) {
			resp := r.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
			resp.ErrorCode = errClustAuth
			return resp, nil
		}
	case *kmsg.DescribeUserSCRAMCredentialsRequest:
		if !c.mayCluster(acl.OpDescribe) {
			resp := r.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
			resp.ErrorCode = errClustAuth
			return resp, nil
		}
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		if !c.mayCluster(acl.OpAlter) {
			resp := r.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
			seen := map[string]bool{}
			add := func(user string) {
				if !seen[user] {
					seen[user] = true
					res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
					res.User, res.ErrorCode = user, errClustAuth
					resp.Results = append(resp.Results, res)
				}
			}
			for _, d := range r.Deletions {
				add(d.Name)
			}
			for _, u := range r.Upsertions {
				add(u.Name)
			}
			return resp, nil
		}
	}
	return nil, nil
}

// kmsgUnknownTopicID is UNKNOWN_TOPIC_ID, what Kafka answers for a topic id
// the principal may not describe (it does not tell that it exists).
const kmsgUnknownTopicID = int16(100)

// appendDenied returns a post that appends the refused entries to the
// response's list, nil when there are none.
func appendDenied[T any](denied []T, list func(kmsg.Response) *[]T) func(kmsg.Response) error {
	if len(denied) == 0 {
		return nil
	}
	return func(resp kmsg.Response) error {
		if resp == nil {
			return nil
		}
		l := list(resp)
		*l = append(*l, denied...)
		return nil
	}
}

// chainPost runs a, then b (either may be nil).
func chainPost(a, b func(kmsg.Response) error) func(kmsg.Response) error {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	return func(resp kmsg.Response) error {
		if err := a(resp); err != nil {
			return err
		}
		return b(resp)
	}
}

// configAuth is the refusal (0 when allowed) of op on a config resource:
// topics need op on the topic, brokers and broker loggers on the cluster,
// groups on the group.
func (c *conn) configAuth(op int8, rt kmsg.ConfigResourceType, name string) int16 {
	switch rt {
	case kmsg.ConfigResourceTypeTopic:
		if !c.mayTopic(op, name) {
			return errTopicAuth
		}
	case kmsg.ConfigResourceTypeGroupConfig:
		if !c.mayGroup(op, name) {
			return errGroupAuth
		}
	default:
		if !c.mayCluster(op) {
			return errClustAuth
		}
	}
	return 0
}

func (c *conn) authProduce(r *kmsg.ProduceRequest) (kmsg.Response, func(kmsg.Response) error) {
	txnDenied := r.TransactionID != nil && !c.may(acl.OpWrite, acl.ResourceTransactionalID, *r.TransactionID)
	var denied []kmsg.ProduceResponseTopic
	kept := r.Topics[:0]
	for _, t := range r.Topics {
		code := int16(0)
		if txnDenied {
			code = errTxnAuth
		} else if name := c.topicName(t.Topic, t.TopicID); name != "" && !c.mayTopic(acl.OpWrite, name) {
			code = errTopicAuth
		}
		if code == 0 {
			kept = append(kept, t)
			continue
		}
		d := kmsg.NewProduceResponseTopic()
		d.Topic, d.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			dp := kmsg.NewProduceResponseTopicPartition()
			dp.Partition, dp.ErrorCode, dp.BaseOffset, dp.LogAppendTime, dp.LogStartOffset = p.Partition, code, -1, -1, -1
			d.Partitions = append(d.Partitions, dp)
		}
		denied = append(denied, d)
	}
	r.Topics = kept
	if len(denied) == 0 {
		return nil, nil
	}
	if r.Acks == 0 {
		// Kafka closes the connection on an error of an acks=0 produce; the
		// authorized topics are still written.
		return nil, func(kmsg.Response) error { return errCloseConn }
	}
	return nil, appendDenied(denied, func(resp kmsg.Response) *[]kmsg.ProduceResponseTopic {
		return &resp.(*kmsg.ProduceResponse).Topics
	})
}

func (c *conn) authFetch(r *kmsg.FetchRequest) (kmsg.Response, func(kmsg.Response) error) {
	// A replica's fetch needs CLUSTER_ACTION; a consumer's READ on each topic.
	replica := r.ReplicaID >= 0 || r.Version >= 15 && r.ReplicaState.ID >= 0
	replicaOK := replica && c.mayCluster(acl.OpClusterAction)
	var denied []kmsg.FetchResponseTopic
	kept := r.Topics[:0]
	for _, t := range r.Topics {
		name := c.topicName(t.Topic, t.TopicID)
		ok := name == "" || c.mayTopic(acl.OpRead, name)
		if replica {
			ok = replicaOK
		}
		if ok {
			kept = append(kept, t)
			continue
		}
		d := kmsg.NewFetchResponseTopic()
		d.Topic, d.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			dp := kmsg.NewFetchResponseTopicPartition()
			dp.Partition, dp.ErrorCode, dp.HighWatermark, dp.LastStableOffset, dp.LogStartOffset = p.Partition, errTopicAuth, -1, -1, -1
			dp.PreferredReadReplica = -1
			dp.RecordBatches = noRecords // empty, not null: librdkafka reads a null as MessageSetSize -1 and retries at once, forever
			dp.AbortedTransactions = noAborted
			d.Partitions = append(d.Partitions, dp)
		}
		denied = append(denied, d)
	}
	r.Topics = kept
	if len(denied) > 0 {
		// Kafka answers at once when a partition has an error.
		r.MaxWaitMillis = 0
	}
	return nil, appendDenied(denied, func(resp kmsg.Response) *[]kmsg.FetchResponseTopic {
		return &resp.(*kmsg.FetchResponse).Topics
	})
}

func (c *conn) authMetadata(r *kmsg.MetadataRequest) (kmsg.Response, func(kmsg.Response) error) {
	s := c.s
	all := r.Topics == nil || r.Version == 0 && len(r.Topics) == 0
	var denied []kmsg.MetadataResponseTopic
	dropAll := false
	if !all {
		autoCreate := s.cfg.AutoCreateTopics && (r.Version <= 3 || r.AllowAutoTopicCreation)
		mayCreateAny := c.mayCluster(acl.OpCreate)
		kept := r.Topics[:0]
		for _, rt := range r.Topics {
			named := rt.Topic != nil && *rt.Topic != ""
			var name string
			if named {
				name = *rt.Topic
			}
			name = c.topicName(name, rt.TopicID)
			d := kmsg.NewMetadataResponseTopic()
			d.Topic, d.TopicID, d.ErrorCode = rt.Topic, rt.TopicID, errTopicAuth
			switch {
			case name == "":
				kept = append(kept, rt)
			case !c.mayTopic(acl.OpDescribe, name):
				if !named {
					d.ErrorCode = kmsgUnknownTopicID
				}
				denied = append(denied, d)
			case named && autoCreate && !mayCreateAny && !c.mayTopic(acl.OpCreate, name) && !c.topicExists(name):
				denied = append(denied, d)
			default:
				kept = append(kept, rt)
			}
		}
		r.Topics = kept
		dropAll = len(kept) == 0 && r.Version == 0
	}
	return nil, func(resp kmsg.Response) error {
		mr := resp.(*kmsg.MetadataResponse)
		if dropAll {
			mr.Topics = nil
		}
		kept := mr.Topics[:0]
		for _, t := range mr.Topics {
			name := ""
			if t.Topic != nil {
				name = *t.Topic
			}
			if all && !c.mayTopic(acl.OpDescribe, name) {
				continue // hidden, as Kafka hides topics a principal may not describe
			}
			if r.IncludeTopicAuthorizedOperations && t.ErrorCode == 0 {
				t.AuthorizedOperations = c.opsOf(acl.ResourceTopic, name, topicAuthorizedOps)
			}
			kept = append(kept, t)
		}
		for _, d := range denied {
			d.AuthorizedOperations = authorizedOps(r.IncludeTopicAuthorizedOperations, 0)
			kept = append(kept, d)
		}
		mr.Topics = kept
		if r.Version <= 10 && r.IncludeClusterAuthorizedOperations {
			mr.AuthorizedOperations = c.opsOf(acl.ResourceCluster, acl.ClusterName, clusterAuthorizedOps)
		}
		return nil
	}
}

// topicExists reports whether topic exists, looking it up in the backend
// when this node does not know it yet.
func (c *conn) topicExists(topic string) bool {
	if topic == offsetsTopic || c.s.topics.get(topic) != nil {
		return true
	}
	ctx, cancel := c.requestContext(0)
	defer cancel()
	return c.s.lookupTopic(ctx, topic) != nil
}

func (c *conn) authOffsetCommit(r *kmsg.OffsetCommitRequest) (kmsg.Response, func(kmsg.Response) error) {
	groupOK := c.mayGroup(acl.OpRead, r.Group)
	var denied []kmsg.OffsetCommitResponseTopic
	kept := r.Topics[:0]
	for _, t := range r.Topics {
		code := int16(0)
		if !groupOK {
			code = errGroupAuth
		} else if name := c.topicName(t.Topic, t.TopicID); name != "" && !c.mayTopic(acl.OpRead, name) {
			code = errTopicAuth
		}
		if code == 0 {
			kept = append(kept, t)
			continue
		}
		d := kmsg.NewOffsetCommitResponseTopic()
		d.Topic, d.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			dp := kmsg.NewOffsetCommitResponseTopicPartition()
			dp.Partition, dp.ErrorCode = p.Partition, code
			d.Partitions = append(d.Partitions, dp)
		}
		denied = append(denied, d)
	}
	if !groupOK {
		resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
		resp.Topics = denied
		return resp, nil
	}
	r.Topics = kept
	return nil, appendDenied(denied, func(resp kmsg.Response) *[]kmsg.OffsetCommitResponseTopic {
		return &resp.(*kmsg.OffsetCommitResponse).Topics
	})
}

func (c *conn) authOffsetFetch(r *kmsg.OffsetFetchRequest) (kmsg.Response, func(kmsg.Response) error) {
	return nil, func(resp kmsg.Response) error {
		or := resp.(*kmsg.OffsetFetchResponse)
		if r.Version < 8 {
			if !c.mayGroup(acl.OpDescribe, r.Group) {
				or.ErrorCode, or.Topics = errGroupAuth, nil
				if r.Version < 2 {
					for _, t := range r.Topics {
						rt := kmsg.NewOffsetFetchResponseTopic()
						rt.Topic = t.Topic
						for _, p := range t.Partitions {
							rp := kmsg.NewOffsetFetchResponseTopicPartition()
							rp.Partition, rp.Offset, rp.ErrorCode = p, -1, errGroupAuth
							rt.Partitions = append(rt.Partitions, rp)
						}
						or.Topics = append(or.Topics, rt)
					}
				}
				return nil
			}
			kept := or.Topics[:0]
			for _, t := range or.Topics {
				if !c.mayTopic(acl.OpDescribe, t.Topic) {
					if r.Topics == nil {
						continue
					}
					for j := range t.Partitions {
						p := &t.Partitions[j]
						p.ErrorCode, p.Offset, p.LeaderEpoch, p.Metadata = errTopicAuth, -1, -1, nil
					}
				}
				kept = append(kept, t)
			}
			or.Topics = kept
			return nil
		}
		for i := range or.Groups {
			g := &or.Groups[i]
			if !c.mayGroup(acl.OpDescribe, g.Group) {
				g.ErrorCode, g.Topics = errGroupAuth, nil
				continue
			}
			var asked bool
			for _, rg := range r.Groups {
				if rg.Group == g.Group {
					asked = rg.Topics != nil
				}
			}
			kept := g.Topics[:0]
			for _, t := range g.Topics {
				if name := c.topicName(t.Topic, t.TopicID); !c.mayTopic(acl.OpDescribe, name) {
					if !asked {
						continue
					}
					for j := range t.Partitions {
						p := &t.Partitions[j]
						p.ErrorCode, p.Offset, p.LeaderEpoch, p.Metadata = errTopicAuth, -1, -1, nil
					}
				}
				kept = append(kept, t)
			}
			g.Topics = kept
		}
		return nil
	}
}
