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
)

// checkPath accepts an absolute path to a regular file under a folder the server allows
// or one of the client's MCP roots, and returns it with links resolved. Anything else
// is bad input, refused before anything is claimed. The path is judged by its name
// first and touched only when it names a place under those folders, so a refusal never
// tells whether a file outside them exists; then by where its links lead. When the path
// is not under an allowed folder and the client declared roots but was not asked yet,
// it returns the result that asks the client for them (a multi-round-trip input
// request): the handler returns it, and the call comes back with the answer. A client
// that did not declare roots is never asked.
func (s *Server) checkPath(req *mcp.CallToolRequest, p string) (string, *mcp.CallToolResult, error) {
	bad := func(format string, args ...any) (string, *mcp.CallToolResult, error) {
		return "", nil, sendonce.FieldErrorf("file", format, args...)
	}
	if p == "" || !filepath.IsAbs(p) {
		return bad("%q must be an absolute path", p)
	}
	name := filepath.Clean(p) // judged by name; p itself is resolved as the kernel would
	allowed := folders(s.AllowDirs)
	if !under(name, allowed) {
		roots, asked := clientRoots(req)
		if !asked && declaresRoots(req) {
			return "", &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{rootsRequest: &mcp.ListRootsParams{}}, RequestState: rootsRequest}, nil
		}
		allowed = append(allowed, folders(roots)...)
	}
	if !under(name, allowed) {
		if len(allowed) == 0 {
			return bad("%s is outside every allowed folder: the client gave no roots and the server allows no folder (sendonce mcp --allow-dir DIR)", p)
		}
		return bad("%s is outside the client's roots and the allowed folders (%s)", p, strings.Join(allowed, ", "))
	}
	// Where it leads is not told: a link may point at what the folders keep out.
	real, err := filepath.EvalSymlinks(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return bad("%s: no such file (or a link on the way leads nowhere)", p)
	case err != nil:
		return bad("cannot read %s", p)
	case !under(real, allowed):
		return bad("%s leads outside the client's roots and the allowed folders (%s)", p, strings.Join(allowed, ", "))
	}
	fi, err := os.Stat(real)
	switch {
	case err != nil:
		return bad("cannot read %s: %v", p, err)
	case fi.IsDir():
		return bad("%s is a folder; name a file", p)
	case !fi.Mode().IsRegular():
		return bad("%s is not a regular file", p)
	}
	return real, nil, nil
}

// pathOrAnswer is checkPath for a tool handler: the path, or the result to answer
// with instead (the request for the client's roots, or a bad_input tool error).
func (s *Server) pathOrAnswer(req *mcp.CallToolRequest, p string) (string, *mcp.CallToolResult) {
	path, ask, err := s.checkPath(req, p)
	if err != nil {
		return "", toolError(err)
	}
	return path, ask
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
// is judged by its name against the first, and by where it leads against the second.
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

func under(p string, dirs []string) bool {
	for _, dir := range dirs {
		rel, err := filepath.Rel(dir, p)
		if err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel) {
			return true
		}
	}
	return false
}
