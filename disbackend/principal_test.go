package disbackend

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// TestCredentialsRedacted: no way of printing Credentials shows the SK:
// fmt's verbs, zap.Any, zap.Stringer, slog.
func TestCredentialsRedacted(t *testing.T) {
	const sk = "the-secret-key-value"
	c := Credentials{AK: "the-ak", SK: sk}
	var out []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
		out = append(out, fmt.Sprintf(verb, c), fmt.Sprintf(verb, &c))
	}
	out = append(out, fmt.Sprint(c), fmt.Sprintln(&c), fmt.Errorf("wrapped: %v", c).Error())
	var zb bytes.Buffer
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&zb), zap.DebugLevel))
	log.Info("creds", zap.Any("c", c), zap.Any("p", &c), zap.Stringer("s", c))
	out = append(out, zb.String())
	var sb bytes.Buffer
	slog.New(slog.NewJSONHandler(&sb, nil)).Info("creds", "c", c, "p", &c)
	out = append(out, sb.String())
	for _, o := range out {
		if strings.Contains(o, sk) {
			t.Errorf("printed with the SK: %s", o)
		}
		if !strings.Contains(o, "the-ak") && !strings.Contains(o, fmt.Sprintf("%x", "the-ak")) {
			t.Errorf("printed without the AK: %s", o)
		}
	}
	if got := CredentialsFrom(WithCredentials(context.Background(), &c)); got != &c {
		t.Errorf("CredentialsFrom: %v", got)
	}
	if CredentialsFrom(context.Background()) != nil || CredentialsFrom(WithCredentials(context.Background(), nil)) != nil {
		t.Error("credentials from a ctx without them")
	}
}
