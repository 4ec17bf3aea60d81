package configs_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/disgw/disgw/internal/settingsgen"
)

// The files generated from Config's fields (the settings table of
// docs/configuration.md, configs/disgw.yaml, gateway/settings_defaults.go)
// are what the generator writes now: a setting added, changed or removed
// without regenerating fails here.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	t.Parallel()
	files, err := settingsgen.Generate("..")
	if err != nil {
		t.Fatalf("%v (then run go generate ./configs)", err)
	}
	for _, f := range files {
		got, err := os.ReadFile(filepath.Join("..", f.Path))
		if err != nil {
			t.Errorf("%v: run go generate ./configs", err)
			continue
		}
		if !bytes.Equal(got, f.Content) {
			t.Errorf("%s is stale: run go generate ./configs", f.Path)
		}
	}
}
