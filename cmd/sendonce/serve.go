package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/internal/files"
	"github.com/sendonce/sendonce/service"
	"github.com/sendonce/sendonce/service/console"
)

// cmdServe runs the gate as an HTTP service (package service): on a unix socket or
// loopback by default, TLS for anything else. Run it as an OS user of its own: see the
// docs/service.md and contrib/sendonce.service.
func cmdServe(ctx context.Context, env *environment, args []string) error {
	var f mcpFlags
	fs := env.flags("serve", "[--listen unix:PATH|HOST:PORT] [--tls-cert FILE --tls-key FILE] [--tokens FILE] [--app gajim] [--display :0] [--staging DIR]")
	listen := fs.String("listen", "", "where to listen: unix:`PATH` or HOST:PORT (default unix:STATE/sendonce.sock)")
	tlsCert := fs.String("tls-cert", "", "the TLS certificate `FILE` (PEM), with --tls-key: needed to listen beyond loopback")
	tlsKey := fs.String("tls-key", "", "the TLS key `FILE` (PEM)")
	insecure := fs.Bool("insecure-listen", false, "listen on a non-loopback address without TLS (tokens then cross the network in the clear)")
	tokens := fs.String("tokens", "", "the agents' token `FILE` (default STATE/tokens.json; 'sendonce token create NAME' adds one)")
	retention := fs.Duration("idempotency-retention", service.DefaultRetention, "how long responses to an Idempotency-Key are kept")
	maxBody := fs.Int64("max-body", 0, "the largest request body, in bytes (default: room for the app profile's upload limit in base64)")
	readTimeout := fs.Duration("read-timeout", time.Minute, "how long a client may take to send a request")
	writeTimeout := fs.Duration("write-timeout", 2*time.Minute, "how long an answer may take to write")
	idleTimeout := fs.Duration("idle-timeout", 2*time.Minute, "how long an idle connection is kept")
	deliveryWait := fs.Duration("delivery-wait", 30*time.Second, "the longest a deliver request waits before it answers 202 with a Location to poll")
	drainTimeout := fs.Duration("drain-timeout", 10*time.Minute, "on SIGTERM, how long to wait for running deliveries to record their outcomes")
	reconcileEvery := fs.Duration("reconcile-interval", time.Hour, "how often the service asks its provider about unknown outcomes by itself, from its start (0: only when a person asks, in the console)")
	f.register(fs, env, "the provider account `FILE`: the service checks sent_verified with it, and reconciles")
	if _, err := env.parse(fs, args, 0); err != nil {
		return err
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		return usagef("serve: --tls-cert and --tls-key go together")
	}
	loc, err := env.storeLocation()
	if err != nil {
		return err
	}
	// The service's profiles come from its own folder (then the built-ins): never from a
	// request, nor from the folders of the user who started it.
	state := env.serviceDir(loc)
	env.profileDirs = []string{filepath.Join(state, "profiles")}
	profile, err := env.profiles().Load(f.app)
	if err != nil {
		return usagef("serve: --app: %v", err)
	}
	if *maxBody == 0 {
		*maxBody = profile.UploadLimitBytes/3*4 + 64<<10 // base64 of the largest upload, and the JSON around it
	}
	env.longLived = true
	c, err := env.open(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if *listen == "" {
		*listen = "unix:" + filepath.Join(state, "sendonce.sock")
	}
	if *tokens == "" {
		*tokens = filepath.Join(state, "tokens.json")
	}
	if _, err := os.Stat(*tokens); err != nil {
		return usagef("serve: no token file %s: make a token for each agent with 'sendonce token create NAME' first", *tokens)
	}
	// Checked as the store is (this user's alone, no link), before anything listens;
	// the service checks it again whenever it changes.
	if _, err := service.ListTokens(*tokens); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	guard, err := sameStore(ctx, c)
	if err != nil {
		return err
	}
	d, closeDesktop, err := env.flagsDeliverer(c, &f)
	if err != nil {
		return err
	}
	defer closeDesktop()
	cfg := service.Config{Client: c, Tokens: &service.Tokens{Path: *tokens}, Guard: guard, Retention: *retention, MaxBody: *maxBody, DeliveryWait: *deliveryWait,
		Defaults:   sendonce.DeliveryRequest{App: f.app, DisplayWait: f.displayWait, SentItemTimeout: f.sentItemTimeout, ProviderConfig: f.providerConfig},
		AfterCross: func() { env.killpoint("serve_cross") },
		AccessLog: func(e service.AccessEntry) {
			env.log.Info().Str("method", e.Method).Str("path", e.Path).Int("status", e.Status).Str("agent", e.Agent).
				Str("kind", e.Kind).Bool("replayed", e.Replayed).Dur("took", e.Duration).Msg("request")
		}}
	if d != nil {
		cfg.Deliver = d.Deliver
		if cfg.Defaults.Display, cfg.Defaults.Staging, err = env.displayAndStaging("serve", f.display, f.staging); err != nil {
			return err
		}
		cfg.ContentDir = filepath.Join(state, "uploads")
		if err := os.MkdirAll(cfg.ContentDir, 0o700); err != nil {
			return fmt.Errorf("%w: serve: %v", sendonce.ErrUnavailable, err)
		}
	}
	srv, err := service.New(cfg)
	if err != nil {
		return err
	}
	ws, err := c.Workstation(ctx)
	if err != nil {
		return err
	}
	con, err := console.New(console.Config{Client: c, People: consolePeople{cfg.Tokens}, Secure: *tlsCert != "", Guard: guard,
		ProviderConfig: f.providerConfig, Staging: cfg.Defaults.Staging, Workstation: ws.Workstation})
	if err != nil {
		return err
	}
	defer con.Close()
	// One listener: the API under /v1/, the console (for people) at every other path.
	mux := http.NewServeMux()
	mux.Handle("/v1/", srv)
	mux.Handle("/", guarded(guard, con))
	ln, where, err := listenFor(*listen, *tlsCert != "", *insecure)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: min(*readTimeout, 10*time.Second), ReadTimeout: *readTimeout,
		WriteTimeout: *writeTimeout, IdleTimeout: *idleTimeout, MaxHeaderBytes: 64 << 10}
	if *tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(*tlsCert, *tlsKey)
		if err != nil {
			ln.Close()
			return usagef("serve: --tls-cert/--tls-key: %v", err)
		}
		hs.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		ln = tls.NewListener(ln, hs.TLSConfig)
	}
	hs.RegisterOnShutdown(con.Close) // the console's live streams end; Shutdown waits for them otherwise
	go env.keepTidy(ctx, srv, cfg, *reconcileEvery)
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	fmt.Fprintf(env.stderr, "sendonce serve: listening on %s (store %s, tokens %s)\n", where, c.Store(), *tokens)
	select {
	case err := <-served:
		return fmt.Errorf("serve: %v", err)
	case <-ctx.Done():
	}
	// SIGTERM: stop accepting, answer the requests in progress, then let every running
	// delivery reach a recorded outcome (they never run on a request's context).
	fmt.Fprintf(env.stderr, "sendonce serve: stopping: no new requests; waiting for running deliveries\n")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), *drainTimeout)
	defer cancel()
	hs.Shutdown(sctx)
	if err := srv.Drain(sctx); err != nil {
		return fmt.Errorf("%w: serve: deliveries still running after --drain-timeout %v: their outcomes read send_status_unknown when their leases end", sendonce.ErrUnavailable, *drainTimeout)
	}
	fmt.Fprintf(env.stderr, "sendonce serve: stopped\n")
	return nil
}

// consolePeople tells the console who holds a token: an operator or an auditor; an
// agent's token is no one there.
type consolePeople struct{ tokens *service.Tokens }

func (p consolePeople) Person(tokenHash string) (string, console.Role, error) {
	h, err := p.tokens.HolderByHash(tokenHash)
	if err != nil {
		return "", "", err
	}
	switch h.Role {
	case service.RoleOperator:
		return h.Name, console.Operator, nil
	case service.RoleAuditor:
		return h.Name, console.Auditor, nil
	}
	return "", "", nil
}

// guarded asks the guard before each console request, as the API does: a store
// replaced under the running service fails closed.
func guarded(guard func(context.Context) error, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := guard(r.Context()); err != nil {
			http.Error(w, "the store cannot be trusted now: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// keepTidy forgets responses past the retention, hourly, and asks the provider about
// unknown outcomes (reconcile runs inside the service) at start and then every
// reconcileEvery (never when 0).
func (env *environment) keepTidy(ctx context.Context, srv *service.Server, cfg service.Config, reconcileEvery time.Duration) {
	var lastReconcile time.Time
	every := time.Hour
	if reconcileEvery > 0 {
		every = min(every, max(reconcileEvery, time.Minute))
	}
	for {
		if err := srv.Forget(ctx); err != nil && ctx.Err() == nil {
			env.log.Warn().Err(err).Msg("forgetting old Idempotency-Key responses")
		}
		if cfg.Defaults.ProviderConfig != "" && reconcileEvery > 0 && time.Since(lastReconcile) >= reconcileEvery {
			lastReconcile = time.Now()
			if _, err := cfg.Client.Reconcile(ctx, sendonce.ReconcileRequest{ProviderConfig: cfg.Defaults.ProviderConfig, Staging: cfg.Defaults.Staging}); err != nil && ctx.Err() == nil {
				env.log.Warn().Err(err).Msg("reconcile")
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// serviceDir is where the service keeps its socket, tokens and uploads: --state-dir,
// else the store's folder.
func (env *environment) serviceDir(loc string) string {
	if env.stateDirFlag != "" {
		return env.stateDirFlag
	}
	if d := env.getenv("SENDONCE_STATE_DIR"); d != "" {
		return d
	}
	if sendonce.SharedStore(loc) {
		return env.options().StateDir // a shared store has no folder here
	}
	return filepath.Dir(loc)
}

// sameStore is the guard asked before each request: the store file is the one the
// service opened (same device and inode) and its id is the one read at start. A store
// replaced under a running service (re-initialized, restored, swapped) fails closed.
func sameStore(ctx context.Context, c *sendonce.Client) (func(context.Context) error, error) {
	id, err := c.StoreID(ctx)
	if err != nil {
		return nil, err
	}
	shared := sendonce.SharedStore(c.Store())
	var first os.FileInfo
	if !shared {
		if first, err = os.Stat(c.Store()); err != nil {
			return nil, fmt.Errorf("%w: %v", sendonce.ErrUnavailable, err)
		}
	}
	return func(ctx context.Context) error {
		if !shared { // a shared store has no file here: its id says whether it is the same
			now, err := os.Stat(c.Store())
			if err != nil || !os.SameFile(first, now) {
				return fmt.Errorf("%w: the store file %s is no longer the one this service opened (replaced or removed): restart the service after checking why", sendonce.ErrUnavailable, c.Store())
			}
		}
		got, err := c.StoreID(ctx)
		if err != nil {
			return err
		}
		if got != id {
			return fmt.Errorf("%w: the store's id changed from %s to %s under the running service", sendonce.ErrUnavailable, id, got)
		}
		return nil
	}, nil
}

// listenFor opens the listener: a unix socket (any user may connect; the token is the
// credential), or TCP on loopback, or beyond loopback only with TLS or --insecure-listen.
func listenFor(addr string, tlsOn, insecure bool) (net.Listener, string, error) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		if !filepath.IsAbs(path) {
			return nil, "", usagef("serve: --listen unix:%s: the socket's path must be absolute", path)
		}
		// The socket's folder is made when missing (0755: agents of other users connect;
		// the token is the credential), and used only if no other user can change it: else
		// another user could put a socket of their own in its place and collect tokens.
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, "", usagef("serve: cannot make the socket's folder: %v: give --listen unix:PATH in a folder of the service's user, or make the folder for it (systemd: RuntimeDirectory=sendonce)", err)
		}
		dir, err := files.CheckPrivateDir(filepath.Dir(path), os.Getuid())
		if err != nil {
			return nil, "", usagef("serve: --listen %s: the socket's folder is refused: %v (use a folder only the service's user can change)", addr, err)
		}
		path = filepath.Join(dir, filepath.Base(path))
		if fi, err := os.Lstat(path); err == nil {
			if fi.Mode()&os.ModeSocket == 0 {
				return nil, "", usagef("serve: --listen %s exists and is not a socket", path)
			}
			if conn, err := net.Dial("unix", path); err == nil {
				conn.Close()
				return nil, "", usagef("serve: another service answers on %s", path)
			}
			os.Remove(path) // a stale socket of a service that died
		}
		ln, err := net.Listen("unix", path)
		if err != nil {
			return nil, "", usagef("serve: --listen %s: %v", addr, err)
		}
		if err := os.Chmod(path, 0o666); err != nil {
			ln.Close()
			return nil, "", err
		}
		return ln, addr, nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, "", usagef("serve: --listen %q is neither unix:PATH nor HOST:PORT", addr)
	}
	ip := net.ParseIP(host)
	loopback := host == "localhost" || (ip != nil && ip.IsLoopback())
	if !loopback && !tlsOn && !insecure {
		return nil, "", usagef("serve: --listen %s is not a loopback address: give --tls-cert and --tls-key (or --insecure-listen, and tokens cross the network in the clear)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", usagef("serve: --listen %s: %v", addr, err)
	}
	scheme := "http"
	if tlsOn {
		scheme = "https"
	}
	return ln, scheme + "://" + ln.Addr().String(), nil
}

// The agents' bearer tokens: made, revoked and listed in the service's token file.
func cmdTokenCreate(ctx context.Context, env *environment, args []string) error {
	var role string
	flags := func(fs *flag.FlagSet) {
		fs.StringVar(&role, "role", string(service.RoleAgent), "what the token opens: `agent` (the API), operator (the console, acting) or auditor (the console, read-only)")
	}
	return env.tokenCommand(ctx, "token create", args, 1, flags, func(file string, rest []string) (result, error) {
		res, err := service.CreateToken(file, rest[0], service.Role(role), time.Now())
		return tokenResult(res), err
	})
}

func cmdTokenRevoke(ctx context.Context, env *environment, args []string) error {
	return env.tokenCommand(ctx, "token revoke", args, 1, nil, func(file string, rest []string) (result, error) {
		res, err := service.RevokeToken(file, rest[0], time.Now())
		return tokenResult(res), err
	})
}

func cmdTokenList(ctx context.Context, env *environment, args []string) error {
	return env.tokenCommand(ctx, "token list", args, 0, nil, func(file string, _ []string) (result, error) {
		res, err := service.ListTokens(file)
		return tokenList(res), err
	})
}

func (env *environment) tokenCommand(ctx context.Context, name string, args []string, positional int, flags func(*flag.FlagSet), op func(string, []string) (result, error)) error {
	usage := "[--tokens FILE] NAME"
	switch {
	case positional == 0:
		usage = "[--tokens FILE]"
	case flags != nil:
		usage = "[--tokens FILE] [--role agent|operator|auditor] NAME"
	}
	fs := env.flags(name, usage)
	tokens := fs.String("tokens", "", "the token `FILE` (default STATE/tokens.json, as serve uses it)")
	if flags != nil {
		flags(fs)
	}
	rest, err := env.parse(fs, args, positional)
	if err != nil {
		return err
	}
	if *tokens == "" {
		c, err := env.open(ctx)
		if err != nil {
			return err
		}
		*tokens = filepath.Join(env.serviceDir(c.Store()), "tokens.json")
		c.Close()
	}
	res, err := op(*tokens, rest)
	if err != nil {
		return err
	}
	env.print(res)
	return nil
}

type tokenResult service.TokenResult

func (r tokenResult) MarshalJSON() ([]byte, error) { return json.Marshal(service.TokenResult(r)) }
func (r tokenResult) WriteText(w io.Writer) {
	switch {
	case r.Token != "":
		fmt.Fprintf(w, "%s token for %s (shown once; only its hash is kept in %s):\n%s\n", r.Role, r.Name, r.Tokens, r.Token)
	case r.Revoked:
		fmt.Fprintf(w, "revoked the token of %s (%s)\n", r.Name, r.Tokens)
	}
}

type tokenList service.TokenList

func (r tokenList) MarshalJSON() ([]byte, error) { return json.Marshal(service.TokenList(r)) }
func (r tokenList) WriteText(w io.Writer) {
	for _, t := range r.Tokens {
		state := "live"
		if !t.RevokedAt.IsZero() {
			state = "revoked " + t.RevokedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%-24s %-8s made %s  %s\n", t.Name, t.Role, t.CreatedAt.UTC().Format(time.RFC3339), state)
	}
}
