package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// chromiumPath is Debian's chromium; with CI=true its absence fails the
// test, elsewhere it skips it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed (apt-get install chromium)")
	}
	t.Skip("chromium is not installed")
	return ""
}

// artefactDir is $DISGW_TEST_ARTIFACTS/<test> when set, else a temporary
// directory.
func artefactDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("DISGW_TEST_ARTIFACTS"); d != "" {
		d = filepath.Join(d, t.Name())
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// TestConsoleInChromium opens every console page in headless Chromium at
// 1366x768 after franz-go produced n records, a group committed them and
// m more were produced: the pages show the test's topic, group and lag,
// the lag shown (total and per partition) equals kadm's Lag for the group,
// the content refreshes through its fragment without a reload, no page
// scrolls horizontally (scrollWidth <= 1366) and the browser logs no
// console error or exception. Screenshots are kept as test artefacts.
func TestConsoleInChromium(t *testing.T) {
	t.Parallel()
	chromium := chromiumPath(t)
	const n, m = 30, 8
	f := startAdminFixture(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	pcl, err := kgo.NewClient(kgo.SeedBrokers(f.kafka), kgo.DefaultProduceTopic(f.topic))
	if err != nil {
		t.Fatal(err)
	}
	produceN(t, ctx, pcl, m, "more")
	pcl.Close()

	acl, err := kgo.NewClient(kgo.SeedBrokers(f.kafka))
	if err != nil {
		t.Fatal(err)
	}
	defer acl.Close()
	lags, err := kadm.NewClient(acl).Lag(ctx, f.group)
	if err != nil {
		t.Fatal(err)
	}
	gl, ok := lags[f.group]
	if !ok || gl.Error() != nil {
		t.Fatalf("kadm Lag of %s: %+v", f.group, gl)
	}
	want := gl.Lag.Total()
	if want != m {
		t.Fatalf("kadm's lag %d, want %d", want, m)
	}
	// The console reads a snapshot: wait until it has the new records.
	eventually(t, "snapshot with the lag", func() string {
		v, _ := sum(scrape(t, f.admin), "kafka_consumergroup_lag", map[string]string{"consumergroup": f.group})
		if v != float64(want) {
			return fmt.Sprintf("lag %v, want %d", v, want)
		}
		return ""
	})

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1366, 768),
	}
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()

	if err := chromedp.Do(bctx, chromedp.EmulateViewport(1366, 768)); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var consoleErrors []string
	messages := chromedp.Console(bctx)
	go func() {
		for msg, err := range messages {
			if err != nil {
				return
			}
			switch msg.Type {
			case chromedp.ConsoleError, chromedp.ConsoleWarning, chromedp.ConsoleException:
				mu.Lock()
				consoleErrors = append(consoleErrors, msg.String()+" ("+msg.URL+")")
				mu.Unlock()
			}
		}
	}()

	dir := artefactDir(t)
	type check struct {
		path, name      string
		topic, group    bool
		lag, partitions bool
	}
	checks := []check{
		{"/", "overview", true, true, true, false},
		{"/topics", "topics", true, false, false, false},
		{"/groups", "groups", true, true, true, true},
		{"/dis", "dis", true, true, true, false},
		{"/errors", "errors", false, false, false, false},
		{"/config", "config", false, false, false, false},
	}
	eval := func(what, expr string) string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
	for _, c := range checks {
		if err := chromedp.Do(bctx, chromedp.Navigate(f.admin+c.path), chromedp.WaitVisible(chromedp.CSS("#content"))); err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		text := eval(c.path, `document.body.innerText`)
		scrollWidth, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
		if err != nil {
			t.Fatal(err)
		}
		shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("%s: screenshot: %v", c.path, err)
		}
		if err := os.WriteFile(filepath.Join(dir, c.name+".png"), shot, 0o644); err != nil {
			t.Fatal(err)
		}
		if scrollWidth > 1366 {
			t.Errorf("%s: scrollWidth %d > 1366 (horizontal scroll)", c.path, scrollWidth)
		}
		if c.topic && !strings.Contains(text, f.topic) {
			t.Errorf("%s does not show topic %s", c.path, f.topic)
		}
		if c.group && !strings.Contains(text, f.group) {
			t.Errorf("%s does not show group %s", c.path, f.group)
		}
		if c.lag {
			var expr string
			if c.name == "dis" {
				// The checkpoints' lag column, summed over the group's rows.
				expr = fmt.Sprintf(`String(Array.from(document.querySelectorAll('tr[data-group=%q] td:last-child')).reduce((s, td) => s + Number(td.textContent), 0))`, f.group)
			} else {
				expr = fmt.Sprintf(`(e => e ? e.textContent.trim() : "missing")(document.querySelector('[data-group-lag=%q]'))`, f.group)
			}
			if shown := eval(c.path, expr); shown != fmt.Sprint(want) {
				t.Errorf("%s: lag shown %q, kadm's Lag %d", c.path, shown, want)
			}
		}
		if c.partitions {
			for topic, ps := range gl.Lag {
				for p, ml := range ps {
					sel := fmt.Sprintf(`[data-lag-group=%q][data-lag-topic=%q][data-lag-partition="%d"]`, f.group, topic, p)
					shown := eval(c.path, fmt.Sprintf(`(e => e ? e.textContent.trim() : "missing")(document.querySelector(%q))`, sel))
					if shown != fmt.Sprint(ml.Lag) {
						t.Errorf("%s: %s[%d] lag shown %q, kadm's %d", c.path, topic, p, shown, ml.Lag)
					}
				}
			}
			// The content refreshes from its fragment, not by a reload:
			// a mark set on the window survives the refresh.
			if _, err := chromedp.Run(bctx, chromedp.Evaluate[int](`window.__mark = 1`)); err != nil {
				t.Fatal(err)
			}
			refreshed, err := chromedp.Run(bctx, chromedp.Poll[bool](
				`document.getElementById("content").hasAttribute("data-refreshed") && window.__mark === 1`,
				chromedp.WithPollingTimeout(20*time.Second)))
			if err != nil || !refreshed {
				t.Errorf("%s: the content was not refreshed in place: %v", c.path, err)
			}
		}
	}
	time.Sleep(500 * time.Millisecond) // let the last console messages arrive
	mu.Lock()
	if len(consoleErrors) > 0 {
		t.Errorf("browser console errors:\n%s", strings.Join(consoleErrors, "\n"))
	}
	mu.Unlock()
	t.Logf("screenshots in %s", dir)
	if code := f.gw.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}
