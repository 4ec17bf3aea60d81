package main

import (
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/disgw/disgw/compat/internal/scen"
)

var stepAbout = map[string]string{
	scen.StepCreate:   "create the topic (3 partitions) through the client's admin API",
	scen.StepProduce:  "produce 1,000 keyed records with headers",
	scen.StepConsume:  "consume in a group from the earliest offset, commit what was processed, stop",
	scen.StepResume:   "a new consumer in the same group starts exactly at the committed offsets: no record before, none skipped",
	scen.StepDescribe: "describe the group and fetch its offsets: committed = end offsets",
}

func cell(s *stepResult) string {
	switch {
	case s.Status == "pass":
		return "pass"
	case s.Status == "na":
		return "n/a"
	case s.Status == "skip":
		return "skip"
	case s.Known != "":
		return "**FAIL** (known)"
	default:
		return "**FAIL**"
	}
}

func mdEscape(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	s = strings.ReplaceAll(s, "\n", " ")
	return s
}

func renderMarkdown(results []*clientResult, suite *kgoSuiteResult, backend string, nodes int, root string, took time.Duration) string {
	knownFile, kgoKnownFile := knownFiles(matrixName(backend, nodes))
	var b strings.Builder
	rev := "unknown"
	if out, err := exec.Command("git", "-C", root, "describe", "--always", "--dirty").Output(); err == nil {
		rev = strings.TrimSpace(string(out))
	}
	fmt.Fprintf(&b, "# Client compatibility matrix\n\n")
	if nodes > 1 {
		fmt.Fprintf(&b, "Written by `make compat-cluster` (`compat/cmd/compat -backend %s -nodes %d`; see [compat/README.md](../compat/README.md)). "+
			"disgw %s, %s/%s, %s, run took %s.\n\n", backend, nodes, rev, runtime.GOOS, runtime.GOARCH,
			time.Now().UTC().Format("2006-01-02 15:04 UTC"), took.Round(time.Second))
	} else {
		fmt.Fprintf(&b, "Written by `make compat` (`compat/cmd/compat`; see [compat/README.md](../compat/README.md)). "+
			"Each client runs against its own disgw (backend `%s`, fresh data directory, free port). "+
			"disgw %s, %s/%s, %s, run took %s.\n\n", backend, rev, runtime.GOOS, runtime.GOARCH,
			time.Now().UTC().Format("2006-01-02 15:04 UTC"), took.Round(time.Second))
	}
	if nodes > 1 {
		fmt.Fprintf(&b, "Backend `dis`, %d nodes (`make compat-cluster`): each client runs against its own `disgw dislocal` "+
			"(the DIS REST emulator, fresh data directory, AK/SK signatures checked, a group member dropped after %s without a heartbeat) "+
			"and %d `disgw serve --backend dis` nodes in cluster mode in front of it ([docs/cluster.md](cluster.md)), "+
			"node ids 0 to %d, each on its own port, with %s. "+
			"The client is bootstrapped with every node's address, except the rows named `-one-seed` (the last node's alone).\n\n",
			nodes, clusterDisArgs[len(clusterDisArgs)-1], nodes, nodes-1, clusterSettingsText())
	} else if backend == "dis" {
		b.WriteString("Backend `dis`: each disgw talks to its own `disgw dislocal` (the DIS REST emulator, " +
			"fresh data directory, AK/SK signatures checked) through the official DIS SDK.\n\n")
	}
	b.WriteString("Steps of the scenario:\n\n")
	for _, s := range scen.CoreSteps {
		fmt.Fprintf(&b, "- **%s**: %s\n", s, stepAbout[s])
	}
	b.WriteString("\n`n/a`: the client has no API for the step. `skip`: not run because an earlier step failed. " +
		"`(known)`: listed in `compat/" + knownFile + "` with its reason.\n\n")

	if len(results) > 0 {
		b.WriteString("| client | " + strings.Join(scen.CoreSteps, " | ") + " | other steps |\n")
		b.WriteString("|---" + strings.Repeat("|---", len(scen.CoreSteps)) + "|---|\n")
		for _, r := range results {
			row := []string{"`" + r.spec.name + "`"}
			for _, s := range scen.CoreSteps {
				row = append(row, cell(r.steps[s]))
			}
			var extra []string
			for _, s := range r.spec.extraSteps(r.matrix) {
				extra = append(extra, fmt.Sprintf("`%s`: %s", s, cell(r.steps[s])))
			}
			row = append(row, strings.Join(extra, "<br>"))
			b.WriteString("| " + strings.Join(row, " | ") + " |\n")
		}
		b.WriteString("\n## Clients\n\n| client | what | versions |\n|---|---|---|\n")
		for _, r := range results {
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", r.spec.name, mdEscape(r.spec.about), mdEscape(strings.Join(r.info, "; ")))
		}
		b.WriteString("\n## Failures\n\nEvery step that did not pass, with the failing assertion.\n\n")
		n := 0
		for _, r := range results {
			for _, s := range r.stepNames() {
				sr := r.steps[s]
				if sr.Status == "pass" || sr.Status == "na" {
					continue
				}
				n++
				fmt.Fprintf(&b, "- `%s` **%s** (%s): %s", r.spec.name, s, sr.Status, mdEscape(oneLine(sr.Detail, 700)))
				if sr.Known != "" {
					fmt.Fprintf(&b, "  \n  Known: %s", mdEscape(sr.Known))
				}
				b.WriteString("\n")
			}
			if r.note != "" {
				fmt.Fprintf(&b, "- `%s`: %s\n", r.spec.name, mdEscape(r.note))
			}
		}
		if n == 0 {
			b.WriteString("None.\n")
		}
		b.WriteString("\n## Passing steps\n\n<details><summary>What each passing step checked</summary>\n\n")
		for _, r := range results {
			for _, s := range r.stepNames() {
				if sr := r.steps[s]; sr.Status == "pass" {
					fmt.Fprintf(&b, "- `%s` %s: %s\n", r.spec.name, s, mdEscape(oneLine(sr.Detail, 300)))
				}
			}
		}
		b.WriteString("\n</details>\n")
	}

	b.WriteString("\n## franz-go's integration suite\n\n")
	if suite == nil {
		b.WriteString("Not run in this pass (`-skip-kgo-suite`, or `-only` without `kgo-suite`).\n")
	} else {
		fmt.Fprintf(&b, "`%s`\n\n", suite.Command)
		fmt.Fprintf(&b, "Result: %s.\n\n", mdEscape(suite.summary()))
		if !suite.RanKnown && len(suite.Known) > 0 {
			fmt.Fprintf(&b, "The %d tests of `compat/%s` were skipped (`-kgo-all` runs them); reasons are there.\n\n", len(suite.Known), kgoKnownFile)
		}
		if len(suite.Fail) > 0 {
			b.WriteString("Failed:\n\n")
			for _, t := range suite.Fail {
				tag := ""
				if _, ok := suite.Known[t]; ok {
					tag = " (known)"
				}
				fmt.Fprintf(&b, "- `%s`%s: %s\n", t, tag, mdEscape(suite.FailOutput[t]))
			}
			b.WriteString("\n")
		}
		if len(suite.Skip) > 0 {
			fmt.Fprintf(&b, "Skipped by the suite itself: %s.\n", "`"+strings.Join(suite.Skip, "`, `")+"`")
		}
	}
	return b.String()
}
