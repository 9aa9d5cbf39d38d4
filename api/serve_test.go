package api_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/api"
)

func serveInBackground(t *testing.T, f *fixture, o api.ServeOptions) (string, context.CancelFunc, chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	o.Addr = "127.0.0.1:0"
	o.Ready = func(a net.Addr) { addr <- a.String() }
	done := make(chan error, 1)
	go func() { done <- f.srv.Serve(ctx, o) }()
	select {
	case a := <-addr:
		return a, cancel, done
	case err := <-done:
		t.Fatal(err)
	}
	return "", cancel, done
}

// On shutdown the server stops accepting and lets in-flight requests finish.
func TestServeDrainsInFlightRequests(t *testing.T) {
	f := newFixture(t)
	f.srv.MarkServing(false)
	f.usage.block, f.usage.began = make(chan struct{}), make(chan struct{})
	addr, cancel, done := serveInBackground(t, f, api.ServeOptions{ShutdownTimeout: 10 * time.Second})
	type result struct {
		status int
		err    error
	}
	res := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest("GET", "http://"+addr+"/api/v1/held", nil)
		req.Header.Set("Authorization", "Bearer "+f.tokens["admin"])
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			res <- result{0, err}
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
		res <- result{r.StatusCode, nil}
	}()
	<-f.usage.began
	cancel() // SIGTERM
	time.Sleep(100 * time.Millisecond)
	_, err := net.DialTimeout("tcp", addr, time.Second)
	require.Error(t, err, "no new connections while draining")
	close(f.usage.block)
	r := <-res
	require.NoError(t, r.err)
	require.Equal(t, 200, r.status, "the in-flight request finished")
	require.NoError(t, <-done)
}

// With a certificate and key the server speaks TLS.
func TestServeTLS(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kb, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certPath, keyPath := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	require.NoError(t, os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))

	addr, cancel, done := serveInBackground(t, f, api.ServeOptions{TLSCert: certPath, TLSKey: keyPath})
	pool := x509.NewCertPool()
	cert, _ := x509.ParseCertificate(der)
	pool.AddCert(cert)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer client.CloseIdleConnections() // goleak: its keep-alive connection ends with the test
	r, err := client.Get("https://" + addr + "/healthz")
	require.NoError(t, err)
	_ = r.Body.Close()
	require.Equal(t, 200, r.StatusCode)
	if r, err := http.Get("http://" + addr + "/healthz"); err == nil {
		// a plain request to a TLS port gets a 400 from the server, never a page
		_ = r.Body.Close()
		require.Equal(t, 400, r.StatusCode)
	}
	cancel()
	require.NoError(t, <-done)
}

// A body without a length that grows past the limit is refused with 413.
func TestStreamedBodyOverTheLimit(t *testing.T) {
	f := newFixture(t)
	pr, pw := io.Pipe()
	go func() {
		chunk := make([]byte, 64<<10)
		for i := range chunk {
			chunk[i] = '#'
		}
		for range 40 {
			if _, err := pw.Write(chunk); err != nil {
				return
			}
		}
		_ = pw.Close()
	}()
	addr, cancel, done := serveInBackground(t, f, api.ServeOptions{})
	req, _ := http.NewRequest("PUT", "http://"+addr+"/api/v1/catalog", pr)
	req.Header.Set("Authorization", "Bearer "+f.tokens["admin"])
	req.Header.Set("Content-Type", "application/yaml")
	r, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(r.Body)
	_ = r.Body.Close()
	require.Equal(t, 413, r.StatusCode, string(b))
	require.Contains(t, string(b), "https://cardhour.dev/problems/too-large")
	cancel()
	require.NoError(t, <-done)
}
