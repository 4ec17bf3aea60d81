//go:build ignore

// gen_settings writes, from the settings of Config (each field's doc
// comment and tags), the files that repeat them: the settings table of
// docs/configuration.md, configs/disgw.yaml and
// gateway/settings_defaults.go (see internal/settingsgen). Run from the
// configs directory:
//
//	go generate ./configs
//
// TestGeneratedFilesAreCurrent fails when one of them is stale.
package main

import (
	"log"

	"github.com/disgw/disgw/internal/settingsgen"
)

func main() {
	if err := settingsgen.Write(".."); err != nil {
		log.Fatal(err)
	}
}
