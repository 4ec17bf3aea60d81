// Package settingsgen writes, from the settings of configs.Config (each
// field's doc comment and tags, the one source of a setting), the files
// that repeat them:
//
//   - the settings table of docs/configuration.md, between the lines
//     BeginMarker and EndMarker (the rest of the page is left as it is);
//   - configs/disgw.yaml, every key at its default;
//   - gateway/settings_defaults.go, the defaults of the gateway.Config
//     fields that mirror a setting (the field of the same name, or the one
//     the setting's gateway tag names), so gateway.DefaultConfig needs no
//     second copy of them.
//
// configs/gen_settings.go runs it (go generate ./configs); a test in
// configs compares its output with the files. It reads the doc comments
// from configs/config.go and the gateway's field names from the gateway's
// source, so it runs even when the generated gateway file no longer
// compiles. It is used only by that generator and that test.
package settingsgen

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/disgw/disgw/configs"
)

// The lines around the generated table in docs/configuration.md.
const (
	BeginMarker = "<!-- BEGIN GENERATED: settings -->"
	EndMarker   = "<!-- END GENERATED: settings -->"
)

// The generated files, relative to the repository's root.
const (
	DocsFile     = "docs/configuration.md"
	YAMLFile     = "configs/disgw.yaml"
	GatewayFile  = "gateway/settings_defaults.go"
	configSource = "configs/config.go"
	gatewayDir   = "gateway"
)

// File is one generated file: its path relative to the repository's root
// and its whole content.
type File struct {
	Path    string
	Content []byte
}

// Generate returns the generated files of the repository at root.
func Generate(root string) ([]File, error) {
	docs, err := fieldDocs(filepath.Join(root, configSource), "Config")
	if err != nil {
		return nil, err
	}
	var out []File
	ss := configs.Settings()
	for _, s := range ss {
		if docs[s.Field] == "" {
			return nil, fmt.Errorf("%s: Config.%s has no doc comment: write what key %s means there", configSource, s.Field, s.Key)
		}
	}
	page, err := os.ReadFile(filepath.Join(root, DocsFile))
	if err != nil {
		return nil, err
	}
	if page, err = replaceRegion(page, table(ss, docs)); err != nil {
		return nil, fmt.Errorf("%s: %w", DocsFile, err)
	}
	out = append(out, File{DocsFile, page})
	out = append(out, File{YAMLFile, yamlExample(ss, docs)})
	g, err := gatewayDefaults(root, ss)
	if err != nil {
		return nil, err
	}
	return append(out, File{GatewayFile, g}), nil
}

// Write writes the generated files of the repository at root.
func Write(root string) error {
	files, err := Generate(root)
	if err != nil {
		return err
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(root, f.Path), f.Content, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// fieldDocs returns the doc comment of each field of struct typeName in
// the Go file path, as one paragraph.
func fieldDocs(path, typeName string) (map[string]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	st := findStruct(f, typeName)
	if st == nil {
		return nil, fmt.Errorf("%s: no struct %s", path, typeName)
	}
	out := map[string]string{}
	for _, fld := range st.Fields.List {
		for _, n := range fld.Names {
			out[n.Name] = strings.Join(strings.Fields(fld.Doc.Text()), " ")
		}
	}
	return out, nil
}

func findStruct(f *ast.File, name string) *ast.StructType {
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, sp := range gd.Specs {
			if ts, ok := sp.(*ast.TypeSpec); ok && ts.Name.Name == name {
				st, _ := ts.Type.(*ast.StructType)
				return st
			}
		}
	}
	return nil
}

// meaning is a field's doc comment without the field's name and a
// following "is" or "are": "MaxFrameBytes caps one request frame" becomes
// "caps one request frame".
func meaning(s configs.Setting, doc string) string {
	doc = strings.TrimPrefix(doc, s.Field+" ")
	for _, verb := range []string{"is ", "are "} {
		doc = strings.TrimPrefix(doc, verb)
	}
	return doc
}

// allowed says what a setting takes: its kind or unit, then its range,
// values or check.
func allowed(s configs.Setting) string {
	var parts []string
	switch {
	case s.Type == reflect.TypeFor[time.Duration]():
		parts = append(parts, "duration")
	case s.Type.Kind() == reflect.Bool:
		parts = append(parts, "`true` or `false`")
	case s.Unit != "":
		parts = append(parts, s.Unit)
	}
	if s.Range != "" {
		parts = append(parts, s.Range)
	}
	if len(s.Values) > 0 {
		parts = append(parts, "`"+strings.Join(s.Values, "`, `")+"`")
	}
	if s.CheckDoc != "" {
		parts = append(parts, s.CheckDoc)
	}
	return strings.Join(parts, "; ")
}

// defaultText is a setting's default for the docs: "empty", or the value
// with a binary size added to a whole number of KiB of bytes.
func defaultText(s configs.Setting) string {
	if s.Default == "" {
		if s.Type.Kind() == reflect.String {
			return "empty"
		}
		return "`" + fmt.Sprint(reflect.Zero(s.Type).Interface()) + "`"
	}
	text := "`" + s.Default + "`"
	if n, err := strconv.ParseInt(s.Default, 10, 64); err == nil && s.Unit == "bytes" {
		text += size(n)
	}
	return text
}

// size is " (N KiB)", " (N MiB)" or " (N GiB)" for n a whole number of
// them, else "".
func size(n int64) string {
	for _, u := range []struct {
		name  string
		shift uint
	}{{"GiB", 30}, {"MiB", 20}, {"KiB", 10}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf(" (%d %s)", n>>u.shift, u.name)
		}
	}
	return ""
}

var docsLink = regexp.MustCompile(`\bdocs/([a-z0-9-]+\.md)`)

// table is the markdown table of every setting, in Config's order.
func table(ss []configs.Setting, docs map[string]string) []byte {
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	var b bytes.Buffer
	b.WriteString("<!-- Generated by go generate ./configs from configs.Config (doc comments and tags); edit those, not this table. -->\n\n")
	b.WriteString("| key | environment | flag | default | values | meaning |\n|---|---|---|---|---|---|\n")
	for _, s := range ss {
		flag := ""
		if s.Flag != "" {
			flag = "`--" + s.Flag + "`"
		}
		m := docsLink.ReplaceAllString(meaning(s, docs[s.Field]), "[$1]($1)")
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s | %s | %s |\n", s.Key, s.Env, flag, cell(defaultText(s)), cell(allowed(s)), cell(m))
	}
	return b.Bytes()
}

// replaceRegion puts region between the marker lines of page.
func replaceRegion(page, region []byte) ([]byte, error) {
	begin := bytes.Index(page, []byte(BeginMarker+"\n"))
	end := bytes.Index(page, []byte(EndMarker))
	if begin < 0 || end < begin {
		return nil, fmt.Errorf("want a line %s, then a line %s, around the settings table", BeginMarker, EndMarker)
	}
	begin += len(BeginMarker) + 1
	out := append([]byte{}, page[:begin]...)
	out = append(out, region...)
	return append(out, page[end:]...), nil
}

const yamlHeader = `# disgw configuration, every key at its default.
#
# Precedence: these defaults < this file (--config FILE) < environment
# variables DISGW_<KEY IN UPPER CASE> (DISGW_LISTEN, DISGW_LOG_LEVEL, ...) <
# command-line flags. Unknown keys are an error. Durations are Go durations:
# "10s", "10m", "168h".
#
# Generated by go generate ./configs from configs.Config (each key's doc
# comment and tags); edit those, not this file. docs/configuration.md has
# the same as a table.
`

// yamlExample is configs/disgw.yaml: every key at its default, after its
// meaning and what it takes.
func yamlExample(ss []configs.Setting, docs map[string]string) []byte {
	var b bytes.Buffer
	b.WriteString(yamlHeader)
	for _, s := range ss {
		b.WriteString("\n")
		m := meaning(s, docs[s.Field])
		m = strings.ToUpper(m[:1]) + m[1:]
		writeComment(&b, m)
		if a := allowed(s); a != "" {
			writeComment(&b, "Values: "+a+".")
		}
		v := s.Default
		if s.Type.Kind() == reflect.String {
			v = yamlString(v)
		} else if v == "" {
			v = fmt.Sprint(reflect.Zero(s.Type).Interface())
		}
		fmt.Fprintf(&b, "%s: %s\n", s.Key, v)
	}
	return b.Bytes()
}

var plain = regexp.MustCompile(`^[A-Za-z0-9./_][A-Za-z0-9./_:,\-]*$`)

// yamlString writes s as a YAML scalar: plain when that reads back as the
// same string, else double-quoted.
func yamlString(s string) string {
	if s == "" || !plain.MatchString(s) || strings.Contains(s, ": ") {
		return strconv.Quote(s)
	}
	switch strings.ToLower(s) {
	case "true", "false", "yes", "no", "on", "off", "null", "y", "n":
		return strconv.Quote(s)
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return strconv.Quote(s)
	}
	return s
}

// writeComment writes text as "# " lines of at most 76 columns.
func writeComment(b *bytes.Buffer, text string) {
	line := "#"
	for _, w := range strings.Fields(text) {
		if len(line)+1+len(w) > 76 && line != "#" {
			b.WriteString(line + "\n")
			line = "#"
		}
		line += " " + w
	}
	b.WriteString(line + "\n")
}

// gatewayDefaults is gateway/settings_defaults.go: settingDefaults sets
// each gateway.Config field a setting fills to the setting's default.
func gatewayDefaults(root string, ss []configs.Setting) ([]byte, error) {
	types, err := structFields(filepath.Join(root, gatewayDir), "gateway")
	if err != nil {
		return nil, err
	}
	def := configs.Default()
	var body bytes.Buffer
	for _, s := range ss {
		path, ok, err := s.GatewayField(func(path string) bool { return resolve(types, "Config", path) })
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		fmt.Fprintf(&body, "\tc.%s = %s // %s\n", path, goValue(s, def.Value(s)), s.Key)
	}
	var b bytes.Buffer
	b.WriteString(`// Code generated by go generate ./configs (internal/settingsgen) from the
// default tags of configs.Config; DO NOT EDIT.

package gateway
`)
	if bytes.Contains(body.Bytes(), []byte("time.")) {
		b.WriteString("\nimport \"time\"\n")
	}
	b.WriteString(`
// settingDefaults sets each field of c that a disgw setting fills (the
// configs.Config field of the same name, or the one its gateway tag names)
// to the setting's default, the one place it is written.
func settingDefaults(c *Config) {
`)
	b.Write(body.Bytes())
	b.WriteString("}\n")
	return format.Source(b.Bytes())
}

// structFields reads the struct types of package pkg in dir: type name to
// field name to the field's type as written.
func structFields(dir, pkg string) (map[string]map[string]string, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	out := map[string]map[string]string{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		if f.Name.Name != pkg {
			continue // a generator (package main, build tag ignore)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			if st, ok := ts.Type.(*ast.StructType); ok {
				fields := map[string]string{}
				for _, fld := range st.Fields.List {
					var t bytes.Buffer
					_ = format.Node(&t, fset, fld.Type)
					for _, n := range fld.Names {
						fields[n.Name] = t.String()
					}
				}
				out[ts.Name.Name] = fields
			}
			return false
		})
	}
	return out, nil
}

// resolve reports whether struct typ of types has a field at the dotted
// path.
func resolve(types map[string]map[string]string, typ, path string) bool {
	name, rest, nested := strings.Cut(path, ".")
	t, ok := types[typ][name]
	if !ok {
		return false
	}
	if !nested {
		return true
	}
	return resolve(types, t, rest)
}

// goValue writes v, the default of s, as a Go expression.
func goValue(s configs.Setting, v reflect.Value) string {
	switch {
	case s.Type == reflect.TypeFor[time.Duration]():
		return durationExpr(time.Duration(v.Int()))
	case v.Kind() == reflect.String:
		return strconv.Quote(v.String())
	case v.Kind() == reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case v.Kind() == reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	}
	n := v.Int()
	if s.Unit == "bytes" {
		for _, shift := range []uint{30, 20, 10} {
			if n >= 1<<shift && n%(1<<shift) == 0 {
				return fmt.Sprintf("%d << %d", n>>shift, shift)
			}
		}
	}
	return strconv.FormatInt(n, 10)
}

// durationExpr writes d as a Go expression: "10 * time.Minute".
func durationExpr(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	for _, u := range []struct {
		name string
		d    time.Duration
	}{{"time.Hour", time.Hour}, {"time.Minute", time.Minute}, {"time.Second", time.Second}, {"time.Millisecond", time.Millisecond}} {
		if d%u.d == 0 {
			return fmt.Sprintf("%d * %s", d/u.d, u.name)
		}
	}
	return strconv.FormatInt(int64(d), 10)
}
