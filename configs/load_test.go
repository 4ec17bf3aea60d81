package configs

import (
	"slices"
	"strings"
	"testing"
)

// An unknown key in the file names the nearest key when it is a typo of
// one, and otherwise says where the keys are listed, never all of them.
func TestUnknownKeySuggestion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key, want string // want: the suggested key; "" for none
	}{
		{"admin-listen", "admin_listen"},
		{"Admin_Listen", "admin_listen"},
		{"log.level", "log_level"},
		{"loglevel", "log_level"},
		{"retention_chek_interval", "retention_check_interval"},
		{"advertised_listener", "advertised_listeners"},
		{"idle_timout", "idle_timeout"},
		{"listen_addr", ""},
		{"foo", ""},
		{"bootstrap_servers", ""},
	}
	for _, tc := range tests {
		t.Run(tc.key, func(t *testing.T) {
			t.Parallel()
			if got := suggestKey(tc.key); got != tc.want {
				t.Errorf("suggestKey(%q) = %q, want %q", tc.key, got, tc.want)
			}
			_, err := Load(writeFile(t, tc.key+": x\n"))
			if err == nil {
				t.Fatal("Load succeeded, want an error")
			}
			msg := err.Error()
			if !strings.Contains(msg, `line 1: unknown key "`+tc.key+`"`) {
				t.Errorf("error %q does not name the key and its line", msg)
			}
			if tc.want != "" && !strings.Contains(msg, `did you mean "`+tc.want+`"?`) {
				t.Errorf("error %q does not suggest %q", msg, tc.want)
			}
			if tc.want == "" && strings.Contains(msg, "did you mean") {
				t.Errorf("error %q suggests a key for a name near none", msg)
			}
			// Not the whole list: at most the one suggestion.
			if _, line, _ := strings.Cut(msg, "line 1: "); len(line) > 120 || strings.Contains(line, "shutdown_grace") {
				t.Errorf("error %q lists more keys than the suggestion", msg)
			}
		})
	}
}

func TestEditDistance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"", "abc", 3}, {"abc", "", 3}, {"kitten", "sitting", 3}, {"data", "data", 0}, {"ab", "ba", 2}} {
		if d := editDistance(tc.a, tc.b); d != tc.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, d, tc.d)
		}
	}
}

// An environment variable set to the empty string sets the keys whose empty
// value means something (admin_listen off, advertise the bound address,
// listeners one on listen) and counts as unset for every other key; an
// unset variable changes nothing.
func TestApplyLookupEnvEmpty(t *testing.T) {
	t.Parallel()
	c, err := Load(writeFile(t, "advertise: kafka.example:9092\nlisteners: PLAINTEXT://127.0.0.1:9093\nlisten: 127.0.0.1:9094\ndata: /srv/disgw\n"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"DISGW_ADMIN_LISTEN": "", "DISGW_ADVERTISE": "", "DISGW_LISTENERS": "",
		"DISGW_LISTEN": "", "DISGW_DATA": "", "DISGW_LOG_LEVEL": "", "DISGW_IDLE_TIMEOUT": "",
	}
	if err := c.ApplyLookupEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if c.AdminListen != "" || c.Advertise != "" || c.ListenersList != "" {
		t.Errorf("empty variables left admin_listen %q, advertise %q, listeners %q; want all empty", c.AdminListen, c.Advertise, c.ListenersList)
	}
	def := Default()
	if c.Listen != "127.0.0.1:9094" || c.Data != "/srv/disgw" || c.LogLevel != def.LogLevel || c.IdleTimeout != def.IdleTimeout {
		t.Errorf("empty variables changed listen %q, data %q, log_level %q, idle_timeout %v; want the file's and the defaults", c.Listen, c.Data, c.LogLevel, c.IdleTimeout)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate() = %v", err)
	}
	var keys []string
	for _, s := range Settings() {
		if s.EmptyEnv {
			keys = append(keys, s.Key)
		}
	}
	if got := strings.Join(keys, ","); got != "advertise,listeners,admin_listen" {
		t.Errorf("keys whose empty variable counts: %s", got)
	}

	// ApplyEnv's getenv cannot tell empty from unset: empty is unset.
	c = Default()
	if err := c.ApplyEnv(envMap(map[string]string{"DISGW_ADMIN_LISTEN": ""})); err != nil || c.AdminListen != def.AdminListen {
		t.Errorf("ApplyEnv with an empty DISGW_ADMIN_LISTEN: admin_listen %q, %v; want the default", c.AdminListen, err)
	}
	// Unset: the default.
	c = Default()
	if err := c.ApplyLookupEnv(func(string) (string, bool) { return "", false }); err != nil || c != def {
		t.Errorf("ApplyLookupEnv with nothing set changed the defaults: %v", err)
	}
}

// TestUnknownEnv: a DISGW_ variable that is no setting is named, with the
// nearest setting's variable when it looks like a typo; settings' own
// variables, other programs' and the tests' DISGW_ variables are not.
func TestUnknownEnv(t *testing.T) {
	got := UnknownEnv([]string{"DISGW_LISEN=127.0.0.1:1", "DISGW_LISTEN=x", "DISGW_DIS_AK=ak", "PATH=/bin",
		"DISGW_DISLOCAL_SK=sk", "DISGW_TEST_IDEM_KILL9=1", "DISGW_NOTHING_LIKE_IT_AT_ALL=1", "DISGW_ADMIN_LISTEN="})
	want := []string{
		"environment variable DISGW_LISEN is no setting (did you mean DISGW_LISTEN?)",
		"environment variable DISGW_NOTHING_LIKE_IT_AT_ALL is no setting (docs/configuration.md lists every DISGW_ variable)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("UnknownEnv = %q, want %q", got, want)
	}
}
