package configs

import (
	"os"
	"reflect"
	"testing"
	"tfd/daemon/config"
)

// TestDefaultConfig checks that tfd.toml parses to exactly the built-in defaults, sets every key
// of the schema itself (so it documents all of them), and has no key the schema lacks (config.Load
// refuses unknown keys).
func TestDefaultConfig(t *testing.T) {
	eff, err := config.Load(config.Sources{File: "tfd.toml", FileRequired: true})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(eff.Config, config.Default()) {
		t.Errorf("tfd.toml parses to\n%+v\nthe defaults are\n%+v", eff.Config, config.Default())
	}
	for key, origin := range eff.Origins {
		if origin.Layer != config.LayerFile {
			t.Errorf("tfd.toml does not list %s", key)
		}
	}
	onDisk, err := os.ReadFile("tfd.toml")
	if err != nil || string(onDisk) != string(Default) {
		t.Errorf("the embedded default differs from tfd.toml (%v)", err)
	}
}
