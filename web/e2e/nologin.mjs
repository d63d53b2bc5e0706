// The page with a daemon whose Claude Code has no credentials: web/
// e2e_test.go's TestPageNotLoggedIn runs this script against a claudectl
// serve (not the demo) whose CLIs have no key and no login. A session
// started from the form fails its turn; the page shows the error with the
// daemon's hint (where the key goes), and never an error "(success)".
//
// env: URL (the page's login address, with #token=), CWD, CHROMIUM.
import { chromium } from "playwright-core";

const { URL: loginURL, CWD, CHROMIUM } = process.env;
const base = new URL(loginURL).origin;
function step(name) { console.log("STEP " + name); }
function assert(cond, msg) { if (!cond) throw new Error("assertion failed: " + msg); }

const browser = await chromium.launch({
  executablePath: CHROMIUM,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(loginURL);
  // Logged in (the token kept) before the page is left for the form.
  await page.getByTestId("conn").filter({ hasText: "live" }).waitFor({ timeout: 20000 });
  step("a session started from the form: its turn is refused for lack of credentials");
  await page.goto(base + "/#/sessions");
  await page.fill("input[name=cwd]", CWD);
  await page.fill("textarea[name=prompt]", "hello");
  await page.getByRole("button", { name: "Start" }).click();
  await page.getByTestId("session-view").waitFor({ timeout: 30000 });
  const hint = page.getByTestId("hint").first();
  await hint.waitFor({ timeout: 30000 });
  const text = (await hint.textContent()) ?? "";
  assert(text.includes("has no credentials the API accepts") && text.includes("ANTHROPIC_API_KEY"), "the hint: " + text);
  step("no error of subtype success");
  await page.getByText("the turn failed at the API", { exact: false }).first().waitFor({ timeout: 30000 });
  const all = (await page.getByTestId("session-view").textContent()) ?? "";
  assert(!all.includes("(success)"), "the page says an error (success): " + all);
  assert(errors.length === 0, "page errors: " + errors.join("; "));
  console.log("PASS");
} finally {
  await browser.close();
}
