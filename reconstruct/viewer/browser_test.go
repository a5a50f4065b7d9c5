package viewer

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium returns the path of a Chromium, or skips the test.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium on PATH (Debian package chromium; .ci/run installs it): skipping the browser test")
	return ""
}

// artifactsDir is where the browser test writes its screenshots:
// $ORCHARD_TEST_ARTIFACTS, else artifacts/viewer at the module root
// (ignored by git).
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("ORCHARD_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", "artifacts")
	}
	dir = filepath.Join(dir, "viewer")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestBrowser drives headless Chromium through the viewer: the list,
// a filter, an episode, a turn, and the token pane's counts and rule
// highlight, with the page's own script running.
func TestBrowser(t *testing.T) {
	exe := chromium(t)
	srv, _ := serve(t, Options{})
	out := artifactsDir(t)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.WindowSize(1400, 1000), chromedp.Flag("disable-gpu", true))...)
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	defer cancelT()

	do := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("browser: %v", err)
		}
	}
	eval := func(js string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("browser: evaluate %s: %v", js, err)
		}
		return v
	}
	shot := func(a chromedp.Action[[]byte]) []byte {
		t.Helper()
		b, err := chromedp.Run(ctx, a)
		if err != nil {
			t.Fatalf("browser: screenshot: %v", err)
		}
		return b
	}
	do(chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#episodes")),
		chromedp.SetValue(chromedp.CSS(`input[name="task"]`), "task-2"), chromedp.Submit(chromedp.CSS("#filters")),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/episodes/token-drift"]`)))
	rows := eval(`String(document.querySelectorAll("#episodes tbody tr.row").length)`)
	listShot := shot(chromedp.FullScreenshot(90))
	do(chromedp.Click(chromedp.CSS(`a[href="/episodes/token-drift"]`)), chromedp.WaitVisible(chromedp.CSS("#timeline")),
		chromedp.Click(chromedp.CSS("#turn-4")), chromedp.WaitVisible(chromedp.CSS("#turn-trainable")))
	trainable, turnTrainable := eval(`document.getElementById("trainable").textContent`), eval(`document.getElementById("turn-trainable").textContent`)
	trained, turnTrained := eval(`String(document.querySelectorAll("#tokens .t.m").length)`), eval(`String(document.querySelectorAll("#tokens .t.m.s").length)`)
	marks := eval(`String(document.querySelectorAll("#messages mark.rule[data-rule='tool-ok']").length)`)
	do(chromedp.Click(chromedp.CSS(`#tokens a.mode[data-mode="advantage"]`)))
	paneClass := eval(`document.getElementById("tokens").className + " " + location.search`)
	eval(`document.getElementById("t54").dispatchEvent(new MouseEvent("mouseover", {bubbles: true})), ""`)
	info := eval(`document.getElementById("token-info").textContent`)
	do(chromedp.ScrollIntoView(chromedp.CSS("#tokens")))
	paneShot := shot(chromedp.Screenshot(chromedp.CSS(".view")))
	do(chromedp.KeyEvent("/"))
	focused := eval(`document.activeElement.id`)
	for name, b := range map[string][]byte{"list.png": listShot, "token-view.png": paneShot} {
		if err := os.WriteFile(filepath.Join(out, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if p := os.Getenv("ORCHARD_VIEWER_README_SHOT"); p != "" {
		if err := os.WriteFile(p, paneShot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if rows != "2" {
		t.Errorf("filtered list shows %s rows, want 2", rows)
	}
	if trainable != "18" || trained != "18" || turnTrainable != "12" || turnTrained != "12" {
		t.Errorf("token pane: %s (%s cells) trainable, call 4 %s (%s cells); want 18 and 12", trainable, trained, turnTrainable, turnTrained)
	}
	if marks != "4" {
		t.Errorf("%s rule highlights, want 4 (one per tool result of segment 1)", marks)
	}
	if paneClass != "pane mode-advantage ?turn=4" {
		t.Errorf("after the advantage switch the pane's class and query are %q, want it switched in place", paneClass)
	}
	if want := "#54 id 1499 trained logprob -0.055 (p 0.95) advantage 0.5"; info != want {
		t.Errorf("hover info = %q, want %q", info, want)
	}
	if focused != "search" {
		t.Errorf("after / the focus is on %q, want the search box", focused)
	}
}
