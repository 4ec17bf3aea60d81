package gateway

// DeleteTopics: v0-6 (DIS DeleteStream).
//
// Version notes:
//   - v1: ThrottleMillis. v4: flexible. v5: ErrorMessage.
//   - v6: topics by name or id (UNKNOWN_TOPIC_ID when the id is unknown).
//
// Topics past Limits.MaxTopics get INVALID_REQUEST (limits.go). An unknown
// topic name or id (UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID) gets, v5+,
// the error code's default message, as Kafka's controller sends it.
//
// Deleting removes the stream and all its data; a topic created again with
// the same name gets a new topic id and starts at offset 0.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

func init() {
	registerAPI(20, 0, 6, (*conn).handleDeleteTopics, (*conn).authorizeDeleteTopics)
	controllerOnly(20, refuseDeleteTopics, topicsChanged(func(r *kmsg.DeleteTopicsResponse, add func(string, int16)) {
		for _, t := range r.Topics {
			if t.Topic != nil {
				add(*t.Topic, t.ErrorCode)
			}
		}
	}))
}

// refuseDeleteTopics answers every topic of r, named (v0-5) or by name or
// id (v6), with code (and, v5+, its message).
func refuseDeleteTopics(r *kmsg.DeleteTopicsRequest, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DeleteTopicsResponse)
	add := func(name *string, id [16]byte) {
		t := kmsg.NewDeleteTopicsResponseTopic()
		t.Topic, t.TopicID, t.ErrorCode = name, id, code
		if r.Version >= 5 {
			t.ErrorMessage = codeMessage(code)
		}
		resp.Topics = append(resp.Topics, t)
	}
	for i := range r.TopicNames {
		add(&r.TopicNames[i], [16]byte{})
	}
	for _, t := range r.Topics {
		add(t.Topic, t.TopicID)
	}
	return resp
}

// authorizeDeleteTopics: DELETE on each topic, named (v0-5) or by name or
// id (v6). A refused topic is taken out and answered
// TOPIC_AUTHORIZATION_FAILED, or UNKNOWN_TOPIC_ID when named by an id the
// principal may not even DESCRIBE (Kafka does not tell that it exists).
func (c *conn) authorizeDeleteTopics(req *kafkawire.Request) (kmsg.Response, postAuth) {
	r := req.Body.(*kmsg.DeleteTopicsRequest)
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
	return nil, appendDenied(denied, func(r *kmsg.DeleteTopicsResponse) *[]kmsg.DeleteTopicsResponseTopic { return &r.Topics })
}

func (c *conn) handleDeleteTopics(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.DeleteTopicsRequest)
	resp := r.ResponseKind().(*kmsg.DeleteTopicsResponse)
	s := c.s
	ctx, cancel := c.requestContext(r.TimeoutMillis)
	defer cancel()
	reqs := r.Topics
	if r.Version < 6 {
		for _, name := range r.TopicNames {
			t := kmsg.NewDeleteTopicsRequestTopic()
			t.Topic = &name
			reqs = append(reqs, t)
		}
	}
	q := newQuota(s.cfg.Limits.MaxTopics)
	defer q.report(c, limitTopics, "DeleteTopics")
	resp.Topics = make([]kmsg.DeleteTopicsResponseTopic, 0, len(reqs))
	for _, rt := range reqs {
		t := kmsg.NewDeleteTopicsResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		if !q.take() {
			t.ErrorCode = errCodeOverCap
			resp.Topics = append(resp.Topics, t)
			continue
		}
		var name string
		if rt.Topic != nil && *rt.Topic != "" {
			name = *rt.Topic
			if name == offsetsTopic {
				t.ErrorCode = kerr.TopicDeletionDisabled.Code
				if r.Version >= 5 {
					msg := offsetsTopic + " holds no records in disgw (group offsets are kept in the backend) and cannot be deleted"
					t.ErrorMessage = &msg
				}
			} else if st := s.topics.get(name); st == nil {
				t.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else {
				t.TopicID = st.TopicID
			}
		} else if st := s.topics.getByID(rt.TopicID); st != nil {
			name = st.TopicName
			t.Topic = &name
		} else {
			t.ErrorCode = kerr.UnknownTopicID.Code
		}
		if t.ErrorCode == 0 {
			if err := s.deleteTopic(ctx, name); err != nil {
				t.ErrorCode = kafkaError(c.log, err)
				if r.Version >= 5 {
					t.ErrorMessage = errMessage(err)
				}
			}
		}
		if r.Version >= 5 {
			// As Kafka's controller: the error code's default message
			// (an ApiError made without one).
			switch t.ErrorCode {
			case kerr.UnknownTopicOrPartition.Code:
				t.ErrorMessage = kmsg.StringPtr(kerr.UnknownTopicOrPartition.Description)
			case kerr.UnknownTopicID.Code:
				t.ErrorMessage = kmsg.StringPtr(kerr.UnknownTopicID.Description)
			}
		}
		resp.Topics = append(resp.Topics, t)
	}
	return ready(req, resp)
}

func (s *Server) deleteTopic(ctx context.Context, topic string) error {
	s.topics.adminMu.Lock()
	defer s.topics.adminMu.Unlock()
	st := s.topics.get(topic)
	if st == nil {
		return fmt.Errorf("%w: topic %q", errUnknownTopic, topic)
	}
	if err := s.backend.DeleteStream(ctx, st.Name); err != nil {
		return err
	}
	s.topics.remove(topic)
	s.log.Info("topic deleted", zapTopic(topic))
	return nil
}
