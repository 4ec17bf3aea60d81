package groupcoord

import (
	"context"
	"errors"
	"maps"
	"math"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
)

// groupType is the only group type served here (ListGroups v5 GroupType).
const groupType = "classic"

// groupOps is what DescribeGroups reports as authorized with
// IncludeAuthorizedOperations: there is no authorizer, so every operation
// Kafka 4.4 defines on groups: READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS and
// ALTER_CONFIGS (3400, as Kafka 4.4 answers).
const groupOps = int32(1<<kmsg.ACLOperationRead | 1<<kmsg.ACLOperationDelete | 1<<kmsg.ACLOperationDescribe |
	1<<kmsg.ACLOperationDescribeConfigs | 1<<kmsg.ACLOperationAlterConfigs)

// appExists reports whether the group has an app (committed offsets) in
// the backend.
func (c *Coordinator) appExists(ctx context.Context, groupID string) (bool, error) {
	if c.apps == nil {
		return false, errNoApps
	}
	app, err := disbackend.AppNameForGroup(groupID)
	if err != nil {
		return false, nil // "" has no app
	}
	a, err := c.apps.DescribeApp(ctx, app)
	switch {
	case errors.Is(err, disbackend.ErrAppNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	if _, reversible := disbackend.GroupForAppName(app); !reversible && a.GroupID != groupID {
		return false, nil // another group's (hashed name)
	}
	return true, nil
}

// groupOfApp is the Kafka group id of an app: the one the backend kept, else
// the reversed name; "" for apps that are not groups.
func groupOfApp(a disbackend.App) string {
	if a.GroupID != "" {
		return a.GroupID
	}
	if g, ok := disbackend.GroupForAppName(a.Name); ok {
		return g
	}
	return ""
}

// DescribeGroups describes groups as Kafka does: members with their
// metadata and assignment only when Stable. A group with committed offsets
// but no members (in memory or not) is Empty, so lag tools work; an unknown
// group is Dead (with GROUP_ID_NOT_FOUND from v6).
func (c *Coordinator) DescribeGroups(ctx context.Context, req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range req.Groups {
		dg := c.describe(ctx, id, req.Version)
		dg.AuthorizedOperations = math.MinInt32
		// Kafka leaves a group answered with an error (GROUP_ID_NOT_FOUND
		// from v6) at "not requested".
		if req.IncludeAuthorizedOperations && dg.ErrorCode == 0 {
			dg.AuthorizedOperations = groupOps
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

func (c *Coordinator) describe(ctx context.Context, id string, version int16) kmsg.DescribeGroupsResponseGroup {
	dg := kmsg.NewDescribeGroupsResponseGroup()
	dg.Group = id
	if code := c.notReadyFor(id); code != 0 {
		dg.ErrorCode = code
		return dg
	}
	type result struct {
		dg     kmsg.DescribeGroupsResponseGroup
		active bool
	}
	ch := make(chan result, 1)
	found, err := c.send(id, false, func(g *group) {
		if g.cg != nil {
			// A consumer group: DescribeGroups describes classic groups
			// only (docs/consumer-protocol.md §6).
			d := kmsg.NewDescribeGroupsResponseGroup()
			d.Group, d.State = id, Dead.String()
			if version >= 6 {
				msg := "Group " + id + " is not a classic group."
				d.ErrorCode, d.ErrorMessage = kerr.GroupIDNotFound.Code, &msg
			}
			ch <- result{d, true}
			return
		}
		ch <- result{g.describe(), g.state != Empty}
	}, func() { ch <- result{} })
	if err != nil {
		dg.ErrorCode = sendCode(err)
		return dg
	}
	protocolType := ""
	if found {
		r := <-ch
		if r.active {
			return r.dg
		}
		protocolType = r.dg.ProtocolType
	}
	exists, err := c.appExists(ctx, id)
	pt, known := c.emptyType(id)
	if protocolType == "" {
		protocolType = pt
	}
	switch {
	case err != nil:
		dg.ErrorCode = c.backendCode(err)
	case exists || known:
		dg.State = Empty.String()
		dg.ProtocolType = protocolType
	default:
		dg.State = Dead.String()
		if version >= 6 {
			dg.ErrorCode = kerr.GroupIDNotFound.Code
			msg := "group " + id + " does not exist"
			dg.ErrorMessage = &msg
		}
	}
	return dg
}

func (g *group) describe() kmsg.DescribeGroupsResponseGroup {
	dg := kmsg.NewDescribeGroupsResponseGroup()
	dg.Group = g.id
	dg.State = g.state.String()
	dg.ProtocolType = g.protocolType
	if g.state == Stable {
		dg.Protocol = g.protocol
	}
	for _, m := range g.sortedMembers() {
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID = m.id
		dm.InstanceID = m.instanceID
		dm.ClientID = m.client.ID
		dm.ClientHost = m.client.Host
		// Outside Stable, Kafka describes a member without its
		// protocol metadata but with its last assignment
		// (ClassicGroupMember.describeNoMetadata): in PreparingRebalance
		// the one of the last generation, after a downgrade its
		// consumer-group target.
		if g.state == Stable {
			dm.ProtocolMetadata = m.metadata(g.protocol)
		}
		dm.MemberAssignment = m.assignment
		dg.Members = append(dg.Members, dm)
	}
	return dg
}

// ListGroups lists the groups with members in memory, every group the
// backend keeps offsets for (from its apps, not from gateway memory), the
// latter as Empty, and the Empty groups that had members and have no
// offsets (as Kafka lists them until its cleanup). An Empty group shows the
// protocol type it had, as Kafka answers ("" for a group that only ever
// committed offsets). StatesFilter (v4+) and TypesFilter (v5+) match
// case-insensitively; every group here is "classic". With Config.Owns,
// only the groups this node coordinates, as a Kafka broker lists the
// groups of the partitions it leads (clients ask every broker and merge).
func (c *Coordinator) ListGroups(ctx context.Context, req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	if code := c.notReady(); code != 0 {
		resp.ErrorCode = code
		return resp
	}
	if c.apps == nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp
	}
	listed := make(map[string]summary)
	c.mu.Lock()
	for id, g := range c.groups {
		g.mu.Lock()
		s := g.summary
		g.mu.Unlock()
		if (s.state != Empty && s.state != Dead || s.consumerState != "") && c.owns(id) {
			listed[id] = s
		}
	}
	c.mu.Unlock()
	apps, err := c.apps.ListApps(ctx)
	if err != nil {
		resp.ErrorCode = c.backendCode(err)
		return resp
	}
	c.mu.Lock()
	empty := maps.Clone(c.emptyTypes)
	c.mu.Unlock()
	for _, a := range apps {
		if id := groupOfApp(a); id != "" && c.owns(id) {
			if _, ok := listed[id]; !ok {
				listed[id] = summary{state: Empty, protocolType: empty[id]}
			}
		}
	}
	// Empty groups that had members and have no offsets, listed as Kafka
	// lists them until its cleanup removes them (ExpireOffsets here).
	for id, pt := range empty {
		if _, ok := listed[id]; !ok && c.owns(id) {
			listed[id] = summary{state: Empty, protocolType: pt}
		}
	}
	match := func(filter []string, v string) bool {
		if len(filter) == 0 {
			return true
		}
		for _, f := range filter {
			if strings.EqualFold(f, v) {
				return true
			}
		}
		return false
	}
	for id, s := range listed {
		state, typ := s.state.String(), groupType
		if s.consumerState != "" {
			state, typ = s.consumerState, "consumer"
		}
		if !match(req.StatesFilter, state) || !match(req.TypesFilter, typ) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = id, s.protocolType, state, typ
		resp.Groups = append(resp.Groups, lg)
	}
	sort.Slice(resp.Groups, func(i, j int) bool { return resp.Groups[i].Group < resp.Groups[j].Group })
	return resp
}

// DeleteGroups deletes groups without members, with their offsets (the DIS
// app). A group with members gets NON_EMPTY_GROUP, an unknown one
// GROUP_ID_NOT_FOUND; a group named twice is answered once, as Kafka 4.4
// answers.
func (c *Coordinator) DeleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	seen := make(map[string]bool, len(req.Groups))
	for _, id := range req.Groups {
		if seen[id] {
			continue // Kafka answers a group named twice once
		}
		seen[id] = true
		dg := kmsg.NewDeleteGroupsResponseGroup()
		dg.Group = id
		dg.ErrorCode = c.deleteGroup(ctx, id)
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

func (c *Coordinator) deleteGroup(ctx context.Context, id string) int16 {
	if code := c.notReadyFor(id); code != 0 {
		return code
	}
	if id == "" {
		return kerr.GroupIDNotFound.Code
	}
	if c.apps == nil {
		return kerr.CoordinatorNotAvailable.Code
	}
	ch := make(chan int16, 1)
	_, err := c.send(id, true, func(g *group) {
		if len(g.members) > 0 || len(g.pending) > 0 || g.isConsumer() {
			ch <- kerr.NonEmptyGroup.Code
			return
		}
		ch <- g.deleteApp(ctx, "deleted by DeleteGroups")
	}, func() { ch <- kerr.NotCoordinator.Code })
	if err != nil {
		return sendCode(err)
	}
	return <-ch
}

// deleteApp deletes the group's app and every checkpoint of it; runs on the
// group's goroutine, so no member can join meanwhile.
func (g *group) deleteApp(ctx context.Context, why string) int16 {
	c := g.c
	exists, err := c.appExists(ctx, g.id)
	_, known := c.emptyType(g.id) // an Empty group without offsets is deleted too, as in Kafka
	known = known || g.cg != nil  // an empty consumer group too
	if err == nil && !exists && !known {
		return kerr.GroupIDNotFound.Code
	}
	if err == nil && exists {
		err = c.apps.DeleteApp(ctx, g.app)
	}
	switch {
	case errors.Is(err, disbackend.ErrAppNotFound) && !known:
		return kerr.GroupIDNotFound.Code
	case errors.Is(err, disbackend.ErrAppNotFound):
	case err != nil:
		return c.backendCode(err)
	}
	g.forgetEmpty()
	g.forgetConsumer()
	clear(g.cache)
	clear(g.latest)
	c.mu.Lock()
	delete(c.emptySince, g.id)
	c.mu.Unlock()
	g.log.Info("group deleted with its offsets", zap.String("app", g.app), zap.String("reason", why))
	return 0
}

// OffsetDelete deletes committed offsets of some partitions. An Empty group
// loses any; a live group only those of topics it is not subscribed to
// (GROUP_SUBSCRIBED_TO_TOPIC for the others), which needs
// Config.SubscribedTopics to read "consumer" metadata; without it, or for
// other protocol types, a live group gets NON_EMPTY_GROUP, as Kafka does for
// protocols it cannot read.
func (c *Coordinator) OffsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	if code := c.notReadyFor(req.Group); code != 0 {
		resp.ErrorCode = code
		return resp
	}
	if c.apps == nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp
	}
	ch := make(chan struct{})
	_, err := c.send(req.Group, true, func(g *group) {
		defer close(ch)
		g.offsetDelete(ctx, req, resp)
	}, func() {
		resp.ErrorCode = kerr.NotCoordinator.Code
		close(ch)
	})
	if err != nil {
		resp.ErrorCode = sendCode(err)
		return resp
	}
	<-ch
	return resp
}

func (g *group) offsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest, resp *kmsg.OffsetDeleteResponse) {
	c := g.c
	var subscribed map[string]bool // nil: not a live group
	if g.isConsumer() {
		subscribed = g.cg.SubscribedTopics()
	} else if len(g.members) > 0 {
		if g.protocolType != "consumer" || c.cfg.SubscribedTopics == nil {
			resp.ErrorCode = kerr.NonEmptyGroup.Code
			return
		}
		subscribed = g.subscribedTopics()
	}
	exists, err := c.appExists(ctx, g.id)
	switch {
	case err != nil:
		resp.ErrorCode = c.backendCode(err)
		return
	case !exists:
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		return
	}
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		info, ok := c.topics.Topic(ctx, t.Topic)
		code := int16(0)
		switch {
		case !ok:
			code = kerr.UnknownTopicOrPartition.Code
		case subscribed != nil && (subscribed[t.Topic] || subscribed[""]):
			code = kerr.GroupSubscribedToTopic.Code
		}
		var ps []int32
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = code
			if code == 0 && (p.Partition < 0 || p.Partition >= info.Partitions) {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			}
			if rp.ErrorCode == 0 {
				ps = append(ps, p.Partition)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		if len(ps) > 0 {
			if err := c.apps.DeleteCheckpoints(ctx, g.app, info.Stream, ps); err != nil && !errors.Is(err, disbackend.ErrAppNotFound) {
				code := c.backendCode(err)
				for i := range rt.Partitions {
					if rt.Partitions[i].ErrorCode == 0 {
						rt.Partitions[i].ErrorCode = code
					}
				}
			}
			for _, p := range ps {
				delete(g.cache, tp{info.Stream, p})
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
}

// subscribedTopics is the union of the members' subscriptions for the
// chosen protocol (or each member's first protocol before one is chosen).
// A member whose metadata cannot be read subscribes to everything (key "").
func (g *group) subscribedTopics() map[string]bool {
	out := make(map[string]bool)
	for _, m := range g.members {
		proto := g.protocol
		if proto == "" && len(m.protocols) > 0 {
			proto = m.protocols[0].Name
		}
		topics, ok := g.c.cfg.SubscribedTopics(g.protocolType, m.metadata(proto))
		if !ok {
			out[""] = true
			continue
		}
		for _, t := range topics {
			out[t] = true
		}
	}
	return out
}
