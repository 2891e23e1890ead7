package evidence

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"image"
	_ "image/png" // frames are PNG
	"io"
	"path/filepath"
	"strings"
	"time"
)

// frameView is one frame with the OCR boxes read from it.
type frameView struct {
	Label  string
	Hash   string
	URI    template.URL
	W, H   int
	Boxes  []OCRWord
	Region []Box
	Nodes  []nodeView // what the app's accessibility tree said shows there
}

// nodeView is a node read from the app's tree, drawn where the tree said it shows.
type nodeView struct {
	Box   Box
	Label string
}

// treeNodes are the places a record read from the app's tree: a step's target node,
// and each reading an observation holds with a place.
func treeNodes(r Record) []nodeView {
	var out []nodeView
	if t := r.Target; t != nil && strings.HasPrefix(t.Method, "accessibility_tree") && t.Box != nil {
		out = append(out, nodeView{Box: *t.Box, Label: strings.Join(t.Words, "; ")})
	}
	if o := r.Observed; o != nil {
		for _, rd := range o.Readings {
			if rd.Box != nil && rd.Source == "accessibility_tree" {
				out = append(out, nodeView{Box: *rd.Box, Label: fmt.Sprintf("%s %q", rd.Node, rd.Text)})
			}
		}
	}
	return out
}

type recordView struct {
	Record
	Offset string
	Frames []frameView
	Detail string
}

type reportView struct {
	B        *Bundle
	C        Classification
	Weak     bool
	Verified string
	Records  []recordView
}

// WriteReport writes one self-contained HTML page (frames embedded) for an auditor: the
// outcome and why, the attempt, a timeline, and each step's frames with the OCR boxes
// drawn over them. A weak (visible-title) identity carries a visible warning.
func WriteReport(w io.Writer, b *Bundle, c Classification) error {
	v := reportView{B: b, C: c, Weak: b.Manifest.IdentityStrength != "strong"}
	v.Verified = "verified, not sealed: the attempt may still be running or its process died"
	if b.Sealed() {
		v.Verified = "verified and sealed"
		if b.Seal.Signature != "" {
			v.Verified += ", signed by ed25519 key " + b.Seal.PublicKey
		}
	}
	start := b.Manifest.StartedAt
	appeared := map[int]Appeared{}
	for _, a := range c.Appeared {
		appeared[a.Record] = a
	}
	stepAt := map[int]int{} // step seq -> index in v.Records
	for _, r := range b.Records {
		rv := recordView{Record: r, Offset: fmt.Sprintf("+%.3fs", time.Duration(r.Mono).Seconds())}
		if start.IsZero() {
			rv.Offset = r.Wall.Format(time.RFC3339Nano)
		}
		ocr := r.OCR
		if r.OCRRef != "" {
			ob, err := readRegular(filepath.Join(b.Dir, "ocr", r.OCRRef+".json"), maxFrameBytes)
			if err == nil {
				json.Unmarshal(ob, &ocr)
			}
		}
		for _, f := range []struct{ label, hash string }{{"before", r.Before}, {"after", r.After}} {
			if f.hash == "" {
				continue
			}
			fv, err := loadFrame(b.Dir, f.label, f.hash)
			if err != nil {
				return err
			}
			for _, o := range ocr {
				if o.Frame == f.hash {
					fv.Boxes = append(fv.Boxes, o.Words...)
					fv.Region = append(fv.Region, o.Region)
				}
			}
			if f.label == "after" {
				fv.Nodes = treeNodes(r)
			}
			rv.Frames = append(rv.Frames, fv)
		}
		rv.Detail = detail(r)
		if a, ok := appeared[r.Seq]; ok {
			rv.Detail += "; APPEARED beyond the chat as it was: " + describeItems(a.Items) + "; counted as " + a.Counted
		}
		// A result's frames are shown with the step they end: before and after side by side.
		if i, ok := stepAt[r.Step]; ok && r.Kind == KindResult {
			for _, f := range rv.Frames {
				f.Label = fmt.Sprintf("after (record %d)", r.Seq)
				v.Records[i].Frames = append(v.Records[i].Frames, f)
			}
			rv.Frames = nil
		}
		if r.Kind == KindStep {
			stepAt[r.Seq] = len(v.Records)
		}
		v.Records = append(v.Records, rv)
	}
	return reportTemplate().Execute(w, v)
}

func loadFrame(dir, label, hash string) (frameView, error) {
	b, err := readRegular(filepath.Join(dir, "frames", hash+".png"), maxFrameBytes)
	if err != nil {
		return frameView{}, err
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return frameView{}, fmt.Errorf("frame %s: %w", hash, err)
	}
	return frameView{Label: label, Hash: hash, W: cfg.Width, H: cfg.Height,
		URI: template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(b))}, nil
}

// detail is a record's facts in one line of plain words.
func detail(r Record) string {
	var parts []string
	if r.Target != nil {
		t := "found by " + r.Target.Method
		if len(r.Target.Words) > 0 {
			t += fmt.Sprintf(" %q", strings.Join(r.Target.Words, " "))
		}
		if r.Target.Confidence > 0 {
			t += fmt.Sprintf(" (confidence %.0f)", r.Target.Confidence)
		}
		parts = append(parts, t)
	}
	for _, in := range r.Inputs {
		switch in.Kind {
		case "key":
			parts = append(parts, "key "+in.Keys)
		case "click":
			parts = append(parts, fmt.Sprintf("click at %d,%d", in.X, in.Y))
		case "move":
			parts = append(parts, fmt.Sprintf("pointer to %d,%d (no click)", in.X, in.Y))
		case "type_path":
			parts = append(parts, "typed path "+in.Path)
		case "type_text":
			parts = append(parts, fmt.Sprintf("typed %d characters (not stored)", in.Length))
		}
	}
	if g := r.Gate; g != nil {
		parts = append(parts, fmt.Sprintf("gate %s %s: %s %s", g.Action, g.Boundary, g.Decision, g.Reason))
	}
	if o := r.Observed; o != nil {
		s := "observed " + o.What
		if o.Phase != "" {
			s += " (" + o.Phase + ")"
		}
		if o.Title != "" {
			s += fmt.Sprintf(" in %q", o.Title)
		}
		for _, it := range o.Items {
			s += " [" + describeItem(it) + "]"
		}
		for _, rd := range o.Readings {
			s += fmt.Sprintf("; %s read %q", strings.ReplaceAll(rd.Source, "_", " "), rd.Text)
			if rd.Verdict != "" {
				s += " (" + strings.ReplaceAll(rd.Verdict, "_", " ")
				if rd.Why != "" {
					s += ": " + rd.Why
				}
				s += ")"
			}
		}
		parts = append(parts, s)
	}
	if l := r.Lookup; l != nil {
		parts = append(parts, fmt.Sprintf("%s lookup for dispatch %s: %s %s %s", l.Provider, l.DispatchID, l.Result, l.ObjectID, l.SHA256))
	}
	if r.Label != "" {
		parts = append(parts, "the executor's own label: "+r.Label+" (never decides)")
	}
	if r.Step != 0 {
		parts = append(parts, fmt.Sprintf("ends step %d", r.Step))
	}
	return strings.Join(parts, "; ")
}

func reportTemplate() *template.Template {
	return template.Must(template.New("report").Funcs(template.FuncMap{
		"upper": strings.ToUpper,
		"outcomeClass": func(o any) string {
			return strings.ReplaceAll(fmt.Sprint(o), "_", "-")
		},
		"words":    func(s string) string { return strings.ReplaceAll(s, "_", " ") },
		"describe": describeItem,
	}).Parse(reportHTML))
}

const reportHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>sendonce evidence: {{.C.Outcome}} {{.B.Manifest.FileName}}</title>
<style>
body { font: 16px/1.4 sans-serif; margin: 24px; color: #111; background: #fff; }
h1 { font-size: 22px; margin: 0 0 12px; }
.outcome { font-size: 30px; font-weight: bold; padding: 14px 18px; border-radius: 6px; color: #fff; margin-bottom: 12px; }
.sent-verified { background: #1d6b2f; }
.send-status-unknown { background: #8a5a00; }
.sent-rejected { background: #9b1c1c; }
.not-sent { background: #2f4f8f; }
.warning { border: 3px solid #b00020; background: #fdecef; padding: 12px 16px; font-weight: bold; margin: 12px 0; }
table { border-collapse: collapse; margin: 8px 0 16px; }
td, th { border: 1px solid #bbb; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #eee; }
.mono { font-family: monospace; font-size: 13px; word-break: break-all; }
.frames { display: flex; gap: 12px; flex-wrap: wrap; }
figure { margin: 0; }
figcaption { font-size: 13px; color: #444; }
svg { border: 1px solid #888; max-width: 600px; height: auto; }
.box { fill: none; stroke: #e00000; stroke-width: 2; }
.region { fill: none; stroke: #0060e0; stroke-width: 2; stroke-dasharray: 6 4; }
.node { fill: none; stroke: #00a040; stroke-width: 3; }
.class-submit, .class-may_submit { color: #9b1c1c; font-weight: bold; }
</style>
</head>
<body>
<h1>sendonce evidence report</h1>
<div class="outcome {{outcomeClass .C.Outcome}}">Outcome: {{upper (words (print .C.Outcome))}}</div>
{{if .C.FailClosed}}<div class="warning">The evidence could not be trusted or is incomplete: this outcome is the fail-closed reading, and it grants nothing.</div>{{end}}
{{if .Weak}}<div class="warning">WEAK IDENTITY: the destination was named only by its visible title "{{.B.Manifest.Title}}". Two conversations can show the same title; nothing here proves which one it was.</div>{{end}}
<h2>Why</h2>
<ul>{{range .C.Reasons}}<li>{{.}}</li>{{end}}</ul>
{{if .C.Appeared}}<h2>Items that appeared</h2>
<p>Each read below showed an item of ours, or one named like the file, beyond the chat as it was before anything could submit. Each counted as side-effect evidence, whatever the read's phase, order or step.</p>
<table>
<tr><th>record</th><th>phase</th><th>items</th><th>compared with</th><th>counted</th></tr>
{{range .C.Appeared}}<tr><td>{{.Record}}</td><td>{{.Phase}}</td><td>{{range .Items}}{{describe .}}<br>{{end}}</td><td>{{if .Baseline}}record {{.Baseline}}{{else}}no read of the chat as it was{{end}}</td><td>{{.Counted}}</td></tr>
{{end}}</table>{{end}}
<p>Bundle: {{.Verified}}. Chain head <span class="mono">{{.B.Head}}</span>{{if .B.Seal}}; the seal says "{{.B.Seal.Outcome}}" (a label: the outcome above is decided from the records){{end}}.</p>
<h2>Attempt</h2>
<table>
<tr><th>file</th><td>{{.B.Manifest.FileName}} ({{.B.Manifest.Size}} bytes)</td></tr>
<tr><th>content SHA-256</th><td class="mono">{{.B.Manifest.ContentSHA256}}</td></tr>
<tr><th>destination</th><td>{{.B.Manifest.Identity}} ({{.B.Manifest.IdentityStrength}} identity)</td></tr>
<tr><th>keys</th><td class="mono">{{range .B.Manifest.Keys}}{{.}}<br>{{end}}</td></tr>
<tr><th>task, token</th><td>{{.B.Manifest.Task}}, {{.B.Manifest.Token}}</td></tr>
<tr><th>dispatch id</th><td class="mono">{{.B.Manifest.DispatchID}}</td></tr>
<tr><th>app, tool, host</th><td>{{.B.Manifest.App}}, {{.B.Manifest.ToolVersion}}, {{.B.Manifest.Host}}</td></tr>
<tr><th>started</th><td>{{.B.Manifest.StartedAt.Format "2006-01-02 15:04:05.000 MST"}}</td></tr>
</table>
<h2>Timeline</h2>
<table>
<tr><th>#</th><th>time</th><th>kind</th><th>step</th><th>class</th><th>details</th><th>error</th></tr>
{{range .Records}}<tr><td>{{.Seq}}</td><td>{{.Offset}}</td><td>{{.Kind}}</td><td>{{.Intent}}</td><td class="class-{{.Class}}">{{.Class}}</td><td>{{.Detail}}</td><td>{{.Error}}</td></tr>
{{end}}</table>
<h2>Steps and frames</h2>
{{range .Records}}{{if .Frames}}<section>
<h3>{{.Seq}}. {{if .Intent}}{{.Intent}}{{else}}{{.Kind}}{{end}}{{if .Class}} ({{.Class}}){{end}}</h3>
<div class="frames">{{range .Frames}}<figure>
<svg viewBox="0 0 {{.W}} {{.H}}" width="{{.W}}" height="{{.H}}" xmlns="http://www.w3.org/2000/svg">
<image href="{{.URI}}" x="0" y="0" width="{{.W}}" height="{{.H}}"/>
{{range .Region}}<rect class="region" x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}"/>{{end}}
{{range .Boxes}}<rect class="box" x="{{.Box.X}}" y="{{.Box.Y}}" width="{{.Box.W}}" height="{{.Box.H}}"><title>{{.Text}} ({{printf "%.0f" .Confidence}})</title></rect>{{end}}{{range .Nodes}}<rect class="node" x="{{.Box.X}}" y="{{.Box.Y}}" width="{{.Box.W}}" height="{{.Box.H}}"><title>{{.Label}}</title></rect>{{end}}
</svg>
<figcaption>{{.Label}} · frame {{printf "%.12s" .Hash}}…{{if .Boxes}} · OCR: {{range .Boxes}}{{.Text}} {{end}}{{end}}{{range .Nodes}} · the app's tree (green): {{.Label}}{{end}}</figcaption>
</figure>{{end}}</div>
</section>{{end}}{{end}}
</body>
</html>
`
