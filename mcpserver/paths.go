package mcpserver

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sendonce/sendonce"
)

// checkPath accepts an absolute path to a regular file under a folder the server allows
// or one of the client's MCP roots, and returns it with links resolved. Anything else
// is bad input, refused before anything is claimed. When the path is not under an
// allowed folder and the client was not asked yet, it returns the result that asks the
// client for its roots (a multi-round-trip input request): the handler returns it, and
// the call comes back with the answer.
func (s *Server) checkPath(req *mcp.CallToolRequest, p string) (string, *mcp.CallToolResult, error) {
	bad := func(format string, args ...any) (string, *mcp.CallToolResult, error) {
		return "", nil, fmt.Errorf("%w: file: %s", sendonce.ErrInvalid, fmt.Sprintf(format, args...))
	}
	if p == "" || !filepath.IsAbs(p) {
		return bad("%q must be an absolute path", p)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return bad("cannot read %s: %v", p, err)
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
	allowed := resolved(s.AllowDirs)
	if under(real, allowed) {
		return real, nil, nil
	}
	roots, asked := clientRoots(req)
	if !asked && req != nil && req.Session != nil {
		return "", &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{rootsRequest: &mcp.ListRootsParams{}}, RequestState: rootsRequest}, nil
	}
	allowed = append(allowed, resolved(roots)...)
	if under(real, allowed) {
		return real, nil, nil
	}
	if len(allowed) == 0 {
		return bad("%s is outside every allowed folder: the client gave no roots and the server allows no folder (sendonce mcp --allow-dir DIR)", p)
	}
	return bad("%s is outside the client's roots and the allowed folders (%s)", p, strings.Join(allowed, ", "))
}

const rootsRequest = "roots"

// clientRoots is the client's answer to the roots request, when the call carries one:
// the folders of its file: roots.
func clientRoots(req *mcp.CallToolRequest) ([]string, bool) {
	if req == nil || req.Params == nil || req.Params.InputResponses == nil {
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

// resolved is the folders with links resolved; one that cannot be read is left out.
func resolved(dirs []string) []string {
	var out []string
	for _, d := range dirs {
		if r, err := filepath.EvalSymlinks(d); err == nil {
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
