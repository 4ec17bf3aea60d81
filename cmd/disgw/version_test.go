package main

import (
	"runtime/debug"
	"testing"
)

func TestVersionFromBuildInfo(t *testing.T) {
	t.Parallel()
	const rev = "8dbe637a0c2f4e1b9d6a7c3e5f0b1a2c3d4e5f60"
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i+1 < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"no build info", nil, "dev"},
		{"nothing known", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
		{"module version", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"},
			Settings: vcs("vcs.revision", rev, "vcs.modified", "true")}, "v1.2.3"},
		{"pseudo-version", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261130073837-8dbe637a0c2f+dirty"}},
			"v0.0.0-20261130073837-8dbe637a0c2f+dirty"},
		{"revision", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: vcs("vcs", "git", "vcs.revision", rev, "vcs.time", "2026-11-30T07:38:37Z", "vcs.modified", "false")}, "8dbe637a0c2f"},
		{"dirty revision", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: vcs("vcs.modified", "true", "vcs.revision", rev)}, "8dbe637a0c2f-dirty"},
		{"short revision", &debug.BuildInfo{Settings: vcs("vcs.revision", "abc123")}, "abc123"},
		{"modified without revision", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: vcs("vcs.modified", "true")}, "dev"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := versionFromBuildInfo(tc.bi); got != tc.want {
				t.Errorf("versionFromBuildInfo() = %q, want %q", got, tc.want)
			}
		})
	}
}
