package gateway

import (
	"bytes"
	"testing"

	"github.com/xdg-go/scram"

	"github.com/disgw/disgw/disbackend"
)

// FuzzParsePlain: any SASL/PLAIN token parses or fails cleanly; a parsed
// one names a non-empty user and password that were in the token.
func FuzzParsePlain(f *testing.F) {
	for _, s := range []string{"\x00alice\x00secret", "alice\x00alice\x00secret", "bob\x00alice\x00x", "", "\x00\x00", "a\x00b\x00c\x00d"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		user, pass, err := parsePlain(msg)
		if err != nil {
			return
		}
		if user == "" || pass == "" || !bytes.Contains(msg, []byte(user)) || !bytes.HasSuffix(msg, []byte(pass)) {
			t.Fatalf("parsePlain(%q) = %q, %q", msg, user, pass)
		}
	})
}

// FuzzScramServer (it found scramStep's panic): arbitrary client-first
// and client-final messages through the gateway's SCRAM steps (xdg-go's
// first step, scramFinal.verify) never panic and never authenticate
// without the password's proof.
func FuzzScramServer(f *testing.F) {
	cred, err := NewScramCredential(disbackend.ScramSHA256, "pencil", MinScramIterations)
	if err != nil {
		f.Fatal(err)
	}
	lookup := func(user string) (scram.StoredCredentials, error) {
		if user != "user" {
			return scram.StoredCredentials{}, errAuthFailed
		}
		return scram.StoredCredentials{KeyFactors: scram.KeyFactors{Salt: string(cred.Salt), Iters: int(cred.Iterations)}, StoredKey: cred.StoredKey, ServerKey: cred.ServerKey}, nil
	}
	f.Add("n,,n=user,r=abc", "c=biws,r=abc,p=AAAA")
	f.Add("n,,n=user,r=abc,tokenauth=true", "c=biws,r=abcdef,p=dGVzdA==")
	f.Add("y,a=x,n=us=2Cer,r=", "c=,r=,p=")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, first, final string) {
		srv, err := scram.SHA256.NewServer(lookup)
		if err != nil {
			t.Fatal(err)
		}
		conv := srv.NewConversation()
		out, err := scramStep(conv, first)
		if err != nil {
			return
		}
		f, err := newScramFinal(disbackend.ScramSHA256, cred, first, out)
		if err != nil {
			return
		}
		if _, err := f.verify(final); err == nil {
			t.Fatalf("authenticated without the password: %q %q", first, final)
		}
	})
}
