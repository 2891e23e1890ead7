package mcpserver

import (
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/internal/files"
)

// A path an agent names is judged by its name first, and touched only when it names a
// place under a folder the server allows or one of the client's MCP roots, so a
// refusal never tells whether a file outside them exists. It is then opened once,
// beneath that folder, one name at a time from the open folder with no link followed
// (internal/files.Dir: openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS on Linux): whoever
// can write in the folder cannot swap a name for a link between a check and an open
// and have a file outside read. The one open file is what is hashed, staged and sent.
// The folder, and every folder on the way to the file, must be one only this user can
// change (as the staging folder must be): a folder another user can write lets them put
// their own file under the name the agent gives.

// openPath opens the regular file an absolute path names under a folder the server
// allows or one of the client's roots; the caller closes it. Anything else is bad input,
// refused before anything is claimed. When the path is not under an allowed folder and
// the client declared roots but was not asked yet, it returns the result that asks the
// client for them (a multi-round-trip input request): the handler returns it, and the
// call comes back with the answer. A client that did not declare roots is never asked.
func (s *Server) openPath(req *mcp.CallToolRequest, p string) (*os.File, *mcp.CallToolResult, error) {
	d, rel, ask, err := s.beneath(req, "file", p, nil)
	if d == nil {
		return nil, ask, err
	}
	defer d.Close()
	if rel == "" {
		return nil, nil, sendonce.FieldErrorf("file", "%s is a folder; name a file", p)
	}
	f, err := d.Open(rel)
	if err != nil {
		return nil, nil, openError("file", p, err)
	}
	return f, nil, nil
}

// fileOrAnswer is openPath for a tool handler: the open file (the caller closes it),
// or the result to answer with instead (the request for the client's roots, or a
// bad_input tool error).
func (s *Server) fileOrAnswer(req *mcp.CallToolRequest, p string) (*os.File, *mcp.CallToolResult) {
	f, ask, err := s.openPath(req, p)
	if err != nil {
		return nil, toolError(err)
	}
	return f, ask
}

// beneath judges p by its name and opens the allowed folder (extra ones included) it
// is under: the folder, and p relative to it ("" for the folder itself).
func (s *Server) beneath(req *mcp.CallToolRequest, field, p string, extra []string) (*files.Dir, string, *mcp.CallToolResult, error) {
	bad := func(format string, args ...any) (*files.Dir, string, *mcp.CallToolResult, error) {
		return nil, "", nil, sendonce.FieldErrorf(field, format, args...)
	}
	if p == "" || !filepath.IsAbs(p) {
		return bad("%q must be an absolute path", p)
	}
	for _, n := range strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == filepath.Separator }) {
		if n == "." || n == ".." {
			return bad("%s: give the path without . or .. (each name is opened as it is, under the allowed folder)", p)
		}
	}
	name := filepath.Clean(p)
	allowed := append(folders(s.AllowDirs), folders(extra)...)
	if !under(name, allowed) {
		roots, asked := clientRoots(req)
		if !asked && declaresRoots(req) {
			return nil, "", &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{rootsRequest: &mcp.ListRootsParams{}}, RequestState: rootsRequest}, nil
		}
		allowed = append(allowed, folders(roots)...)
	}
	dir := longest(name, allowed)
	if dir == "" {
		if len(allowed) == 0 {
			return bad("%s is outside every allowed folder: the client gave no roots and the server allows no folder (sendonce mcp --allow-dir DIR)", p)
		}
		return bad("%s is outside the client's roots and the allowed folders (%s)", p, strings.Join(allowed, ", "))
	}
	d, err := files.OpenPrivateDir(dir, os.Getuid())
	if err != nil {
		return bad("the folder %s is refused: %v. An allowed folder must be one only you can change (chmod go-w %s); every folder above it too", dir, err, dir)
	}
	rel, _ := filepath.Rel(dir, name)
	if rel == "." {
		rel = ""
	}
	return d, rel, nil, nil
}

// openError is a refusal of a name beneath an allowed folder, as bad input: it may say
// what is there, since nothing outside the folder was touched.
func openError(field, p string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return sendonce.FieldErrorf(field, "%s: no such file", p)
	case errors.Is(err, files.ErrUnsafe):
		return sendonce.FieldErrorf(field, "%s is refused: %v", p, strings.TrimPrefix(err.Error(), files.ErrUnsafe.Error()+": "))
	}
	return sendonce.FieldErrorf(field, "cannot read %s: %v", p, errors.Unwrap(err))
}

// declaresRoots says whether the client said, when it connected, that it has roots to
// give (the roots capability). Asking one that did not is a protocol error for it.
func declaresRoots(req *mcp.CallToolRequest) bool {
	if req == nil || req.Session == nil {
		return false
	}
	p := req.Session.InitializeParams()
	return p != nil && p.Capabilities != nil && p.Capabilities.RootsV2 != nil
}

const rootsRequest = "roots"

// clientRoots is the client's answer to the roots request, when the call carries one:
// the folders of its file: roots. Only a client that declared roots, answering the
// request (its state echoed), gives any: roots sent unasked count for nothing.
func clientRoots(req *mcp.CallToolRequest) ([]string, bool) {
	if !declaresRoots(req) || req.Params == nil || req.Params.InputResponses == nil || req.Params.RequestState != rootsRequest {
		return nil, false
	}
	r, ok := req.Params.InputResponses[rootsRequest].(*mcp.ListRootsResult)
	if !ok || r == nil {
		return nil, true // asked; the client has no roots to give
	}
	var dirs []string
	for _, root := range r.Roots {
		u, err := url.Parse(root.URI)
		if err == nil && u.Scheme == "file" && filepath.IsAbs(u.Path) {
			dirs = append(dirs, u.Path)
		}
	}
	return dirs, true
}

// folders are the folders as given (cleaned) and with their links resolved: a path
// is judged by its name against either.
func folders(dirs []string) []string {
	var out []string
	for _, d := range dirs {
		if !filepath.IsAbs(d) {
			continue
		}
		out = append(out, filepath.Clean(d))
		if r, err := filepath.EvalSymlinks(d); err == nil && r != filepath.Clean(d) {
			out = append(out, r)
		}
	}
	return out
}

// longest is the deepest of dirs that p is under ("" when none): the file is opened
// from it, so every folder between it and the file is checked on the way.
func longest(p string, dirs []string) string {
	best := ""
	for _, dir := range dirs {
		if under(p, []string{dir}) && len(dir) > len(best) {
			best = dir
		}
	}
	return best
}

func under(p string, dirs []string) bool {
	for _, dir := range dirs {
		rel, err := filepath.Rel(dir, p)
		if err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel) {
			return true
		}
	}
	return false
}
