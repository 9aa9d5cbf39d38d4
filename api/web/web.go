// Package web is cardhour's dashboard: hand-written HTML, JavaScript modules
// and CSS, and a vendored Apache ECharts (static/vendor, its licence beside
// it, its SHA-256 in SHA256SUMS), embedded in the binary and served under a
// prefix (the API serves it at /ui/). The pages read the HTTP API with the
// bearer token the user pastes; nothing here reads a store.
//
// Every file is served with a strong ETag (304 on If-None-Match) and, when
// the client accepts it and it is smaller, gzip-compressed; the compressed
// bodies are made once, on the first request. Files whose name carries a
// version (the vendored library) may be cached for a year; the others are
// revalidated on every load (Cache-Control: no-cache).
package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
)

//go:embed static
var static embed.FS

// Files is the embedded file tree (index.html at its root).
func Files() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the directory is embedded above
	}
	return sub
}

// contentSecurityPolicy allows only the dashboard's own scripts and the API
// on the same origin. Inline styles are allowed: ECharts positions its
// tooltip with style attributes.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data: blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"

type asset struct {
	body, gz    []byte
	etag, gzTag string
	ctype       string
	cache       string
}

// Handler serves the embedded files; strip the prefix before it (the
// request path "/" and "" are index.html).
type Handler struct {
	once   sync.Once
	assets map[string]*asset
	err    error
}

// New returns a Handler.
func New() *Handler { return &Handler{} }

// immutable reports whether name carries a version, so that its content
// never changes under that name.
func immutable(name string) bool {
	return strings.HasPrefix(name, "vendor/") && strings.Contains(path.Base(name), "-") &&
		strings.ContainsAny(path.Base(name), "0123456789")
}

func (h *Handler) load() {
	h.assets = map[string]*asset{}
	h.err = fs.WalkDir(Files(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(Files(), name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		tag := hex.EncodeToString(sum[:12])
		a := &asset{body: b, etag: `"` + tag + `"`, gzTag: `"` + tag + `-gz"`, cache: "no-cache"}
		a.ctype = mime.TypeByExtension(path.Ext(name))
		switch path.Ext(name) {
		case ".js":
			a.ctype = "text/javascript; charset=utf-8"
		case ".html":
			a.ctype = "text/html; charset=utf-8"
		case ".css":
			a.ctype = "text/css; charset=utf-8"
		case ".json":
			a.ctype = "application/json"
		case "", ".md":
			a.ctype = "text/plain; charset=utf-8"
		}
		if a.ctype == "" {
			a.ctype = "application/octet-stream"
		}
		if immutable(name) {
			a.cache = "public, max-age=31536000, immutable"
		}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		_, _ = zw.Write(b)
		if err := zw.Close(); err != nil {
			return err
		}
		if buf.Len() < len(b) {
			a.gz = buf.Bytes()
		}
		h.assets[name] = a
		return nil
	})
}

// acceptsGzip reads Accept-Encoding (gzip with a q-value above 0).
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(enc), "gzip") {
			continue
		}
		if q, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
			if v, err := strconv.ParseFloat(q, 64); err == nil && v == 0 {
				return false
			}
		}
		return true
	}
	return false
}

// etagMatch reports whether If-None-Match names one of tags (or is *).
func etagMatch(header string, tags ...string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" {
			return true
		}
		for _, want := range tags {
			if t == want {
				return true
			}
		}
	}
	return false
}

// ServeHTTP answers GET and HEAD of the embedded files.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.once.Do(h.load)
	if h.err != nil {
		http.Error(w, "dashboard assets: "+h.err.Error(), http.StatusInternalServerError)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, r.Method+" is not allowed here", http.StatusMethodNotAllowed)
		return
	}
	name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
	if name == "" {
		name = "index.html"
	}
	a, ok := h.assets[name]
	if !ok {
		http.Error(w, "no such file: "+name, http.StatusNotFound)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", a.ctype)
	hd.Set("Cache-Control", a.cache)
	hd.Set("Vary", "Accept-Encoding")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	if name == "index.html" {
		hd.Set("Content-Security-Policy", contentSecurityPolicy)
		hd.Set("X-Frame-Options", "DENY")
	}
	body, tag := a.body, a.etag
	if a.gz != nil && acceptsGzip(r) {
		body, tag = a.gz, a.gzTag
		hd.Set("Content-Encoding", "gzip")
	}
	hd.Set("ETag", tag)
	if etagMatch(r.Header.Get("If-None-Match"), tag) {
		hd.Del("Content-Encoding")
		w.WriteHeader(http.StatusNotModified)
		return
	}
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
}
