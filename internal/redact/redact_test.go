package redact

import (
	"net/url"
	"reflect"
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"https://user:pw@mcp.example.com/mcp?token=abc&x=1", "https://***:***@mcp.example.com/mcp?token=***&x=1"},
		{"https://mcp.example.com/mcp", "https://mcp.example.com/mcp"},
		{"http://127.0.0.1:8080/mcp", "http://127.0.0.1:8080/mcp"},
		{"https://h/p?API-Key=1&Access_Token=2&keep=3#frag", "https://h/p?API-Key=***&Access_Token=***&keep=3#frag"},
		{"https://h/p?my_token=1&github_token_0123456789abcdef=2&tokenizer=3", "https://h/p?my_token=***&github_token_0123456789abcdef=***&tokenizer=3"},
		{"https://h/p?Refresh_Token=r&access_token_0123456789abcdef01=z&page=2", "https://h/p?Refresh_Token=***&access_token_0123456789abcdef01=***&page=2"},
		{"https://h/p?%74oken=abc", "https://h/p?%74oken=***"},
		{"https://h/p?%2574oken=1", "https://h/p?%2574oken=***"},
		{"https://h/p?x-amz-signature=s&sig=t&code=c", "https://h/p?x-amz-signature=***&sig=***&code=***"},
		{"https://api.telegram.org/bot123456:AAH-secret_x/getMe", "https://api.telegram.org/bot***/getMe"},
		// The whole token goes, not only its [A-Za-z0-9_-] prefix.
		{"https://h/bot123:abc.def/x", "https://h/bot***/x"},
		{"https://h/bot123:abc~d%2Ee?x=1", "https://h/bot***?x=1"},
		{"https://token@h/p", "https://***:***@h/p"},
		{"not a url", "not a url"},
	} {
		if got := URL(tt.in); got != tt.want {
			t.Errorf("URL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestArgs(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want []string }{
		{[]string{"--token", "t", "--x", "y"}, []string{"--token", "***", "--x", "y"}},
		{[]string{"--GitHub-Token=abc"}, []string{"--GitHub-Token=***"}},
		{[]string{"--api-key=abc", "--github-pat", "p", "--db-password", "x", "--verbose"}, []string{"--api-key=***", "--github-pat", "***", "--db-password", "***", "--verbose"}},
		{[]string{"--client-secret", "s", "--private_key", "k", "--session-key", "z"}, []string{"--client-secret", "***", "--private_key", "***", "--session-key", "***"}},
		{[]string{"--key", "k", "--password"}, []string{"--key", "***", "--password"}},
		{[]string{"--tokenizer", "bpe"}, []string{"--tokenizer", "bpe"}},
		{[]string{"https://u:p@h/x?token=1"}, []string{"https://***:***@h/x?token=***"}},
		{[]string{"--url", "https://u:p@h/?key=1"}, []string{"--url", "https://***:***@h/?key=***"}},
		{[]string{"Authorization: Bearer abcdef123456"}, []string{"Authorization: Bearer ***"}},
		{[]string{"API_KEY=sk-abcdefghijklmnopqrstu", "ghp_abcdefghijklmnopqrstuvwxyz0123"}, []string{"API_KEY=***", "***"}},
		{[]string{"serve", "sk-abcdefghijklmnopqrstuvwx"}, []string{"serve", "***"}},
	} {
		if got := Args(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Args(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := StdioLaunch("npx", []string{"-y", "srv", "--token", "t"}, "/w"); got != "npx -y srv --token *** (cwd=/w)" {
		t.Errorf("StdioLaunch = %q", got)
	}
}

func TestText(t *testing.T) {
	t.Parallel()
	for _, x := range []struct{ in, out string }{
		{"Authorization: Bearer abcdefghijkl", "Authorization: Bearer ***"},
		{"using Bearer abcdefghijkl now", "using Bearer *** now"},
		{"password=hunter2 user=bob", "password=*** user=bob"},
		{`{"api_key": "zzz", "name": "n"}`, `{"api_key": "***", "name": "n"}`},
		{"token ghp_abcdefghijklmnopqrstuvwxyz0123 ok", "token *** ok"},
		{"dial https://h/bot1:a.b/x failed", "dial https://h/bot***/x failed"},
	} {
		if got := Text(x.in); got != x.out {
			t.Errorf("Text(%q) = %q, want %q", x.in, got, x.out)
		}
	}
}

func TestHeadersAndKeyNames(t *testing.T) {
	t.Parallel()
	h := Headers(map[string]string{"Authorization": "Bearer x", "X-API-Key": "k", "Accept": "a"})
	if !reflect.DeepEqual(h, map[string]string{"Authorization": "***", "X-API-Key": "***", "Accept": "a"}) {
		t.Errorf("Headers = %v", h)
	}
	for name, want := range map[string]bool{
		"Authorization": true, "proxy-authorization": true, "X-Api-Key": true, "FOO_API_KEY": true,
		"my-apikey": true, "GITHUB_TOKEN": true, "token": true, "DB_PASSWORD": true, "x-bearer": true,
		"FOO": false, "NODE_OPTIONS": false, "tokenizer": false, "X-Request-Id": false, "mytoken": false,
	} {
		if got := IsSensitiveKeyName(name); got != want {
			t.Errorf("IsSensitiveKeyName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestRedactor(t *testing.T) {
	t.Parallel()
	if got := NewRedactor("abcd1234", "ab").Redact("k=abcd1234 ab"); got != "k=*** ab" {
		t.Errorf("Redactor = %q", got)
	}
	var nilR *Redactor
	if got := nilR.Redact("Bearer abcdefgh"); got != "Bearer ***" {
		t.Errorf("nil Redactor = %q", got)
	}
}

// URL is idempotent and never shows a password that appears once, in the
// userinfo.
func FuzzURL(f *testing.F) {
	for _, s := range []string{"https://user:pw@mcp.example.com/mcp?token=abc&x=1", "http://h/bot1:x/y?%74oken=1#f",
		"not a url", "https://a@b@c/d", "http://h/?%2574oken=x", "::", "http://[::1]:80/?a=b&&c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		once := URL(s)
		if twice := URL(once); twice != once {
			t.Fatalf("URL not idempotent: %q -> %q -> %q", s, once, twice)
		}
		if u, err := url.Parse(s); err == nil && u.Scheme != "" && u.User != nil {
			if pw, ok := u.User.Password(); ok && len(pw) >= 4 && strings.Count(s, pw) == 1 && strings.Contains(once, pw) {
				t.Fatalf("URL(%q) = %q shows the password", s, once)
			}
		}
	})
}
