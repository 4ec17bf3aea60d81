package disapi

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestCodes: every Code constant is a DIS.dddd code (or, for CodePrefix...,
// a prefix of one), no two name the same code, and each doc line names its
// code.
func TestCodes(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "codes.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	code := regexp.MustCompile(`^DIS\.[0-9]{4}$`)
	prefix := regexp.MustCompile(`^DIS\.[0-9]{1,3}$`)
	seen := map[string]string{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			name := vs.Names[0].Name
			lit, ok := vs.Values[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				t.Errorf("%s is not a string literal", name)
				continue
			}
			v, _ := strconv.Unquote(lit.Value)
			isPrefix := strings.HasPrefix(name, "CodePrefix")
			if !strings.HasPrefix(name, "Code") || isPrefix && !prefix.MatchString(v) || !isPrefix && !code.MatchString(v) {
				t.Errorf("%s = %q: want Code... = \"DIS.dddd\" or CodePrefix... = a prefix", name, v)
			}
			if other, dup := seen[v]; dup {
				t.Errorf("%s and %s are both %q", name, other, v)
			}
			seen[v] = name
			if doc := vs.Doc.Text(); !strings.HasPrefix(doc, name+" ") || !isPrefix && !strings.Contains(doc, v) {
				t.Errorf("%s: doc %q does not start with its name and quote %s", name, doc, v)
			}
		}
	}
	if len(seen) == 0 {
		t.Fatal("no codes found")
	}
}

// TestStandardLibraryOnly: disapi is imported by the client and the
// emulator alike, so it imports nothing but the standard library.
func TestStandardLibraryOnly(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if first, _, _ := strings.Cut(path, "/"); strings.Contains(first, ".") {
				t.Errorf("%s imports %s: disapi may import only the standard library", name, path)
			}
		}
	}
}
