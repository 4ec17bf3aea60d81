//go:build disgw_failpoints

package disrest

import (
	"fmt"
	"os"
	"time"
)

// failpointBeforePutEnv names the file of the failpoint before a
// PutRecords (failpoint.go), in builds with tag disgw_failpoints only. When
// the file exists and holds "STREAM PARTITION", the next writer of that
// partition to reach its PutRecords, after its fence check, removes it
// (the failpoint fires once), creates FILE.parked, and waits until
// FILE.release exists before it sends (however long that is: the writer's
// deadline does not stop the request).
const failpointBeforePutEnv = "DISGW_FAILPOINT_BEFORE_PUT"

func init() {
	path := os.Getenv(failpointBeforePutEnv)
	if path == "" {
		return
	}
	failpointBeforePut = func(stream string, part int32) bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		var st string
		var p int32
		if n, _ := fmt.Sscanf(string(b), "%s %d", &st, &p); n != 2 || st != stream || p != part {
			return false
		}
		if os.Remove(path) != nil {
			return false // another writer fired it
		}
		_ = os.WriteFile(path+".parked", nil, 0o600)
		for {
			if _, err := os.Stat(path + ".release"); err == nil {
				return true
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
