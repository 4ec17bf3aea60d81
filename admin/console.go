package admin

import (
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"

	"github.com/disgw/disgw/disbackend"
)

//go:embed web
var webFS embed.FS

var pageTmpl = template.Must(template.New("console").Funcs(template.FuncMap{
	"records": func(t Topic) int64 {
		var n int64
		for _, p := range t.Partitions {
			n += p.End - p.LogStart
		}
		return n
	},
	"size": func(n int64) string {
		if n < 0 {
			return "–"
		}
		return humanBytes(float64(n))
	},
	"rate": func(v float64) string { return fmt.Sprintf("%.1f", v) },
	"pct":  func(v float64) string { return fmt.Sprintf("%.1f%%", v) },
	"level": func(v float64) string {
		switch {
		case v >= 90:
			return "hot"
		case v >= 60:
			return "warm"
		}
		return ""
	},
	"shard": func(p int32) string { return disbackend.PartitionID(p) },
	"count": func(n int) string {
		if n < 0 {
			return "–"
		}
		return itoa(int64(n))
	},
}).ParseFS(webFS, "web/layout.html"))

// pages are the console's pages, in the navigation's order.
var pages = []struct{ path, name, page string }{
	{"/", "Overview", "overview"},
	{"/topics", "Topics", "topics"},
	{"/groups", "Consumer groups", "groups"},
	{"/dis", "DIS", "dis"},
	{"/errors", "Recent errors", "errors"},
	{"/config", "Configuration", "config"},
}

type navItem struct {
	Path, Name string
	Current    bool
}

type pageData struct {
	Title, Page, Fragment string
	Version, Backend      string
	Nav                   []navItem
	Snap                  *Snapshot
	Errors                []LogEntry
	Config                []KV
	// Cluster is the overview's cluster section, nil on one node.
	Cluster *ClusterPage
}

// consoleRoutes adds the console's pages, their fragments
// (/fragment/<page>, the part that refreshes) and static files.
func (s *Server) consoleRoutes(mux *http.ServeMux) {
	static, _ := fs.Sub(webFS, "web")
	files := http.FileServer(http.FS(static))
	mux.Handle("/static/", s.authed(http.StripPrefix("/static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, ".html") || r.URL.Path == "" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "max-age=300")
		files.ServeHTTP(w, r)
	}))))
	mux.Handle("/favicon.ico", http.RedirectHandler("/static/favicon.svg", http.StatusMovedPermanently))
	for _, p := range pages {
		p := p
		full := p.path
		if full == "/" {
			full = "/{$}"
		}
		mux.Handle(full, s.authed(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.render(w, "page", p.page, p.name)
		})))
		mux.Handle("/fragment/"+p.page, s.authed(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.render(w, "fragment", p.page, p.name)
		})))
	}
}

func (s *Server) render(w http.ResponseWriter, tmpl, page, title string) {
	d := pageData{Title: title, Page: page, Fragment: "/fragment/" + page, Version: s.opts.Version,
		Backend: s.opts.BackendName, Snap: s.Snapshot(), Config: s.opts.Config}
	if page == "errors" {
		d.Errors = s.opts.Errors.Entries()
	}
	if page == "overview" {
		d.Cluster = s.clusterPage(d.Snap)
	}
	for _, p := range pages {
		d.Nav = append(d.Nav, navItem{Path: p.path, Name: p.name, Current: p.page == page})
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	if err := pageTmpl.ExecuteTemplate(w, tmpl, d); err != nil {
		s.log.Warn("console page failed", zapString("page", page), zapErr(err))
	}
}

func humanBytes(v float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f %s", v, units[i])
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}
