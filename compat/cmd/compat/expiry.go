package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// waitExpired waits until every record that topics hold now has expired
// (the DIS backend, under dislocal's short --retention-unit): each
// partition's log start offset is at or past the end offset it has now,
// so what a reader finds from the start of a compacted topic afterwards
// is only what was appended later, the compactor's copies of the live
// keys among it. At least one partition must have records. It says how
// many records expired and how long that took; limit bounds the wait.
func waitExpired(adm *kadm.Client, limit time.Duration, topics ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	ends, err := adm.ListEndOffsets(ctx, topics...)
	cancel()
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return "", err
	}
	target := map[string]map[int32]int64{}
	had := 0
	ends.Each(func(o kadm.ListedOffset) {
		if target[o.Topic] == nil {
			target[o.Topic] = map[int32]int64{}
		}
		target[o.Topic][o.Partition] = o.Offset
		if o.Offset > 0 {
			had++
		}
	})
	if had == 0 {
		return "", fmt.Errorf("%s: no records to expire", strings.Join(topics, ", "))
	}
	start := time.Now()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		starts, err := adm.ListStartOffsets(ctx, topics...)
		cancel()
		if err == nil {
			err = starts.Error()
		}
		var waiting []string
		if err == nil {
			starts.Each(func(o kadm.ListedOffset) {
				if want := target[o.Topic][o.Partition]; o.Offset < want {
					waiting = append(waiting, fmt.Sprintf("%s p%d start %d < %d", o.Topic, o.Partition, o.Offset, want))
				}
			})
			if len(waiting) == 0 {
				var expired []string
				for _, t := range topics {
					n, parts := int64(0), 0
					for _, end := range target[t] {
						n += end
						if end > 0 {
							parts++
						}
					}
					expired = append(expired, fmt.Sprintf("%s %d records in %d partitions", t, n, parts))
				}
				return fmt.Sprintf("%s expired in %.0fs", strings.Join(expired, ", "), time.Since(start).Seconds()), nil
			}
		}
		if time.Since(start) > limit {
			return "", fmt.Errorf("the records of %s had not expired after %v: %s (%v)", strings.Join(topics, ", "), limit, strings.Join(waiting, ", "), err)
		}
		time.Sleep(time.Second)
	}
}
