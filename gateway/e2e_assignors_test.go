package gateway_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/disgw/disgw/gateway"
)

// assignments tracks what each member of a group owns and at which
// generation, as the clients report it.
type assignments struct {
	mu    sync.Mutex
	owned map[string][]int32 // member → partitions
	gen   map[string]int32   // member → generation
}

func newAssignments() *assignments {
	return &assignments{owned: map[string][]int32{}, gen: map[string]int32{}}
}

func (a *assignments) set(member string, gen int32, parts []int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.owned[member] = append([]int32(nil), parts...)
	a.gen[member] = gen
}

// settled reports whether n members agree on one generation and own every
// one of partitions exactly once; it returns that generation.
func (a *assignments) settled(n int, partitions int32) (int32, bool, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.gen) != n {
		return 0, false, fmt.Sprintf("%d of %d members assigned", len(a.gen), n)
	}
	var gen int32 = -1
	seen := map[int32]int{}
	for m, g := range a.gen {
		if gen != -1 && g != gen {
			return 0, false, "generations differ"
		}
		gen = g
		for _, p := range a.owned[m] {
			seen[p]++
		}
	}
	for p := int32(0); p < partitions; p++ {
		if seen[p] != 1 {
			return 0, false, fmt.Sprintf("partition %d owned %d times (%v)", p, seen[p], a.owned)
		}
	}
	if len(seen) != int(partitions) {
		return 0, false, fmt.Sprintf("unknown partitions owned: %v", a.owned)
	}
	return gen, true, ""
}

func waitSettled(t *testing.T, a *assignments, n int, partitions int32) int32 {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	var why string
	for time.Now().Before(deadline) {
		gen, ok, w := a.settled(n, partitions)
		if ok {
			// Stable for a moment: no further rebalance follows.
			time.Sleep(500 * time.Millisecond)
			if gen2, ok2, _ := a.settled(n, partitions); ok2 && gen2 == gen {
				return gen
			}
			continue
		}
		why = w
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("group did not settle: %s", why)
	return 0
}

// TestAssignorsFranzCooperativeSticky: franz-go's cooperative-sticky
// assignor (its default) settles within two generations after the initial
// delay, also with more members than partitions.
func TestAssignorsFranzCooperativeSticky(t *testing.T) {
	g := startGateway(t, func(c *gateway.Config) {
		c.GroupInitialRebalanceDelay = 500 * time.Millisecond
		c.GroupMinSessionTimeout = 100 * time.Millisecond
	})
	adm := kadm.NewClient(g.client(t))
	for _, members := range []int{3, 8} {
		t.Run(fmt.Sprintf("%d members 6 partitions", members), func(t *testing.T) {
			topic := fmt.Sprintf("coop.%d", members)
			if _, err := adm.CreateTopic(context.Background(), 6, 1, nil, topic); err != nil {
				t.Fatal(err)
			}
			a := newAssignments()
			for i := 0; i < members; i++ {
				member := fmt.Sprint(i)
				var mu sync.Mutex
				owned := map[int32]bool{}
				update := func(add bool) func(context.Context, *kgo.Client, map[string][]int32) {
					return func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
						mu.Lock()
						defer mu.Unlock()
						for _, p := range m[topic] {
							if add {
								owned[p] = true
							} else {
								delete(owned, p)
							}
						}
					}
				}
				cl := g.client(t, append(groupOpts("coop-"+topic, topic),
					kgo.Balancers(kgo.CooperativeStickyBalancer()),
					kgo.OnPartitionsAssigned(update(true)),
					kgo.OnPartitionsRevoked(update(false)),
					kgo.OnPartitionsLost(update(false)),
				)...)
				go func() {
					ctx, cancel := context.WithTimeout(cl.Context(), 60*time.Second)
					defer cancel()
					for ctx.Err() == nil {
						// The topic is empty: poll briefly, to keep the
						// client's group loop moving and report its state.
						pctx, pcancel := context.WithTimeout(ctx, 100*time.Millisecond)
						cl.PollRecords(pctx, 100)
						pcancel()
						if _, gen := cl.GroupMetadata(); gen > 0 {
							mu.Lock()
							var parts []int32
							for p := range owned {
								parts = append(parts, p)
							}
							mu.Unlock()
							a.set(member, gen, parts)
						}
					}
				}()
			}
			gen := waitSettled(t, a, members, 6)
			if gen > 2 {
				t.Fatalf("settled at generation %d, want at most 2", gen)
			}
		})
	}
}

// TestAssignorsSarama: sarama's range and round-robin assignors settle
// within two generations after the initial delay, also with more members
// than partitions (some members get nothing).
func TestAssignorsSarama(t *testing.T) {
	g := startGateway(t, func(c *gateway.Config) {
		c.GroupInitialRebalanceDelay = 500 * time.Millisecond
		c.GroupMinSessionTimeout = 100 * time.Millisecond
	})
	adm := kadm.NewClient(g.client(t))
	strategies := map[string]sarama.BalanceStrategy{
		"range":      sarama.NewBalanceStrategyRange(),
		"roundrobin": sarama.NewBalanceStrategyRoundRobin(),
	}
	for name, strategy := range strategies {
		for _, members := range []int{3, 8} {
			t.Run(fmt.Sprintf("%s %d members 6 partitions", name, members), func(t *testing.T) {
				topic := fmt.Sprintf("sarama.%s.%d", name, members)
				if _, err := adm.CreateTopic(context.Background(), 6, 1, nil, topic); err != nil {
					t.Fatal(err)
				}
				a := newAssignments()
				ctx, cancel := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				t.Cleanup(func() { cancel(); wg.Wait() })
				for i := 0; i < members; i++ {
					cfg := sarama.NewConfig()
					cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{strategy}
					cfg.Consumer.Group.Session.Timeout = 2 * time.Second
					cfg.Consumer.Group.Heartbeat.Interval = 200 * time.Millisecond
					cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
					cg, err := sarama.NewConsumerGroup([]string{g.addr}, "grp-"+topic, cfg)
					if err != nil {
						t.Fatal(err)
					}
					h := &saramaHandler{member: fmt.Sprint(i), topic: topic, a: a}
					wg.Add(1)
					go func() {
						defer wg.Done()
						defer cg.Close()
						for ctx.Err() == nil {
							if err := cg.Consume(ctx, []string{topic}, h); err != nil && ctx.Err() == nil {
								time.Sleep(50 * time.Millisecond)
							}
						}
					}()
				}
				gen := waitSettled(t, a, members, 6)
				if gen > 2 {
					t.Fatalf("settled at generation %d, want at most 2", gen)
				}
			})
		}
	}
}

type saramaHandler struct {
	member, topic string
	a             *assignments
}

func (h *saramaHandler) Setup(s sarama.ConsumerGroupSession) error {
	parts := s.Claims()[h.topic]
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	h.a.set(h.member, s.GenerationID(), parts)
	return nil
}
func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for {
		select {
		case _, ok := <-c.Messages():
			if !ok {
				return nil
			}
		case <-s.Context().Done():
			return nil
		}
	}
}
