package integration

import (
	"bytes"
	"image/png"
	"os"
	"strconv"

	"github.com/chromedp/chromedp"
)

// consentPage is the edge's consent page open in a browser. Its methods do
// what a person does: read it, untick scopes, press a button. They rely
// only on the form the edge promises: one checkbox named scope per scope,
// each with a label, and the buttons named approve and deny.
type consentPage struct {
	b *browser
}

// openConsent navigates to the authorization URL an MCP client printed and
// waits for the consent form.
func (b *browser) openConsent(authURL string) *consentPage {
	b.t.Helper()
	b.do("opening the authorization URL", chromedp.Navigate(authURL))
	b.do("waiting for the consent form at "+authURL, chromedp.WaitVisible(chromedp.CSS(`button[name="approve"]`)))
	return &consentPage{b: b}
}

// scopes are the values of the scope checkboxes, in page order.
func (p *consentPage) scopes() []string {
	p.b.t.Helper()
	return browserRun(p.b, "listing the scope checkboxes", chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll('input[type="checkbox"][name="scope"]')).map(e => e.value)`))
}

// checked are the values of the scope checkboxes that are ticked.
func (p *consentPage) checked() []string {
	p.b.t.Helper()
	return browserRun(p.b, "listing the ticked scopes", chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll('input[type="checkbox"][name="scope"]')).filter(e => e.checked).map(e => e.value)`))
}

// unlabelled are the form controls a screen reader could not name: inputs
// other than hidden ones without a label, buttons without text.
func (p *consentPage) unlabelled() []string {
	p.b.t.Helper()
	return browserRun(p.b, "checking the labels", chromedp.Evaluate[[]string](`
		Array.from(document.querySelectorAll('input:not([type="hidden"]), button'))
			.filter(e => e.tagName === 'BUTTON'
				? e.textContent.trim() === '' && !e.getAttribute('aria-label')
				: e.labels.length === 0 && !e.getAttribute('aria-label'))
			.map(e => e.outerHTML)`))
}

// text is what the page shows a reader.
func (p *consentPage) text() string {
	p.b.t.Helper()
	return browserRun(p.b, "reading the page", chromedp.Text(chromedp.CSS("body")))
}

// untick clears the checkbox of scope by clicking it, as a person would.
func (p *consentPage) untick(scope string) {
	p.b.t.Helper()
	p.b.do("unticking "+scope, chromedp.Click(chromedp.CSS(`input[type="checkbox"][name="scope"][value=`+strconv.Quote(scope)+`]`)))
}

// screenshot saves the whole page as a PNG at path, and fails the test if
// the picture could not show a person anything: too small, or (nearly) one
// colour, as a page whose style or content was blocked would be.
func (p *consentPage) screenshot(path string) {
	p.b.t.Helper()
	shot := browserRun(p.b, "taking a screenshot", chromedp.FullScreenshot(100))
	if err := os.WriteFile(path, shot, 0o600); err != nil {
		p.b.t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		p.b.t.Fatalf("screenshot %s: %v", path, err)
	}
	bounds := img.Bounds()
	if bounds.Dx() < 600 || bounds.Dy() < 400 {
		p.b.t.Errorf("screenshot %s is %dx%d: the page did not render at the window size", path, bounds.Dx(), bounds.Dy())
	}
	dark := 0
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			if r, g, b, _ := img.At(x, y).RGBA(); r+g+b < 3*0x8000 {
				dark++
			}
		}
	}
	// Text at a readable size darkens a few percent of a page.
	if share := float64(dark) / float64(bounds.Dx()*bounds.Dy()); share < 0.005 {
		p.b.t.Errorf("screenshot %s is almost blank (%.2f%% dark pixels)", path, 100*share)
	}
}

// approve presses the approve button.
func (p *consentPage) approve() {
	p.b.t.Helper()
	p.b.do("pressing approve", chromedp.Click(chromedp.CSS(`button[name="approve"]`)))
}

// deny presses the deny button.
func (p *consentPage) deny() {
	p.b.t.Helper()
	p.b.do("pressing deny", chromedp.Click(chromedp.CSS(`button[name="deny"]`)))
}
