package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"flag"
	"fmt"
	"github.com/sendonce/sendonce/internal/files"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/mcpserver"
	"github.com/sendonce/sendonce/service"
)

// mcpFlags are the delivery settings the server's deliveries share.
type mcpFlags struct {
	app, display, staging, providerConfig, replay, ocrLang string
	sentItemTimeout, displayWait                           time.Duration
}

// register adds the delivery settings' flags (mcp and serve share them).
func (f *mcpFlags) register(fs *flag.FlagSet, env *environment, providerUsage string) {
	fs.StringVar(&f.app, "app", "gajim", "the chat app's profile deliveries use unless a request names another")
	fs.StringVar(&f.display, "display", "", "the X display (default $DISPLAY)")
	fs.StringVar(&f.staging, "staging", "", "where snapshots of files are kept (default $SENDONCE_STAGING, else the state folder's staging/)")
	fs.StringVar(&env.evidenceDir, "evidence-dir", "", "where evidence bundles go (default: next to the store, in evidence/)")
	fs.DurationVar(&f.sentItemTimeout, "sent-item-timeout", 0, "how long to look for the sent item (default: the app profile's)")
	fs.DurationVar(&f.displayWait, "display-wait", 2*time.Minute, "how long a delivery waits for another on the same display")
	fs.StringVar(&f.providerConfig, "provider-config", "", providerUsage)
	fs.StringVar(&f.ocrLang, "ocr-lang", "", "the OCR `LANGUAGES` of every delivery, Tesseract's names joined by + (eng+chi_sim; default $SENDONCE_OCR_LANGS, else eng)")
	if testHooks {
		fs.StringVar(&f.replay, "replay", "", "testing: deliveries drive a recorded fixture `DIR` instead of the live desktop")
	}
}

// flagsDeliverer is the Deliverer the delivery flags choose: a replayed fixture (whose
// display is ":replay" unless named) or the live desktop.
func (env *environment) flagsDeliverer(c *sendonce.Client, f *mcpFlags) (*sendonce.Deliverer, func(), error) {
	if f.replay != "" && f.display == "" {
		f.display = ":replay"
	}
	return env.mcpDeliverer(c, f.replay, f.ocrLang)
}

// dirList is a repeatable --allow-dir.
type dirList []string

func (d *dirList) String() string     { return strings.Join(*d, ",") }
func (d *dirList) Set(s string) error { *d = append(*d, s); return nil }

// cmdMCP serves the tools over MCP: stdio by default, streamable HTTP on loopback with
// --http (a bearer token required).
func cmdMCP(ctx context.Context, env *environment, args []string) error {
	var f mcpFlags
	var allow dirList
	fs := env.flags("mcp", "[--http 127.0.0.1:PORT --token-file FILE] [--allow-dir DIR]... [--gate-tools] [--app gajim] [--display :0] [--staging DIR]")
	httpAddr := fs.String("http", "", "serve streamable HTTP on this loopback `ADDR` (127.0.0.1:PORT) instead of stdio")
	tokenFile := fs.String("token-file", "", "with --http: the `FILE` holding the bearer token clients must send (0600)")
	serviceAddr := fs.String("service", "", "be a client of a sendonce service at `ADDR` (unix:PATH, http://127.0.0.1:PORT, https://...): it holds the store and the desktop")
	serviceToken := fs.String("service-token-file", "", "with --service: the `FILE` holding this agent's service token (0600)")
	gateTools := fs.Bool("gate-tools", false, "also offer claim, check, cross, renew and record, for agents that drive an app themselves")
	fs.Var(&allow, "allow-dir", "a `DIR` whose files may be delivered, besides the client's roots (repeatable)")
	f.register(fs, env, "the provider account `FILE` for lookups after a send and for reconcile")
	if _, err := env.parse(fs, args, 0); err != nil {
		return err
	}
	var token string
	if *httpAddr != "" {
		var err error
		if token, err = readToken("--token-file", *tokenFile); err != nil {
			return err
		}
		if err := loopbackOnly(*httpAddr); err != nil {
			return err
		}
	}
	if *serviceAddr != "" {
		return env.mcpForService(ctx, *serviceAddr, *serviceToken, allow, *gateTools, *httpAddr, token)
	}
	env.longLived = true
	c, err := env.open(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	d, closeDesktop, err := env.flagsDeliverer(c, &f)
	if err != nil {
		return err
	}
	defer closeDesktop()
	srv := &mcpserver.Server{Client: c, Deliverer: d, AllowDirs: allow, GateTools: *gateTools, Version: sendonce.Version,
		Defaults: sendonce.DeliveryRequest{App: f.app, Display: f.display, Staging: f.staging, DisplayWait: f.displayWait,
			SentItemTimeout: f.sentItemTimeout, ProviderConfig: f.providerConfig}}
	if d != nil {
		if srv.Defaults.Display, srv.Defaults.Staging, err = env.displayAndStaging("mcp", f.display, f.staging); err != nil {
			return err
		}
	}
	if *httpAddr == "" {
		err := srv.New().Run(ctx, mcpserver.SilenceCancelledStdio(os.Stdin, os.Stdout))
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	return serveHTTP(ctx, env, srv.New(), *httpAddr, token)
}

// displayAndStaging completes a delivery's display ($DISPLAY) and staging folder
// ($SENDONCE_STAGING, else the state folder's staging/), as deliver and mcp take them.
// A server (serve, mcp) starts without a display: it says so, its gate, status,
// reconcile and evidence tools work, and each delivery is refused, before anything is
// claimed, for want of one.
func (env *environment) displayAndStaging(cmd, display, staging string) (string, string, error) {
	server := cmd == "serve" || cmd == "mcp"
	if display == "" {
		display = env.getenv("DISPLAY")
	}
	if display == "" && !server && cmd != "doctor" { // doctor reports it as its display check
		return "", "", usagef("%s: no display: set DISPLAY or give --display", cmd)
	}
	if display == "" && server {
		fmt.Fprintf(env.stderr, "sendonce %s: no display (DISPLAY is not set, no --display): deliveries will be refused; the gate, status, reconcile and evidence tools work\n", cmd)
	}
	if staging == "" {
		staging = env.getenv("SENDONCE_STAGING")
	}
	if staging == "" {
		staging = env.stateDir("staging")
	}
	if staging == "" {
		return "", "", usagef("%s: no staging folder: give --staging DIR or set SENDONCE_STAGING (HOME is not set for the default)", cmd)
	}
	return display, staging, nil
}

// mcpForService serves the MCP tools as a client of a sendonce service: the store, the
// staging folder and the desktop are the service's; files are read here, as the agent.
func (env *environment) mcpForService(ctx context.Context, addr, tokenFile string, allow dirList, gateTools bool, httpAddr, httpToken string) error {
	if gateTools {
		return usagef("mcp: --gate-tools drive an app from this process: with --service the service delivers (use its HTTP API for gate calls)")
	}
	secret, err := readToken("--service-token-file", tokenFile)
	if err != nil {
		return err
	}
	remote, err := service.Dial(addr, secret)
	if err != nil {
		return err
	}
	srv := &mcpserver.Server{Remote: remote, AllowDirs: allow, Version: sendonce.Version}
	if httpAddr == "" {
		err := srv.New().Run(ctx, mcpserver.SilenceCancelledStdio(os.Stdin, os.Stdout))
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	return serveHTTP(ctx, env, srv.New(), httpAddr, httpToken)
}

// readToken reads a bearer token from the file flag names: a private file, at least 32
// characters.
func readToken(flag, path string) (string, error) {
	if path == "" {
		return "", usagef("mcp: %s FILE is required: every request must carry its bearer token", flag)
	}
	// Checked as the store is, on the descriptor it is read from: a regular file of
	// this user's that no one else may read or change.
	b, err := files.ReadSecret(path, "the "+flag+" file", os.Getuid(), 4096)
	if err != nil {
		return "", usagef("mcp: %s: %v", flag, err)
	}
	token := strings.TrimSpace(string(b))
	if len(token) < 32 {
		return "", usagef("mcp: the token in %s is shorter than 32 characters", path)
	}
	return token, nil
}

// loopbackOnly refuses an address that is not on loopback: the service is for this
// machine's agents.
func loopbackOnly(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usagef("mcp: --http %q must be HOST:PORT", addr)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return usagef("mcp: --http %s is not a loopback address (127.0.0.1, ::1 or localhost)", addr)
	}
	return nil
}

// serveHTTP serves streamable HTTP: the bearer token is required, and a request whose
// Host is not the listener's is refused (the SDK's DNS-rebinding protection stays on
// as well), until ctx ends.
func serveHTTP(ctx context.Context, env *environment, srv *mcp.Server, addr, token string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return usagef("mcp: listening on %s: %v", addr, err)
	}
	h := mcpserver.SilenceCancelledHTTP(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	port := ln.Addr().(*net.TCPAddr).Port
	hosts := map[string]bool{fmt.Sprintf("127.0.0.1:%d", port): true, fmt.Sprintf("localhost:%d", port): true, fmt.Sprintf("[::1]:%d", port): true}
	guarded := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hosts[r.Host] {
			http.Error(w, "the Host header is not this server's", http.StatusForbidden)
			return
		}
		got, ok := service.BearerToken(r.Header)
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			w.Header().Set("WWW-Authenticate", service.Challenge(map[bool]string{true: "invalid_token"}[ok]))
			http.Error(w, "a bearer token is required", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
	hs := &http.Server{Handler: guarded, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
	}()
	fmt.Fprintf(env.stderr, "sendonce mcp: serving streamable HTTP on http://%s/\n", ln.Addr())
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
