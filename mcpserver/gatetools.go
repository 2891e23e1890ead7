package mcpserver

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/gate"
)

// The gate steps, for agents that drive an app themselves. A refusal is a decision (a
// successful result with decision "refused"), not a tool error.

const gateRule = " Act exactly once after a cross; if you cannot tell whether your own act happened, record send_status_unknown."

// ClaimInput asks for the right to deliver a file to a destination.
type ClaimInput struct {
	To           string `json:"to" jsonschema:"the conversation's exact visible title"`
	DestID       string `json:"dest_id,omitempty" jsonschema:"the destination's provider id"`
	File         string `json:"file" jsonschema:"absolute path of the file"`
	Task         string `json:"task" jsonschema:"this task's id"`
	LeaseSeconds int    `json:"lease_seconds,omitempty" jsonschema:"how long the claim holds (default 300)"`
}

// PermitInput names a granted claim, and a boundary where one is asked.
type PermitInput struct {
	Key       string `json:"key"`
	Task      string `json:"task"`
	Token     uint64 `json:"token"`
	Boundary  string `json:"boundary,omitempty" jsonschema:"open_picker, choose_file or send"`
	ChainHead string `json:"chain_head,omitempty" jsonschema:"your evidence's chain head at this moment"`
	Outcome   string `json:"outcome,omitempty" jsonschema:"record: sent_verified, not_sent, send_status_unknown or sent_rejected"`
	Evidence  string `json:"evidence,omitempty" jsonschema:"record: the attempt's evidence folder"`
	// LeaseSeconds is renew's new lease.
	LeaseSeconds int `json:"lease_seconds,omitempty"`
}

func (in PermitInput) ref() sendonce.PermitRef {
	return sendonce.PermitRef{Key: in.Key, Task: in.Task, Token: in.Token}
}

func (s *Server) addGateTools(srv *mcp.Server) {
	c := s.Client
	step := &mcp.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(false)}
	addTool(srv, &mcp.Tool{Name: "claim", Annotations: step,
		Description: "Claim the one right to deliver this file to this destination: granted (with a token), or refused because it is held or consumed." + gateRule},
		func(ctx context.Context, req *mcp.CallToolRequest, in ClaimInput) (*mcp.CallToolResult, sendonce.ClaimResult, error) {
			file, answer := s.fileOrAnswer(req, in.File)
			if answer != nil {
				return answer, sendonce.ClaimResult{}, nil
			}
			defer file.Close()
			res, err := c.Claim(ctx, sendonce.ClaimRequest{Destination: sendonce.Destination{Title: in.To, ProviderID: in.DestID},
				Content: sendonce.Content{File: file}, Task: in.Task, Lease: time.Duration(in.LeaseSeconds) * time.Second})
			return decided(res, err)
		})
	addTool(srv, &mcp.Tool{Name: "check", Annotations: step,
		Description: "Ask whether your permit may go on to a boundary (open_picker, choose_file, send)." + gateRule},
		func(ctx context.Context, _ *mcp.CallToolRequest, in PermitInput) (*mcp.CallToolResult, sendonce.Decision, error) {
			return decided(c.Check(ctx, in.ref(), gate.Boundary(in.Boundary)))
		})
	addTool(srv, &mcp.Tool{Name: "cross", Annotations: step,
		Description: "Record, durably, that you are about to cross a boundary: after it the delivery counts as possibly made." + gateRule},
		func(ctx context.Context, _ *mcp.CallToolRequest, in PermitInput) (*mcp.CallToolResult, sendonce.Decision, error) {
			return decided(c.Cross(ctx, in.ref(), gate.Boundary(in.Boundary), in.ChainHead))
		})
	addTool(srv, &mcp.Tool{Name: "renew", Annotations: step,
		Description: "Extend your permit's lease while you work." + gateRule},
		func(ctx context.Context, _ *mcp.CallToolRequest, in PermitInput) (*mcp.CallToolResult, sendonce.Decision, error) {
			return decided(c.Renew(ctx, in.ref(), time.Duration(in.LeaseSeconds)*time.Second))
		})
	addTool(srv, &mcp.Tool{Name: "record", Annotations: step,
		Description: "Record the outcome of your attempt. If you cannot tell whether your own act happened, record send_status_unknown." + gateRule},
		func(ctx context.Context, _ *mcp.CallToolRequest, in PermitInput) (*mcp.CallToolResult, sendonce.Decision, error) {
			return decided(c.Record(ctx, in.ref(), sendonce.RecordRequest{Outcome: gate.Outcome(in.Outcome), Evidence: in.Evidence, ChainHead: in.ChainHead}))
		})
}

// decided: a gate refusal (consumed, held, stale) comes with its decision and is a
// result; bad input and fail-closed are tool errors.
func decided[R any](res R, err error) (*mcp.CallToolResult, R, error) {
	switch ErrorKind(err) {
	case "consumed", "held", "stale":
		return nil, res, nil
	}
	return toolResult(res, err)
}
