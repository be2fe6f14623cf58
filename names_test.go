package connaudit_test

import (
	"crypto/tls"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"

	"github.com/connaudit/connaudit/retry"
)

// qualifiers are the names by which a text refers to the repository's
// packages ("pool.BodyIdleTimeout"), with their directories.
var qualifiers = map[string]string{
	"audit": "audit", "audittest": "audit/audittest", "faultserver": "faultserver", "httptrace": "httptrace",
	"pool": "pool", "pooltest": "pool/pooltest", "probe": "probe", "retry": "retry", "serve": "serve",
	"otelconnaudit": "otelconnaudit", "promconnaudit": "promconnaudit",
}

// qualified finds a name qualified by one of the repository's packages,
// not as the tail of an import path ("net/http/httptrace.ClientTrace").
var qualified = regexp.MustCompile(`(?:^|[^\w/.])(audit|audittest|faultserver|httptrace|pool|pooltest|probe|retry|serve|otelconnaudit|promconnaudit)\.([A-Z][A-Za-z0-9_]*)`)

// settingWord finds a word written as a setting is: the name of a field of
// http.Transport or net.Dialer, of a retry policy, or of an option.
var settingWord = regexp.MustCompile(`\b(?:Max[A-Z][A-Za-z0-9]*|[A-Z][A-Za-z0-9]*Timeout|Disable[A-Z][A-Za-z0-9]*|Force[A-Z][A-Za-z0-9]*|TLS[A-Z][A-Za-z0-9]*)\b`)

// foreign are the words written as settings that name something of
// another language's client, with where they are named.
var foreign = map[string]string{
	"MaxRetryError": "urllib3's exception, in serve's fix for the Python kit",
}

// TestSettingNamesExist: every name a text qualifies with one of the
// repository's packages — in the Go code's strings and comments, and in
// the Markdown documents — is one the package declares, and every word of
// a production string of the main module written as a setting is one that
// exists (a field of http.Transport, x/net's http2.Transport, net.Dialer, tls.Config or a retry
// policy, or a name a package declares): a fix, a bound or a document that
// names a setting renamed or removed fails here, not in a user's hands.
func TestSettingNamesExist(t *testing.T) {
	declared := map[string]map[string]bool{}
	all := map[string]bool{}
	for q, dir := range qualifiers {
		declared[q] = map[string]bool{}
		for _, n := range declaredNames(t, dir) {
			declared[q][n], all[n] = true, true
		}
	}
	// net/http/httptrace's names, which texts qualify as httptrace too.
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	require.NoError(t, err, "go env GOROOT")
	for _, n := range declaredNames(t, filepath.Join(strings.TrimSpace(string(goroot)), "src", "net", "http", "httptrace")) {
		declared["httptrace"][n] = true
	}
	//lint:ignore SA1019 a deprecated transport is still one a service may configure, and its settings are named in texts
	for _, v := range []any{http.Transport{}, http.HTTP2Config{}, http2.Transport{}, net.Dialer{}, tls.Config{}, retry.Policy{}, retry.Backoff{}} {
		for f := range reflect.TypeOf(v).Fields() {
			all[f.Name] = true
		}
	}

	checked := 0
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "kits" || d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		var texts []text
		switch {
		case strings.HasSuffix(path, ".md"):
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			for i, l := range strings.Split(string(b), "\n") {
				texts = append(texts, text{line: i + 1, s: l})
			}
		case strings.HasSuffix(path, ".go"):
			texts = goTexts(t, path)
		default:
			return nil
		}
		production := strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") && inMainModule(path)
		for _, tx := range texts {
			for _, m := range qualified.FindAllStringSubmatch(tx.s, -1) {
				checked++
				if !declared[m[1]][m[2]] {
					t.Errorf("%s:%d names %s.%s, which package %s does not declare", path, tx.line, m[1], m[2], m[1])
				}
			}
			if !production || !tx.str {
				continue
			}
			for _, w := range settingWord.FindAllString(tx.s, -1) {
				checked++
				if !all[w] && foreign[w] == "" {
					t.Errorf("%s:%d names the setting %s, which exists nowhere", path, tx.line, w)
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, checked, 100, "the names checked")
}

// text is a string literal or comment of a Go file, or a whole document.
type text struct {
	line int
	s    string
	str  bool // a string literal
}

// goTexts returns the string literals and comments of the Go file path.
func goTexts(t *testing.T, path string) []text {
	t.Helper()
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	fset := token.NewFileSet()
	file := fset.AddFile(path, -1, len(src))
	var s scanner.Scanner
	s.Init(file, src, nil, scanner.ScanComments)
	var out []text
	for {
		pos, tok, lit := s.Scan()
		switch tok {
		case token.EOF:
			return out
		case token.COMMENT:
			out = append(out, text{line: fset.Position(pos).Line, s: lit})
		case token.STRING:
			if v, err := strconv.Unquote(lit); err == nil {
				out = append(out, text{line: fset.Position(pos).Line, s: v, str: true})
			}
		}
	}
}

// inMainModule reports whether path, relative to the root, belongs to the
// main module rather than to a side module of its own.
func inMainModule(path string) bool {
	for dir := filepath.Dir(path); dir != "." && dir != "/"; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return false
		}
	}
	return true
}

// declaredNames returns every exported name the package of dir declares
// at its top level: consts, vars, funcs and types, those go doc lists
// under a type included.
func declaredNames(t *testing.T, dir string) []string {
	t.Helper()
	names := docNames(t, dir, true)
	fset := token.NewFileSet()
	// Its tests, which a record may name (bench/RESULTS.md does).
	tests, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	require.NoError(t, err)
	for _, path := range tests {
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.IsExported() {
				names = append(names, fd.Name.Name)
			}
		}
	}
	return names
}
