// Sign-in with OpenID Connect in real headless Chromium (playwright-core);
// web/oidc_e2e_test.go runs it against a claudectl serve whose settings
// name an Ory Hydra it started on loopback, with login and consent screens
// of its own (a form taking a user name). Every step throws on failure.
//
// env: BASE (the daemon's address), ISSUER (Hydra's, another site), CHROMIUM, SHOTS (a directory for
// screenshots, optional).
import { chromium } from "playwright-core";
import path from "node:path";

const { BASE: base, ISSUER: providerOrigin, CHROMIUM, SHOTS } = process.env;

function step(name) { console.log("STEP " + name); }
function assert(cond, msg) { if (!cond) throw new Error("assertion failed: " + msg); }
async function shot(page, name) { if (SHOTS) await page.screenshot({ path: path.join(SHOTS, name) }); }

const browser = await chromium.launch({
  executablePath: CHROMIUM,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const errors = [];

// signIn goes from the page's login screen through Hydra and its login
// screen as user, and returns the page where the flow ended.
async function signIn(ctx, user) {
  const page = await ctx.newPage();
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(base + "/");
  await page.getByTestId("sign-in").click();
  await page.locator("input[name=user]").waitFor({ timeout: 15000 });
  assert(!page.url().startsWith(base), "the sign-in did not leave for the provider: " + page.url());
  await page.fill("input[name=user]", user);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL((u) => u.toString().startsWith(base), { timeout: 15000 });
  return page;
}

try {
  step("alice signs in through Hydra and gets the approver role her group maps to");
  const ctx = await browser.newContext({ viewport: { width: 1200, height: 900 } });
  const page = await signIn(ctx, "alice");
  await page.getByTestId("me").filter({ hasText: "alice@example.com (approver)" }).waitFor({ timeout: 15000 });
  await page.getByTestId("conn").filter({ hasText: "live" }).waitFor({ timeout: 10000 });
  assert(!page.url().includes("code="), "the code stayed in the address bar: " + page.url());
  assert(await page.evaluate(() => localStorage.getItem("claudectl.token")) === null, "a sign-in put a token in localStorage");
  await shot(page, "web-signed-in.png");

  step("the session cookie is HttpOnly and SameSite=Strict; the CSRF cookie is readable by the page only");
  const cookies = await ctx.cookies(base);
  const session = cookies.find((c) => c.name === "claudectl_session");
  const csrf = cookies.find((c) => c.name === "claudectl_csrf");
  assert(session && session.httpOnly && session.sameSite === "Strict" && session.value.startsWith("cctl_"), "session cookie " + JSON.stringify(session));
  assert(csrf && !csrf.httpOnly && csrf.sameSite === "Strict", "csrf cookie " + JSON.stringify(csrf));
  assert(!(await page.evaluate(() => document.cookie)).includes("cctl_"), "the page's script can read the session cookie");

  step("a cookie-authenticated request without the CSRF header is refused; with it, it is served");
  const bare = await page.evaluate(async () => (await fetch("/claudectl.v1.AuthService/Whoami", {
    method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" })).status);
  assert(bare === 403, "without the CSRF header: " + bare);
  const who = await page.evaluate(async () => {
    const m = document.cookie.match(/claudectl_csrf=([^;]+)/);
    const r = await fetch("/claudectl.v1.AuthService/Whoami", {
      method: "POST", headers: { "Content-Type": "application/json", "Claudectl-Csrf": m[1] }, body: "{}" });
    return r.json();
  });
  assert(who.user === "alice@example.com" && who.role === "approver" && who.token.startsWith("signin-"), "Whoami " + JSON.stringify(who));

  step("an approver's page has no form to start sessions");
  await page.goto(base + "/#/sessions");
  await page.getByTestId("sessions").waitFor({ state: "attached" });
  assert(await page.getByTestId("new-session").count() === 0, "the approver sees the start form");

  step("a request another site makes the browser send carries no session cookie (SameSite=Strict)");
  {
    const other = await ctx.newPage();
    const sent = [];
    other.on("request", async (req) => { if (req.url().startsWith(base + "/claudectl.v1")) sent.push(await req.allHeaders()); });
    await other.goto(providerOrigin + "/health/alive");
    await other.evaluate((u) => {
      const f = document.createElement("form");
      f.method = "POST";
      f.action = u + "/claudectl.v1.AuthService/Whoami";
      document.body.appendChild(f);
      f.submit();
    }, base);
    for (let i = 0; i < 100 && sent.length === 0; i++) await new Promise((r) => setTimeout(r, 50));
    assert(sent.length === 1, "the cross-site form's request was not seen");
    assert(!(sent[0].cookie ?? "").includes("claudectl_session"), "a cross-site request carried the session cookie: " + sent[0].cookie);
    await other.close();
  }

  step("signing out revokes the sign-in: the old cookie is refused");
  const old = session.value;
  const oldCSRF = csrf.value;
  await page.goto(base + "/#/inbox");
  await page.getByTestId("logout").click();
  await page.getByTestId("login").waitFor({ timeout: 10000 });
  const after = await fetch(base + "/claudectl.v1.AuthService/Whoami", { method: "POST",
    headers: { "Content-Type": "application/json", Cookie: "claudectl_session=" + old, "Claudectl-Csrf": oldCSRF }, body: "{}" });
  const body = await after.text();
  assert(after.status === 401 && body.includes("was revoked"), "the old cookie after signing out: " + after.status + " " + body);

  step("vera's email maps to viewer");
  {
    const vctx = await browser.newContext();
    const v = await signIn(vctx, "vera");
    await v.getByTestId("me").filter({ hasText: "vera@example.com (viewer)" }).waitFor({ timeout: 15000 });
    await vctx.close();
  }

  step("mallory, whom no mapping names, is turned away and given no cookie");
  {
    const mctx = await browser.newContext();
    const m = await signIn(mctx, "mallory");
    await m.getByText("Not allowed here").waitFor({ timeout: 10000 });
    const why = await m.locator("#why").textContent();
    assert(why.includes("mallory@example.com") && why.includes("auth.oidc.roles"), "the refusal says: " + why);
    assert(!(await mctx.cookies(base)).some((c) => c.name === "claudectl_session"), "mallory got a session cookie");
    await shot(m, "web-signin-refused.png");
    await mctx.close();
  }

  assert(errors.length === 0, "errors on the page: " + errors.join("; "));
  console.log("PASS");
} finally {
  await browser.close();
}
