package connaudit_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// exportedTargets caps the top-level exported names of each production
// package of the repository (by directory), as [TestExportedNames] counts
// them: a package's API stays small enough to read in one go doc page, and
// a name added past its cap must earn its place, by raising the cap in the
// same commit with the reason in its message, or by replacing another.
var exportedTargets = map[string]int{
	".":               0,  // documentation only
	"audit":           30, // 30: the runner and its options (WithRoundTripper among them), the results, and the catalogue as data (Scenario, Expect, Steps, Listener, Request, Policy, Source)
	"audit/audittest": 3,  // 3: Run, RunScenarios, and RunContracts for a retry layer alone
	"faultserver":     38, // 37: a type per fault (18 and Fault), the server, its options and hung listeners, and serve's connection events and shared certificate
	"httptrace":       33, // 31
	"pool":            35, // 33
	"pool/pooltest":   3,  // 2
	"probe":           32, // 30
	"proxy":           26, // 26: the proxy, its options (the downstream Bounds and the upstream pool's options among them), the rules, and the report's types (clients, connections, attempts, the upstream pool, replays, verdicts)
	"retry":           11, // 9
	"serve":           40, // 40: the server, its options, the protocol's types and error kinds, the table, Run
	"otelconnaudit":   8,  // 6
	"promconnaudit":   7,  // 5
}

// notProduction are the directories below which no package is production
// code a user imports: internal packages, commands, kits, and the side
// modules of programs, benchmarks and browser tests.
var notProduction = []string{"internal", "cmd", "kits", "testdata", "bench", "compat", "examples", "viztest"}

// TestExportedNames counts the top-level exported names of each
// production package, as go doc lists them at the package's top level: an
// exported func (constructors included), type, var, or const, but for a
// const of a type the package declares, which go doc lists under that type.
// Methods and struct fields, listed under their type, do not count. It
// fails when a package has more names than its target, or has no target
// (a new package gets one).
func TestExportedNames(t *testing.T) {
	counted := map[string]bool{}
	for _, dir := range productionPackages(t) {
		names := exportedNames(t, dir)
		target, ok := exportedTargets[dir]
		require.True(t, ok, "package %s has no target in exportedTargets: %d names", dir, len(names))
		counted[dir] = true
		t.Logf("%-16s %3d names (target %d)", dir, len(names), target)
		if len(names) > target {
			t.Errorf("package %s has %d exported names, more than its target %d: %s",
				dir, len(names), target, strings.Join(names, ", "))
		}
	}
	for dir := range exportedTargets {
		require.True(t, counted[dir], "exportedTargets names %s, which is no production package", dir)
	}
}

// productionPackages returns the directories, relative to the repository's
// root, of the packages TestExportedNames counts: every directory with a
// Go file outside the notProduction trees whose package is not main.
func productionPackages(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(d.Name(), ".") || containsDir(notProduction, path)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly)
		if err != nil {
			return err
		}
		if dir := filepath.ToSlash(filepath.Dir(path)); f.Name.Name != "main" && !slices.Contains(dirs, dir) {
			dirs = append(dirs, dir)
		}
		return nil
	})
	require.NoError(t, err)
	return dirs
}

func containsDir(dirs []string, path string) bool {
	return slices.Contains(dirs, filepath.ToSlash(path))
}

// parsePackage parses the Go files of dir but its tests.
func parsePackage(t *testing.T, dir string) (*token.FileSet, []*ast.File) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var files []*ast.File
	fset := token.NewFileSet()
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.ParseComments|parser.SkipObjectResolution)
		require.NoError(t, err)
		files = append(files, f)
	}
	return fset, files
}

// exportedNames returns the names TestExportedNames counts in the package
// of dir, sorted, as package go/doc groups them: the package's funcs, vars
// and consts, and each type with its constructors and vars, but not its
// consts and methods.
func exportedNames(t *testing.T, dir string) []string {
	t.Helper()
	names := docNames(t, dir, false)
	sort.Strings(names)
	return names
}

// docNames returns the exported names go doc lists for the package of dir:
// its funcs, vars and consts, and each type with its constructors and
// vars, and with typeConsts the consts listed under a type too.
func docNames(t *testing.T, dir string, typeConsts bool) []string {
	t.Helper()
	fset, files := parsePackage(t, dir)
	pkg, err := doc.NewFromFiles(fset, files, "example.com/"+filepath.ToSlash(dir))
	require.NoError(t, err)
	var names []string
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			names = append(names, v.Names...)
		}
	}
	values(pkg.Consts)
	values(pkg.Vars)
	for _, f := range pkg.Funcs {
		names = append(names, f.Name)
	}
	for _, typ := range pkg.Types {
		names = append(names, typ.Name)
		if typeConsts {
			values(typ.Consts)
		}
		values(typ.Vars)
		for _, f := range typ.Funcs {
			names = append(names, f.Name)
		}
	}
	return names
}

// TestDocMapCurrent: the module's map in doc.go names every production
// package (a link to it, or for a side module its directory), the command
// and the kits.
func TestDocMapCurrent(t *testing.T) {
	b, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	text := strings.Join(strings.Fields(strings.ReplaceAll(string(b), "\n//", " ")), " ")
	for _, dir := range productionPackages(t) {
		if dir == "." {
			continue
		}
		link := "[github.com/connaudit/connaudit/" + dir + "]"
		if !inMainModule(filepath.Join(dir, "doc.go")) {
			link = dir + " ("
		}
		require.True(t, strings.Contains(text, link), "doc.go's map leaves out %s", dir)
	}
	for _, other := range []string{"cmd/connaudit", "kits/", "bench (", "compat (", "examples ("} {
		require.True(t, strings.Contains(text, other), "doc.go's map leaves out %s", other)
	}
}
