//go:build cgo

package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/driver"
	"github.com/sendonce/sendonce/driver/replay"
	"github.com/sendonce/sendonce/driver/x11"
	"github.com/sendonce/sendonce/gate"
	"github.com/sendonce/sendonce/vision"
	"github.com/sendonce/sendonce/vision/tesseract"
)

// desktopBuild: this build can deliver (cgo: X11 input, Tesseract).
const desktopBuild = true

// deliverFlags are deliver's inputs.
type deliverFlags struct {
	app, profile, to, destID, file, task, display, staging string
	providerConfig, replay, ocrLang                        string
	lease, displayWait, sentItemTimeout                    time.Duration
	dryRun                                                 bool
}

func (f *deliverFlags) register(env *environment, name string) *flag.FlagSet {
	fs := env.flags(name, "--app gajim --to TITLE --file PATH [--dest-id NS:ID] [--task ID] [--dry-run]")
	fs.StringVar(&f.app, "app", "", "the chat app's profile, by `NAME` (a file NAME.json in "+env.profileFolders()+", else a built-in: "+strings.Join(driver.KnownApps(), ", ")+"; 'sendonce profile list')")
	if name != "serve" { // a service's profiles come from its own folder, by name only
		fs.StringVar(&f.profile, "profile", "", "the chat app's profile `FILE` (instead of --app; 'sendonce profile check FILE' checks one)")
	}
	fs.StringVar(&f.to, "to", "", "the destination's exact visible `TITLE`")
	fs.StringVar(&f.destID, "dest-id", "", "the destination's provider id `NS:ID` (strong identity), e.g. xmpp:bob@example.org")
	fs.StringVar(&f.file, "file", "", "the file to deliver")
	fs.StringVar(&f.task, "task", "", "this task's `ID` (default: a new one)")
	fs.StringVar(&f.display, "display", "", "the X display (default $DISPLAY)")
	fs.StringVar(&f.staging, "staging", "", "where snapshots of files are kept: a folder only you can write (default $SENDONCE_STAGING, else $XDG_STATE_HOME/sendonce/staging, else ~/.local/state/sendonce/staging)")
	fs.StringVar(&env.evidenceDir, "evidence-dir", "", "where evidence bundles go (default: next to the store, in evidence/)")
	fs.DurationVar(&f.lease, "lease", sendonce.DefaultLease, "the claim's lease")
	fs.DurationVar(&f.displayWait, "display-wait", 2*time.Minute, "how long to wait for another delivery on this display to finish")
	fs.BoolVar(&f.dryRun, "dry-run", false, "claim nothing and cross nothing: say what the gate would decide and whether the title matches")
	fs.StringVar(&f.ocrLang, "ocr-lang", "", "the OCR `LANGUAGES`, Tesseract's names joined by + (eng+chi_sim; default $SENDONCE_OCR_LANGS, else the profile's, else eng)")
	fs.DurationVar(&f.sentItemTimeout, "sent-item-timeout", 0, "how long to look for the sent item (default: the app profile's)")
	if testHooks {
		fs.StringVar(&f.replay, "replay", "", "testing: drive a recorded fixture `DIR` instead of the live desktop (no X server)")
	}
	fs.StringVar(&f.providerConfig, "provider-config", "", "with --dest-id xmpp:... or matrix:..., ask that provider after the send; the account `FILE` (docs/delivering.md; or SENDONCE_XMPP_* / SENDONCE_MATRIX_*)")
	return fs
}

func desktopCommands() []command {
	return []command{
		{"deliver", "deliver a file through a chat app, at most once, with evidence", cmdDeliver},
		{"record", "deliver, recording the desktop into a replay fixture", cmdRecordFixture},
		{"doctor", "check what a delivery needs (display, OCR, store, staging, profile, window, provider) and say what to fix", cmdDoctor},
	}
}

// request checks the flags a delivery needs and makes the library's request of them.
func (f *deliverFlags) request(env *environment) (sendonce.DeliveryRequest, error) {
	var profile *driver.Profile
	switch {
	case f.app != "" && f.profile != "":
		return sendonce.DeliveryRequest{}, usagef("deliver: give --app NAME or --profile FILE, not both")
	case f.profile != "":
		p, err := driver.LoadProfileFile(f.profile)
		if err != nil {
			return sendonce.DeliveryRequest{}, usagef("deliver: --profile: %v ('sendonce profile check %s' says more)", err, f.profile)
		}
		profile = p
	case f.app == "":
		return sendonce.DeliveryRequest{}, usagef("deliver: --app NAME or --profile FILE is required ('sendonce profile list' shows the profiles)")
	case f.to == "":
		return sendonce.DeliveryRequest{}, usagef("deliver: --to TITLE is required: the visible title is checked on screen before anything is sent")
	case f.file == "":
		return sendonce.DeliveryRequest{}, usagef("deliver: --file PATH is required")
	}
	app := f.app
	if profile != nil {
		app = profile.App
	}
	req := sendonce.DeliveryRequest{App: app, Profile: profile, Destination: sendonce.Destination{Title: f.to, ProviderID: f.destID},
		Content: sendonce.Content{Path: f.file}, Task: f.task, Display: f.display, Staging: f.staging, Lease: f.lease,
		DisplayWait: f.displayWait, SentItemTimeout: f.sentItemTimeout, ProviderConfig: f.providerConfig, DryRun: f.dryRun}
	var err error
	req.Display, req.Staging, err = env.displayAndStaging("deliver", req.Display, req.Staging)
	return req, err
}

func cmdDeliver(ctx context.Context, env *environment, args []string) error {
	var f deliverFlags
	fs := f.register(env, "deliver")
	if _, err := env.parse(fs, args, 0); err != nil {
		return err
	}
	desk := desktop{open: openLive, tree: driver.OpenAccessibility}
	if f.replay != "" {
		desk = replayDesktop(&f)
	}
	_, err := env.deliver(ctx, f, desk)
	return err
}

// desktop is where a delivery acts: how it is opened, and how OCR reads it.
type desktop struct {
	open func(context.Context, string) (driver.Driver, func(), error)
	// ocr wraps the OCR engine (a replay reads the recorded path as the one this run
	// types); nil reads as the engine does.
	ocr func(vision.OCR) vision.OCR
	// tree gives the display's accessibility tree (a replay's when it recorded one; nil
	// for none).
	tree func(context.Context, string) (driver.Tree, func())
}

func (d desktop) reader(ocr vision.OCR) vision.OCR {
	if d.ocr == nil {
		return ocr
	}
	return d.ocr(ocr)
}

// openLive opens the X display. Screen capture reads DISPLAY, so the command sets it.
func openLive(_ context.Context, display string) (driver.Driver, func(), error) {
	os.Setenv("DISPLAY", display)
	d, err := x11.Open(display)
	if err != nil {
		return nil, nil, usagef("%v", err)
	}
	return d, d.Close, nil
}

// cmdRecordFixture delivers like deliver and records the desktop into a replay fixture: the
// frames after every input event, the inputs, and the outcome as the expected one.
func cmdRecordFixture(ctx context.Context, env *environment, args []string) error {
	var f deliverFlags
	fs := f.register(env, "record")
	fixture := fs.String("fixture", "", "the fixture `DIR` to write (must not exist)")
	name := fs.String("name", "", "the fixture's name")
	if _, err := env.parse(fs, args, 0); err != nil {
		return err
	}
	if *fixture == "" {
		return usagef("record: --fixture DIR is required")
	}
	if _, err := os.Stat(*fixture); err == nil {
		return usagef("record: %s exists; it never overwrites a fixture", *fixture)
	}
	var rec *replay.Recorder
	open := func(ctx context.Context, display string) (driver.Driver, func(), error) {
		d, closer, err := openLive(ctx, display)
		if err != nil {
			return nil, nil, err
		}
		if rec, err = replay.NewRecorder(d, *fixture); err != nil {
			closer()
			return nil, nil, err
		}
		return rec, closer, nil
	}
	// The app's tree is recorded beside the frames (replay.Recorder.Tree).
	tree := func(ctx context.Context, display string) (driver.Tree, func()) {
		t, closeTree := driver.OpenAccessibility(ctx, display)
		if rec == nil {
			return t, closeTree
		}
		return rec.Tree(t), closeTree
	}
	res, err := env.deliver(ctx, f, desktop{open: open, tree: tree})
	// A delivery that ended with an outcome is a fixture, whatever the outcome (a stop
	// before any boundary, not_sent, is one too); one that ended without is not.
	if _, notOutcome := gate.ParseOutcome(res.Outcome); rec == nil || notOutcome != nil {
		return err
	}
	content, rerr := os.ReadFile(f.file)
	if rerr == nil {
		rerr = rec.Save(replay.Fixture{Name: *name, App: f.app, To: f.to, DestID: f.destID, FileName: filepath.Base(f.file), Expected: res.Outcome}, content)
	}
	if rerr != nil {
		env.log.Warn().Err(rerr).Msg("saving the fixture")
	}
	if err != nil {
		return err
	}
	return deliveryExit(res)
}

// deliver runs one delivery through the library on the desktop open gives, and prints
// its result.
func (env *environment) deliver(ctx context.Context, f deliverFlags, desk desktop) (sendonce.DeliveryResult, error) {
	req, err := f.request(env)
	if err != nil {
		return sendonce.DeliveryResult{}, err
	}
	profile := req.Profile
	if profile == nil {
		profile, _ = env.profiles().Load(req.App) // an unknown app is the library's bad input
	}
	langs, err := env.ocrLanguages("deliver", f.ocrLang, profile)
	if err != nil {
		return sendonce.DeliveryResult{}, err
	}
	c, err := env.open(ctx)
	if err != nil {
		return sendonce.DeliveryResult{}, err
	}
	defer c.Close()
	ocr, err := tesseract.NewBanded(langs)
	if err != nil {
		return sendonce.DeliveryResult{}, usagef("%v", err)
	}
	defer ocr.Close()
	d := &sendonce.Deliverer{Client: c, OpenDesktop: desk.open, OpenTree: desk.tree, OCR: desk.reader(ocr), OCRLanguages: langs, AfterDurable: env.killpoint}
	res, err := d.Deliver(ctx, req)
	if res.Outcome != "" {
		env.print(res)
	}
	if err != nil {
		return res, err
	}
	return res, deliveryExit(res)
}

// ocrLanguages are the languages a command's OCR reads (sendonce.OCRLanguages: the
// flag, else $SENDONCE_OCR_LANGS, else the profile's), each one's data installed.
func (env *environment) ocrLanguages(cmd, flagValue string, p *driver.Profile) (vision.Languages, error) {
	given := flagValue
	if given == "" {
		given = env.getenv("SENDONCE_OCR_LANGS")
	}
	langs, err := sendonce.OCRLanguages(given, p)
	if err != nil {
		return nil, usagef("%s: --ocr-lang (or SENDONCE_OCR_LANGS): %v", cmd, err)
	}
	for _, l := range langs {
		if err := tesseract.LanguageAvailable(l); err != nil {
			return nil, usagef("%s: %v", cmd, err)
		}
	}
	return langs, nil
}

// mcpDeliverer is the MCP server's Deliverer: the live desktop, or a recorded fixture
// (test builds), with one OCR engine; the func closes it.
func (env *environment) mcpDeliverer(c *sendonce.Client, replayDir, ocrLang string) (*sendonce.Deliverer, func(), error) {
	langs, err := env.ocrLanguages("mcp", ocrLang, nil)
	if err != nil {
		return nil, nil, err
	}
	desk := desktop{open: openLive, tree: driver.OpenAccessibility}
	if replayDir != "" {
		desk = replayDesktop(&deliverFlags{replay: replayDir})
	}
	ocr, err := tesseract.NewBanded(langs)
	if err != nil {
		return nil, nil, usagef("%v", err)
	}
	return &sendonce.Deliverer{Client: c, OpenDesktop: desk.open, OpenTree: desk.tree, OCR: desk.reader(ocr), OCRLanguages: langs, AfterDurable: env.killpoint}, func() { ocr.Close() }, nil
}

// deliveryExit is the exit a delivery's result gives: its outcome's, or not_sent's for
// a dry run that would not proceed.
func deliveryExit(res sendonce.DeliveryResult) error {
	if res.DryRun {
		if res.WouldProceed == nil || !*res.WouldProceed {
			return exitError{exitNotSent, fmt.Errorf("a real run would not proceed")}
		}
		return nil
	}
	if code := outcomeExit(gate.Outcome(res.Outcome)); code != exitOK {
		return exitError{code, fmt.Errorf("outcome %s", res.Outcome)}
	}
	return nil
}
