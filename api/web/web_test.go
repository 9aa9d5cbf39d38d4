package web

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The vendored files are the ones whose SHA-256 SHA256SUMS records (taken
// from the npm registry's package; see VENDOR.md), and every vendored
// script is listed there.
func TestVendoredChecksums(t *testing.T) {
	f, err := os.Open("SHA256SUMS")
	require.NoError(t, err)
	defer f.Close() //nolint:errcheck // read only
	listed := map[string]bool{}
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		require.True(t, ok, "SHA256SUMS line %d: want '<sha256>  <path>'", line)
		b, err := fs.ReadFile(static, name)
		require.NoError(t, err, "SHA256SUMS line %d: %s is not embedded", line, name)
		got := sha256.Sum256(b)
		require.Equal(t, sum, hex.EncodeToString(got[:]), "SHA256SUMS line %d: %s changed", line, name)
		listed[name] = true
	}
	require.NoError(t, sc.Err())
	vendored, err := fs.Glob(static, "static/vendor/*.js")
	require.NoError(t, err)
	require.NotEmpty(t, vendored)
	for _, v := range vendored {
		require.True(t, listed[v], "%s has no line in SHA256SUMS", v)
	}
	for _, lic := range []string{"static/vendor/ECHARTS-LICENSE", "static/vendor/ECHARTS-NOTICE"} {
		_, err := fs.Stat(static, lic)
		require.NoError(t, err, "the vendored library's licence ships with it")
	}
}

func get(t *testing.T, h http.Handler, target string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, target, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestServesCompressedWithETags(t *testing.T) {
	h := New()
	w := get(t, h, "/")
	require.Equal(t, 200, w.Code)
	require.Equal(t, "text/html; charset=utf-8", w.Header().Get("Content-Type"))
	require.Empty(t, w.Header().Get("Content-Encoding"), "no Accept-Encoding: identity")
	require.Contains(t, w.Body.String(), `<script type="module" src="app.js">`)
	require.Contains(t, w.Header().Get("Content-Security-Policy"), "script-src 'self'")
	require.Equal(t, "no-cache", w.Header().Get("Cache-Control"))
	plainTag := w.Header().Get("ETag")
	require.Regexp(t, `^"[0-9a-f]{24}"$`, plainTag)

	w = get(t, h, "/vendor/echarts-5.6.0.min.js", "Accept-Encoding", "br;q=1.0, gzip;q=0.8")
	require.Equal(t, 200, w.Code)
	require.Equal(t, "gzip", w.Header().Get("Content-Encoding"))
	require.Equal(t, "text/javascript; charset=utf-8", w.Header().Get("Content-Type"))
	require.Contains(t, w.Header().Get("Cache-Control"), "immutable", "a versioned file name")
	require.Equal(t, "Accept-Encoding", w.Header().Get("Vary"))
	zr, err := gzip.NewReader(bytes.NewReader(w.Body.Bytes()))
	require.NoError(t, err)
	plain, err := io.ReadAll(zr)
	require.NoError(t, err)
	want, err := fs.ReadFile(static, "static/vendor/echarts-5.6.0.min.js")
	require.NoError(t, err)
	require.Equal(t, want, plain)
	require.Less(t, w.Body.Len(), len(want)/2)
	gzTag := w.Header().Get("ETag")

	w = get(t, h, "/vendor/echarts-5.6.0.min.js", "Accept-Encoding", "gzip", "If-None-Match", gzTag)
	require.Equal(t, http.StatusNotModified, w.Code)
	require.Zero(t, w.Body.Len())
	w = get(t, h, "/vendor/echarts-5.6.0.min.js", "Accept-Encoding", "gzip;q=0", "If-None-Match", gzTag)
	require.Equal(t, 200, w.Code, "the gzip tag does not validate the identity body")
	require.Empty(t, w.Header().Get("Content-Encoding"))

	w = get(t, h, "/app.js", "Accept-Encoding", "gzip")
	require.Equal(t, "no-cache", w.Header().Get("Cache-Control"))
	w = get(t, h, "/nope.js")
	require.Equal(t, 404, w.Code)
	w = get(t, h, "/../../web.go")
	require.Equal(t, 404, w.Code)

	r := httptest.NewRequest(http.MethodPost, "/", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	r = httptest.NewRequest(http.MethodHead, "/app.js", nil)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	require.Equal(t, 200, rec.Code)
	require.Zero(t, rec.Body.Len())
	require.NotEmpty(t, rec.Header().Get("Content-Length"))
}

// Everything a first load can fetch, compressed, stays under 2 MB.
func TestFirstLoadBudget(t *testing.T) {
	h := New()
	total := 0
	require.NoError(t, fs.WalkDir(Files(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !regexp.MustCompile(`\.(html|js|css)$`).MatchString(name) {
			return err
		}
		w := get(t, h, "/"+name, "Accept-Encoding", "gzip")
		require.Equal(t, 200, w.Code, name)
		total += w.Body.Len()
		return nil
	}))
	t.Logf("all HTML, JS and CSS, gzip: %d bytes", total)
	require.Less(t, total, 2<<20)
}

var importRE = regexp.MustCompile(`(?m)^import .* from '(\./[^']+)';$|\bimport\('(\./[^']+)'\)`)

// Every module import, static or dynamic (a page loaded when first
// opened), names an embedded file.
func TestModuleImportsResolve(t *testing.T) {
	mods, err := fs.Glob(Files(), "*.js")
	require.NoError(t, err)
	require.Contains(t, mods, "app.js")
	for _, m := range mods {
		b, err := fs.ReadFile(Files(), m)
		require.NoError(t, err)
		for _, im := range importRE.FindAllStringSubmatch(string(b), -1) {
			name := im[1] + im[2]
			_, err := fs.Stat(Files(), path.Clean(name))
			require.NoError(t, err, "%s imports %s", m, name)
		}
	}
}

// The zh-CN texts have every key of the English ones (a missing key would
// show English in the middle of a Chinese page) and no key English lacks.
func TestTranslationsComplete(t *testing.T) {
	b, err := fs.ReadFile(Files(), "i18n.js")
	require.NoError(t, err)
	src := string(b)
	keys := func(name string) []string {
		start := strings.Index(src, "const "+name+" = {")
		require.GreaterOrEqual(t, start, 0, name)
		end := strings.Index(src[start:], "\n};")
		require.Greater(t, end, 0)
		var out []string
		for _, m := range regexp.MustCompile(`(?m)^\s+'?([\w.]+)'?:`).FindAllStringSubmatch(src[start:start+end], -1) {
			out = append(out, m[1])
		}
		slices.Sort(out)
		return out
	}
	en, zh := keys("en"), keys("zh")
	require.Greater(t, len(en), 50)
	var missing, extra []string
	for _, k := range en {
		if !slices.Contains(zh, k) {
			missing = append(missing, k)
		}
	}
	for _, k := range zh {
		if !slices.Contains(en, k) {
			extra = append(extra, k)
		}
	}
	require.Empty(t, missing, "keys without a zh-CN text")
	require.Empty(t, extra, "zh-CN keys English lacks")
}
