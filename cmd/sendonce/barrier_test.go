//go:build cgo

package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sendonce/sendonce/service"
)

// The barrier: 'sendonce serve' runs as a user of its own, which alone can read and
// write the store, the staging folder, the sealing key and the provider account, and
// which holds the display's cookie (with the chat app's user). An agent of another uid
// delivers through the service, and cannot go around it.

const (
	serviceUID = 64111 // runs sendonce serve
	agentUID   = 64112 // the agent
)

// asAgent runs a command as the agent's uid, with a home of its own and no cookie.
func asAgent(t *testing.T, home string, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin", "LANG=C.UTF-8"}
	cmd.Dir = home
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: agentUID, Gid: agentUID}}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func TestLiveServiceBarrier(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("the barrier test switches uids and must run as root (CI does)")
	}
	bed := liveTestBed(t)
	l := newLive(t)
	gajim, err := user.Lookup(bed.get(t, "GAJIM_USER"))
	if err != nil {
		t.Fatal(err)
	}
	gajimGID, _ := strconv.Atoi(gajim.Gid)

	root := userRoot(t)
	svc := newAsUser(t, root, serviceUID) // copies this test binary where both users can run it
	agentHome := filepath.Join(root, "agent")
	mkdirOwned(t, agentHome, agentUID, 0o700)
	state := filepath.Join(root, "service")
	mkdirOwned(t, state, serviceUID, 0o700)
	run := filepath.Join(root, "run")
	mkdirOwned(t, run, serviceUID, 0o755)
	staging := filepath.Join(root, "staging")
	mkdirOwned(t, staging, serviceUID, 0o750)
	if err := os.Chown(staging, serviceUID, gajimGID); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(state, "sendonce.db")
	socket := filepath.Join(run, "sendonce.sock")

	// The service user's own copies: the display's cookie and the provider account.
	own := func(src, dst string) {
		t.Helper()
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dst, serviceUID, serviceUID); err != nil {
			t.Fatal(err)
		}
	}
	cookie := filepath.Join(state, "Xauthority")
	own(bed.get(t, "XAUTHORITY"), cookie)
	provider := filepath.Join(state, "provider.json")
	own(l.providerConfig(), provider)

	svcEnv := []string{"SENDONCE_AS_CLI=1", "HOME=" + svc.home, "PATH=/usr/bin:/bin", "OMP_THREAD_LIMIT=1", "LANG=C.UTF-8",
		"DISPLAY=" + bed.display(t), "XAUTHORITY=" + cookie}
	svcCred := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: serviceUID, Gid: serviceUID, Groups: []uint32{uint32(gajimGID)}}}
	initCmd := exec.Command(svc.bin, "--store", store, "init")
	initCmd.Env, initCmd.SysProcAttr = svcEnv, svcCred
	if out, err := initCmd.CombinedOutput(); err != nil {
		t.Fatalf("init as the service user: %v\n%s", err, out)
	}
	tokens := filepath.Join(state, "tokens.json")
	tok, err := service.CreateToken(tokens, "agent-a", service.RoleAgent, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	os.Chown(tokens, serviceUID, serviceUID)

	serve := exec.Command(svc.bin, "--store", store, "serve", "--listen", "unix:"+socket, "--tokens", tokens,
		"--staging", staging, "--provider-config", provider, "--display", bed.display(t))
	serve.Env, serve.SysProcAttr = svcEnv, svcCred
	var serveLog bytes.Buffer
	serve.Stdout, serve.Stderr = &serveLog, &serveLog
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		serve.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- serve.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			serve.Process.Kill()
		}
		if t.Failed() {
			t.Logf("the service's log:\n%s", tail(serveLog.String(), 40))
		}
	})

	// The agent speaks HTTP over the socket with curl, as any language would.
	curl := func(method, path, idem string, body any) (int, map[string]any) {
		t.Helper()
		args := []string{"-s", "-o", "-", "-w", "\n%{http_code}", "--max-time", "120", "--unix-socket", socket,
			"-H", "Authorization: Bearer " + tok.Token, "-X", method}
		if idem != "" {
			args = append(args, "-H", "Idempotency-Key: "+idem)
		}
		if body != nil {
			b, _ := json.Marshal(body)
			args = append(args, "-H", "Content-Type: application/json", "--data-binary", string(b))
		}
		out, err := asAgent(t, agentHome, "curl", append(args, "http://sendonce"+path)...)
		if err != nil && strings.HasSuffix(out, "\n000") {
			return 0, nil // nothing answered (yet)
		}
		if err != nil {
			t.Fatalf("curl %s %s as the agent: %v\n%s", method, path, err, out)
		}
		i := strings.LastIndexByte(out, '\n')
		code, _ := strconv.Atoi(out[i+1:])
		var m map[string]any
		json.Unmarshal([]byte(out[:i]), &m)
		return code, m
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if code, _ := curl("GET", "/v1/healthz", "", nil); code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the service did not come up:\n%s", serveLog.String())
		}
		time.Sleep(200 * time.Millisecond)
	}

	// What the agent cannot do on its own.
	denied := map[string][]string{
		"connect to the display":            {"xdpyinfo", "-display", bed.display(t)},
		"use the service's cookie":          {"env", "XAUTHORITY=" + cookie, "xdpyinfo", "-display", bed.display(t)},
		"read the store":                    {"head", "-c", "16", store},
		"write the store":                   {"sh", "-c", "echo x >> " + store},
		"make a store beside the service's": {"touch", filepath.Join(state, "other.db")},
		"list the staging folder":           {"ls", staging},
		"read the sealing key":              {"head", "-c", "16", filepath.Join(state, "workstation.key")},
		"read the provider password":        {"head", "-c", "16", provider},
		"read the token file":               {"head", "-c", "16", tokens},
		"replace the socket":                {"rm", "-f", socket},
	}
	for what, argv := range denied {
		out, err := asAgent(t, agentHome, argv[0], argv[1:]...)
		if err == nil {
			t.Errorf("the agent could %s: %s", what, out)
		} else if !strings.Contains(out, "ermission denied") && !strings.Contains(out, "unable to open display") {
			t.Errorf("the agent failed to %s for another reason than a refusal: %v %s", what, err, out)
		}
	}
	if _, err := os.Stat(filepath.Join(state, "workstation.key")); err != nil {
		t.Fatalf("the sealing key is not where the test looks: %v", err)
	}

	// It cannot name a path for the service to read.
	if code, m := curl("POST", "/v1/deliveries", "path-1", map[string]any{"to": "Bob", "file_name": "shadow", "content": "aGk=", "file": "/etc/shadow"}); code != 400 || m["kind"] != "bad_input" || !strings.Contains(fmt.Sprint(m["detail"]), `unknown field "file"`) {
		t.Fatalf("a delivery naming a path: %d %v; want 400 naming the unknown field", code, m)
	}
	// It delivers through the service: the bytes in the request.
	path, sum := l.file("barrier.txt")
	content, _ := os.ReadFile(path)
	body := map[string]any{"to": "Bob", "dest_id": "xmpp:bob@localhost", "file_name": "barrier.txt", "content": base64.StdEncoding.EncodeToString(content), "task": "one"}
	code, res := curl("POST", "/v1/deliveries", "deliver-1", body)
	for code == 202 {
		time.Sleep(time.Second)
		code, res = curl("GET", res["location"].(string), "", nil)
	}
	if code != 200 || res["outcome"] != "sent_verified" {
		t.Fatalf("the delivery through the service: %d %v\nservice log:\n%s", code, res, tail(serveLog.String(), 30))
	}
	l.wantExactlyOneCopyEach(l.start, sum)
	// No second grant, by any request.
	for i, try := range []struct {
		path string
		body any
	}{
		{"/v1/deliveries", with(body, "task", "two")},
		{"/v1/deliveries", with(body, "dest_id", "")}, // the weak title alone reaches the same intent
		{"/v1/claim", map[string]any{"to": "Bob", "dest_id": "xmpp:bob@localhost", "content": body["content"], "task": "three"}},
		{"/v1/claim", map[string]any{"to": "Bob", "sha256": sum, "task": "four"}},
	} {
		code, m := curl("POST", try.path, fmt.Sprintf("again-%d", i), try.body)
		if code != 409 || m["kind"] != "consumed" {
			t.Errorf("request %d for the delivered file (%s): %d %v; want 409 consumed", i, try.path, code, m)
		}
	}
	l.wantExactlyOneCopyEach(l.start, sum)
}
