package layers

import (
	"go/build"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const mod = "github.com/disgw/disgw"

// rule forbids the packages matching from (a path, or a path ending in
// "/..." for it and the packages under it) to depend, directly or not, on
// any package that forbid reports.
type rule struct {
	from   string
	why    string
	forbid func(dep string) bool
}

// ours reports whether dep is a package of this module.
func ours(dep string) bool { return dep == mod || strings.HasPrefix(dep, mod+"/") }

func franz(dep string) bool { return strings.HasPrefix(dep, "github.com/twmb/franz-go") }

func under(p, dep string) bool { return dep == p || strings.HasPrefix(dep, p+"/") }

var backends = []string{mod + "/disbackend/localstore", mod + "/disbackend/disrest", mod + "/disbackend/dislocal", mod + "/disbackend/backendtest"}

func isBackend(dep string) bool {
	for _, b := range backends {
		if under(b, dep) {
			return true
		}
	}
	return false
}

var rules = []rule{
	{mod + "/kafkawire/batch", "the record-batch codec is a leaf: of ours only the byte budget (its decompression budget), no kmsg",
		func(dep string) bool { return (ours(dep) && dep != mod+"/internal/bytebudget") || franz(dep) }},
	{mod + "/kafkawire", "kafkawire frames requests: of ours only the batch codec",
		func(dep string) bool {
			return ours(dep) && dep != mod+"/kafkawire/batch" && dep != mod+"/internal/bytebudget"
		}},
	{mod + "/disbackend/...", "backends know no Kafka wire types (kmsg) and no layer above them",
		func(dep string) bool {
			return franz(dep) || (ours(dep) && !under(mod+"/disbackend", dep) && dep != mod+"/kafkawire/batch" &&
				dep != mod+"/internal/metrics" && dep != mod+"/internal/bytebudget" && dep != mod+"/internal/placement")
		}},
	{mod + "/...", "internal/settingsgen is the generator go generate ./configs runs (go/parser and all): no package of the binary depends on it",
		func(dep string) bool { return dep == mod+"/internal/settingsgen" }},
	{mod + "/internal/metrics", "the metric definitions are a leaf every layer may import: nothing of ours, no kmsg",
		func(dep string) bool { return ours(dep) || franz(dep) }},
	{mod + "/internal/placement", "placement (consistent hashing with bounded loads, rendezvous hashing) is a pure leaf the backend and the gateway may import: nothing of ours, no kmsg",
		func(dep string) bool { return ours(dep) || franz(dep) }},
	{mod + "/internal/bytebudget", "the byte budget (request budget, disrest buffer, decompression budget) is a leaf every layer may import: nothing of ours, no kmsg",
		func(dep string) bool { return ours(dep) || franz(dep) }},
	{mod + "/internal/errmap", "the Kafka error table the gateway and groupcoord share reads disbackend's and the batch codec's sentinels: no backend, nothing above it",
		func(dep string) bool {
			return isBackend(dep) || under(mod+"/gateway", dep) || under(mod+"/groupcoord", dep) || under(mod+"/configs", dep) ||
				under(mod+"/cmd", dep) || under(mod+"/admin", dep) || dep == mod+"/kafkawire"
		}},
	{mod + "/admin", "the admin listener reads the gateway and the disbackend.Backend interface; cmd injects them",
		func(dep string) bool { return isBackend(dep) || under(mod+"/configs", dep) || under(mod+"/cmd", dep) }},
	{mod + "/configs", "configs describes settings; cmd maps them onto each package's options",
		func(dep string) bool { return ours(dep) }},
	{mod + "/gateway", "the gateway reaches storage only through disbackend.Backend",
		func(dep string) bool { return isBackend(dep) || under(mod+"/configs", dep) || under(mod+"/cmd", dep) }},
	{mod + "/groupcoord", "the group coordinator sits under the gateway, over disbackend",
		func(dep string) bool {
			return isBackend(dep) || under(mod+"/gateway", dep) || under(mod+"/configs", dep) || dep == mod+"/kafkawire"
		}},
	{mod + "/txncoord", "the transaction coordinator sits under the gateway, over disbackend and beside groupcoord (an interface)",
		func(dep string) bool {
			return isBackend(dep) || under(mod+"/gateway", dep) || under(mod+"/groupcoord", dep) || under(mod+"/configs", dep) ||
				dep == mod+"/kafkawire"
		}},
}

// TestImports lists every package of the module with its dependencies (go
// list -deps, tests not included) and checks the rules.
func TestImports(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(build.Default.GOROOT, "bin", "go")
	}
	cmd := exec.Command(goBin, "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, mod+"/...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		deps[f[0]] = f[1:]
	}
	for _, r := range rules {
		matched := 0
		for pkg, ds := range deps {
			if p, ok := strings.CutSuffix(r.from, "/..."); ok && !under(p, pkg) || !ok && pkg != r.from {
				continue
			}
			matched++
			for _, d := range ds {
				if d != pkg && r.forbid(d) {
					t.Errorf("%s depends on %s: %s", pkg, d, r.why)
				}
			}
		}
		if matched == 0 {
			t.Errorf("rule for %s matches no package", r.from)
		}
	}
}
