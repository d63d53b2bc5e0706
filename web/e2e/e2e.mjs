// End-to-end tests of the page in real headless Chromium, driven by
// playwright-core; web/e2e_test.go runs this script against a claudectl
// serve --demo (the real CLI, the scripted demo model) and restarts the
// daemon when the script prints RESTART. Every step throws on failure.
//
// env: URL (the page's login address, with #token=), TOKEN, CWD (a
// directory for the sessions), FILES (where the demo writes its files:
// its data directory's demo-files), CHROMIUM, SHOTS (a directory for
// screenshots, optional).
import { chromium } from "playwright-core";
import fs from "node:fs";
import path from "node:path";
import readline from "node:readline";

const { URL: loginURL, TOKEN, CWD, FILES, CHROMIUM, SHOTS } = process.env;
const base = new URL(loginURL).origin;
const stdin = readline.createInterface({ input: process.stdin });
const lines = stdin[Symbol.asyncIterator]();

function step(name) { console.log("STEP " + name); }
function metric(name, v) { console.log(`METRIC ${name} ${v}`); }
function assert(cond, msg) { if (!cond) throw new Error("assertion failed: " + msg); }
async function api(service, method, body = {}) {
  const r = await fetch(`${base}/claudectl.v1.${service}/${method}`, {
    method: "POST", headers: { "Content-Type": "application/json", Authorization: "Bearer " + TOKEN }, body: JSON.stringify(body),
  });
  if (!r.ok) throw new Error(`${method}: ${r.status} ${await r.text()}`);
  return r.json();
}
// startFromForm starts a session in CWD from the sessions page's form.
async function startFromForm(page, prompt) {
  await openForm(page);
  await page.fill("input[name=cwd]", CWD);
  await page.fill("textarea[name=prompt]", prompt);
  await page.getByRole("button", { name: "Start" }).click();
}
// openForm shows the sessions page's form, folded once sessions exist.
async function openForm(page) {
  await page.goto(base + "/#/sessions");
  if (!(await page.locator("details.new").evaluate((d) => d.open))) await page.getByText("Start a session").click();
}
// caughtUp waits until page's session view has applied every event the
// daemon holds of session id, and returns that seq. The daemon's last seq
// is read again each time: a line can follow a turn's idle status (the
// CLI's own session_state_changed does). On a timeout it says what the
// page had and what the daemon holds.
const seqOf = (page) => page.evaluate(() => document.querySelector('[data-testid="session-view"]')?.getAttribute("data-last-seq"));
async function caughtUp(page, id) {
  let s, at;
  for (const end = Date.now() + 60000; Date.now() < end; await new Promise((r) => setTimeout(r, 100))) {
    s = (await api("SessionService", "GetSession", { sessionId: id })).session;
    at = await seqOf(page);
    if (at === String(s.lastSeq)) return at;
  }
  throw new Error(`the page's session view stopped at seq ${at}; the daemon has the session ${s.status} at seq ${s.lastSeq}`);
}
async function shot(page, name) { if (SHOTS) await page.screenshot({ path: path.join(SHOTS, name) }); }
// idle waits until session id is idle (its turn over) and returns it.
async function idle(id) {
  let s;
  for (let i = 0; i < 300; i++) {
    s = (await api("SessionService", "GetSession", { sessionId: id })).session;
    if (s.status === "SESSION_STATUS_IDLE") return s;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`session ${id} never went idle: ${s.status}`);
}
// overflow lists what sticks out of the window sideways (the page would
// scroll), leaving out what a box that scrolls by itself holds (a code
// block, a wide table).
const overflow = (p) => p.evaluate(() => {
  const w = document.documentElement.clientWidth;
  const out = [];
  if (document.documentElement.scrollWidth > w) out.push(`the page is ${document.documentElement.scrollWidth} wide`);
  const scrolls = (el) => {
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
      if (["auto", "scroll", "hidden"].includes(getComputedStyle(a).overflowX)) return true;
    }
    return false;
  };
  for (const el of document.querySelectorAll("body *")) {
    const r = el.getBoundingClientRect();
    if (r.width > 0 && (r.right > w + 1 || r.left < -1) && !scrolls(el)) out.push(`${el.tagName.toLowerCase()}.${el.className} (${Math.round(r.left)}..${Math.round(r.right)} of ${w})`);
  }
  return out.slice(0, 5);
});

const browser = await chromium.launch({
  executablePath: CHROMIUM,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const errors = [];
async function newPage(ctx) {
  const p = await ctx.newPage();
  p.on("pageerror", (e) => errors.push(e.message));
  return p;
}
try {
  const ctx = await browser.newContext({ viewport: { width: 1200, height: 900 } });

  step("a wrong token shows the login screen");
  {
    const p = await newPage(ctx);
    await p.goto(base + "/#token=wrong");
    await p.getByTestId("login-wrong").waitFor({ timeout: 30000 });
    assert(!p.url().includes("token="), "the token stayed in the address bar: " + p.url());
    await p.close();
  }

  step("the login address logs in; first load measured");
  const page = await newPage(ctx);
  let bytes = 0;
  page.on("response", async (r) => { const h = await r.allHeaders(); bytes += Number(h["content-length"] || 0); });
  const t0 = Date.now();
  await page.goto(loginURL);
  await page.getByText("Sessions").click();
  await page.getByTestId("sessions").waitFor({ state: "attached" });
  await page.getByTestId("conn").filter({ hasText: "live" }).waitFor({ timeout: 30000 });
  metric("first_load_ms_to_sessions_list", Date.now() - t0);
  metric("first_load_bytes", bytes);
  assert(!page.url().includes("token="), "the token stayed in the address bar: " + page.url());

  step("a session started from the form streams its reply");
  const t1 = Date.now();
  await startFromForm(page, "hello");
  await page.getByTestId("session-view").waitFor();
  await page.getByTestId("assistant-text").first().waitFor({ timeout: 30000 });
  metric("prompt_to_first_text_ms", Date.now() - t1);
  await page.getByText("I answer by keyword", { exact: false }).first().waitFor({ timeout: 30000 });

  step("the form shows the daemon's own validation, by field");
  await openForm(page);
  await page.fill("input[name=cwd]", "relative/dir");
  await page.getByRole("button", { name: "Start" }).click();
  await page.getByTestId("error-cwd").waitFor({ timeout: 30000 });

  step("a permission card approved by a click: the file appears; a second tab sees the card go, with who");
  const second = await newPage(ctx);
  await second.goto(base + "/#/inbox");
  await second.getByTestId("inbox-empty").waitFor({ timeout: 30000 });
  await startFromForm(page, "write a file");
  const card = page.getByTestId("card").first();
  await card.waitFor({ timeout: 30000 });
  await second.getByTestId("card").first().waitFor({ timeout: 30000 });
  await shot(page, "web-session.png");
  const reqID = await card.getAttribute("data-request");
  await card.getByRole("button", { name: "Allow once" }).click();
  await second.getByTestId("inbox-empty").waitFor({ timeout: 30000 });
  await second.locator(`[data-testid="settled"][data-request="${reqID}"]`).filter({ hasText: "allowed by client:web" }).waitFor({ timeout: 30000 });
  const file = path.join(FILES, "claudectl-demo.md");
  for (let i = 0; i < 300 && !fs.existsSync(file); i++) await new Promise((r) => setTimeout(r, 200));
  assert(fs.existsSync(file), "the file was not written");
  await page.getByTestId("permission-item").filter({ hasText: "client:web" }).first().waitFor({ timeout: 30000 });
  const sessionURL = page.url();
  await second.goto(sessionURL);
  await second.getByTestId("permission-item").filter({ hasText: "by client:web" }).first().waitFor({ timeout: 30000 });
  await second.close();

  step("always allow stores the rule the card shows");
  fs.rmSync(file);
  await startFromForm(page, "touch");
  const c2 = page.getByTestId("card").first();
  await c2.waitFor({ timeout: 30000 });
  const shown = (await c2.getByTestId("always-rules").textContent()) ?? "";
  await c2.getByTestId("always").click();
  await c2.waitFor({ state: "detached", timeout: 30000 });
  const rules = (await api("PermissionService", "ListRules")).rules ?? [];
  assert(rules.length > 0 && rules.every((r) => shown.includes(r.pattern)), `rules ${JSON.stringify(rules)} vs shown "${shown}"`);

  step("AskUserQuestion answered by clicks reaches the model");
  await startFromForm(page, "ask me a question");
  const q = page.getByTestId("card").first();
  await q.waitFor({ timeout: 30000 });
  await q.getByLabel("Thinking").check();
  await q.getByRole("button", { name: "Answer" }).click();
  await page.getByText("you chose Thinking").first().waitFor({ timeout: 30000 });
  // Reported as answered, with the answer, not as allowed: in the
  // conversation and in the decision log.
  await page.getByTestId("permission-item").filter({ hasText: "AskUserQuestion: answered by client:web — Thinking" }).first().waitFor({ timeout: 30000 });
  await page.goto(base + "/#/rules");
  await page.getByTestId("decision").filter({ hasText: "AskUserQuestion" }).filter({ hasText: "answered" }).filter({ hasText: "Thinking" }).first().waitFor({ timeout: 30000 });

  step("a reply in Markdown renders as such: heading, lists, table, highlighted Go; its HTML stays text");
  let mdSession;
  {
    await startFromForm(page, "markdown");
    const reply = page.getByTestId("assistant-text").filter({ hasText: "Raw HTML stays text" });
    await reply.waitFor({ timeout: 30000 });
    mdSession = decodeURIComponent(page.url().split("#/s/")[1]);
    await idle(mdSession);
    assert((await reply.locator("h2").textContent()) === "What the migration changed", "no heading");
    assert(await reply.locator("ul > li").count() >= 5, "no list");
    assert(await reply.locator('input[type="checkbox"][checked]').count() === 1, "no task list");
    assert((await reply.locator("table td").allTextContents()).includes("SQLite"), "no table");
    assert(await reply.locator('pre.code[data-lang="go"] .hljs-keyword').count() > 0, "the Go block is not highlighted");
    assert(await reply.locator('pre.code[data-lang="diff"] .hljs-addition').count() > 0, "the diff block is not highlighted");
    assert(await reply.locator("strong").filter({ hasText: "three" }).count() === 1, "no bold");
    const text = await reply.innerText();
    assert(text.includes(`<img src=x onerror="document.title='pwned'">`) && text.includes("<script>alert(1)</script>"), "the HTML is not shown as text: " + text);
    assert(await reply.locator("img, script, iframe").count() === 0, "the reply's HTML became elements");
    assert(await page.title() !== "pwned", "the reply's HTML ran");
    assert(await reply.locator('a[href="https://example.com/docs"][rel~="noopener"][target="_blank"]').count() === 1, "the http link");
    assert(await reply.locator('a[href^="javascript"]').count() === 0, "a javascript: link");
    await shot(page, "web-markdown.png");
    // Its title is its first prompt until Claude Code gives one.
    await page.goto(base + "/#/sessions");
    await page.locator(`[data-testid="session-row"][data-session="${mdSession}"]`).filter({ hasText: "“markdown”" }).waitFor({ timeout: 10000 });
  }

  step("a reload mid-stream resumes with nothing missing or doubled");
  await startFromForm(page, "tour");
  await page.getByTestId("assistant-text").first().waitFor({ timeout: 30000 });
  const tourURL = page.url();
  await page.reload();
  // The tour asks three things; answer them as they come.
  for (const want of ["Allow once", "Answer", "Allow once"]) {
    const c = page.getByTestId("card").first();
    await c.waitFor({ timeout: 60000 });
    if (want === "Answer") await c.getByLabel("Files").check();
    await c.getByRole("button", { name: want }).click();
    await c.waitFor({ state: "detached", timeout: 30000 });
  }
  await page.getByText("That was the tour").first().waitFor({ timeout: 60000 });
  const id = decodeURIComponent(tourURL.split("#/s/")[1]);
  let stored;
  for (let i = 0; i < 600; i++) { // the turn's last events follow its text: wait for idle
    stored = (await api("SessionService", "GetSession", { sessionId: id })).session;
    if (stored.status === "SESSION_STATUS_IDLE") break;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert(stored.status === "SESSION_STATUS_IDLE", "the tour never went idle: " + stored.status);
  const fresh = await newPage(ctx);
  await fresh.goto(tourURL);
  // Both views at the daemon's last seq, then their text: looked at again
  // if a line came in between.
  let reloaded, canonical;
  for (let i = 0; ; i++) {
    assert(i < 3, "the session's log kept growing after it went idle");
    const at = await caughtUp(fresh, id);
    if (await caughtUp(page, id) !== at) continue;
    reloaded = await page.getByTestId("conversation").innerText();
    canonical = await fresh.getByTestId("conversation").innerText();
    if (await seqOf(page) === at && await seqOf(fresh) === at) break;
  }
  assert(reloaded === canonical, "the conversation after a reload differs from a fresh read of the stored log");
  await fresh.close();

  step("CLI line to text on screen");
  {
    await startFromForm(page, "hello again");
    await page.getByTestId("session-view").waitFor();
    // From the daemon storing a line (its event time) to the page
    // showing it: each time the view renders a newer event, until the
    // turn has ended and the page has applied its every event (not for a
    // fixed time: on a busy machine the reply began after 8 s).
    await page.evaluate(() => {
      const out = (window.__lineToScreen = []);
      const view = document.querySelector('[data-testid="session-view"]');
      window.__lineToScreenObs = new MutationObserver(() => {
        requestAnimationFrame(() => {
          const t = Number(view.getAttribute("data-last-event-ms"));
          if (t > 0) out.push(Date.now() - t);
        });
      });
      window.__lineToScreenObs.observe(view, { attributes: true, attributeFilter: ["data-last-event-ms"] });
    });
    await page.getByText("I answer by keyword", { exact: false }).first().waitFor({ timeout: 60000 });
    const id = decodeURIComponent(page.url().split("#/s/")[1]);
    for (let i = 0; ; i++) { // the reply has begun: idle is its turn's end
      const s = (await api("SessionService", "GetSession", { sessionId: id })).session;
      if (s.status === "SESSION_STATUS_IDLE") break;
      assert(i < 600, "the reply's turn never ended: " + s.status);
      await new Promise((r) => setTimeout(r, 100));
    }
    await caughtUp(page, id);
    const lat = await page.evaluate(() => new Promise((resolve) => {
      requestAnimationFrame(() => { window.__lineToScreenObs.disconnect(); resolve(window.__lineToScreen); });
    }));
    assert(lat.length > 3, `no streaming seen: ${lat.length} screen updates`);
    lat.sort((a, b) => a - b);
    metric("line_to_screen_p50_ms", lat[Math.floor(lat.length / 2)]);
    metric("line_to_screen_p99_ms", lat[Math.floor(lat.length * 0.99)]);
    metric("line_to_screen_max_ms", lat[lat.length - 1]);
    metric("screen_updates_during_stream", lat.length);
  }

  step("the keyboard: j/k move between cards, d denies the focused one");
  {
    fs.rmSync(file, { force: true });
    await page.goto(base + "/#/inbox");
    await page.getByTestId("inbox-empty").waitFor({ timeout: 30000 });
    await api("SessionService", "CreateSession", { options: { cwd: CWD, includePartialMessages: true }, prompt: "write a file" });
    await api("SessionService", "CreateSession", { options: { cwd: CWD, includePartialMessages: true }, prompt: "show me a tool" }); // touch is a rule now
    await page.getByTestId("card").nth(1).waitFor({ timeout: 30000 });
    await page.keyboard.press("j");
    // The focus is drawn on the next render: wait for it to be the second card's.
    const id = await page.getByTestId("card").nth(1).getAttribute("data-request");
    await page.locator(`.card.focused[data-request="${id}"]`).waitFor({ timeout: 10000 })
      .catch(() => assert(false, "j did not move to the second card"));
    await page.keyboard.press("k");
    await page.keyboard.press("j");
    await page.keyboard.press("d");
    await page.locator(`.card[data-request="${id}"]`).waitFor({ state: "detached", timeout: 30000 });
    await page.keyboard.press("a"); // the other one, focused now
    await page.getByTestId("inbox-empty").waitFor({ timeout: 30000 });
  }

  step("the phone layout approves a request");
  {
    fs.rmSync(file, { force: true });
    const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
    const p = await newPage(phone);
    await p.goto(loginURL);
    await p.getByTestId("conn").filter({ hasText: "live" }).waitFor({ timeout: 30000 });
    await api("SessionService", "CreateSession", { options: { cwd: CWD, includePartialMessages: true }, prompt: "write a file" });
    const c = p.getByTestId("card").first();
    await c.waitFor({ timeout: 30000 });
    await shot(p, "web-phone.png");
    await c.getByRole("button", { name: "Allow once" }).tap();
    await p.getByTestId("inbox-empty").waitFor({ timeout: 30000 });
    for (let i = 0; i < 300 && !fs.existsSync(file); i++) await new Promise((r) => setTimeout(r, 200));
    assert(fs.existsSync(file), "the file was not written from the phone");
    await phone.close();
  }

  step("a phrase of a closed session's tool output: found by the page's search and by claudectl search, opening the session there");
  let toolSession;
  {
    // ls -l lists these: a phrase to find, and enough lines to fold.
    for (let i = 0; i < 30; i++) fs.writeFileSync(path.join(CWD, `filler-${String(i).padStart(2, "0")}.txt`), "");
    fs.writeFileSync(path.join(CWD, "wombat-quokka-e2e.txt"), "");
    toolSession = (await api("SessionService", "CreateSession", { options: { cwd: CWD, includePartialMessages: true }, prompt: "show me a tool" })).session.id;
    let req;
    for (let i = 0; i < 300 && !req; i++) {
      req = ((await api("PermissionService", "ListPending", { sessionId: toolSession })).requests ?? [])[0];
      if (!req) await new Promise((r) => setTimeout(r, 100));
    }
    assert(req, "no permission request for ls");
    await api("PermissionService", "Decide", { requestId: req.requestId, behavior: "BEHAVIOR_ALLOW", client: "e2e" });
    await idle(toolSession);
    await api("SessionService", "CloseSession", { sessionId: toolSession, client: "e2e" });
    await page.goto(base + "/#/search");
    await page.getByTestId("search-input").fill("Wombat quokka E2E");
    const hit = page.locator(`[data-testid="search-hit"][data-session="${toolSession}"]`);
    await hit.waitFor({ timeout: 30000 });
    assert(await page.getByTestId("search-hit").count() === 1, "more than one hit");
    assert((await hit.locator("mark").allTextContents()).map((m) => m.toLowerCase()).includes("wombat"), "the match is not marked");
    const seq = await hit.getAttribute("data-seq");
    await shot(page, "web-search.png");
    console.log(`SEARCH ${toolSession} ${seq} wombat quokka e2e`);
    const said = await lines.next();
    assert(said.value === "SEARCHED", "claudectl search: " + said.value);
    await hit.locator("a").click();
    await page.waitForURL((u) => u.hash === `#/s/${encodeURIComponent(toolSession)}?seq=${seq}`);
    const target = page.locator(".conversation .target");
    await target.waitFor({ timeout: 10000 });
    assert(await target.evaluate((el) => el.tagName === "DETAILS" && el.open), "the tool call holding the hit is not opened");
    assert((await target.innerText()).includes("wombat-quokka-e2e.txt"), "the hit's event is not the one marked");
    // Opened at no event, its long output is folded, the rest a click away.
    await page.goto(base + "/#/s/" + encodeURIComponent(toolSession));
    await page.reload(); // a fresh view: the hit unfolded this one
    const call = page.getByTestId("tool").first();
    await call.waitFor({ timeout: 10000 });
    await call.locator("summary").click();
    const fold = call.getByTestId("folded");
    await fold.waitFor({ timeout: 10000 });
    assert(!(await call.locator("pre.result").innerText()).includes("wombat-quokka-e2e.txt"), "ls -l's output of 30 lines is not folded");
    await fold.getByRole("button").click();
    assert((await call.locator("pre.result").innerText()).includes("wombat-quokka-e2e.txt"), "the unfolded output lacks its last lines");
  }

  step("the activity plots show the spend of the sessions run in the test; CSV of the same");
  {
    const all = (await api("SessionService", "ListSessions")).sessions ?? [];
    const spent = all.reduce((a, s) => a + (s.totals?.costUsd ?? 0), 0);
    assert(spent > 0, "the sessions spent nothing");
    await page.goto(base + "/#/activity");
    const total = page.getByTestId("activity-total");
    await total.waitFor({ timeout: 20000 });
    const shown = Number((await total.textContent()).replace("$", ""));
    assert(Math.abs(shown - spent) < 0.00015, `the activity shows $${shown}, the sessions spent $${spent}`);
    assert((await page.getByTestId("activity-cwds").innerText()).includes(CWD), "the directory's spend is not listed");
    for (const c of ["chart-cwd", "chart-model", "chart-turns", "chart-tokens", "chart-status"]) {
      await page.locator(`[data-testid="${c}"] canvas`).waitFor({ timeout: 10000 });
    }
    const csv = decodeURIComponent((await page.getByTestId("activity-csv").getAttribute("href")).split(",").slice(1).join(","));
    assert(csv.startsWith("day,metric,name,value\n") && csv.includes("cost_usd_by_directory," + CWD), "the CSV: " + csv.slice(0, 200));
    await shot(page, "web-activity.png");
  }

  step("at 390×844 nothing overflows, every view");
  {
    const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
    const p = await newPage(phone);
    await p.goto(loginURL);
    await p.getByTestId("conn").waitFor();
    const views = [["#/inbox", "inbox-empty"], ["#/sessions", "session-row"], ["#/s/" + mdSession, "assistant-text"],
      ["#/s/" + toolSession + "?seq=1", "tool"], ["#/search?q=wombat", "search-hit"], ["#/activity", "activity-total"], ["#/rules", "decision"]];
    for (const [hash, ready] of views) {
      await p.goto(base + "/" + hash);
      await p.getByTestId(ready).first().waitFor({ timeout: 20000 });
      await new Promise((r) => setTimeout(r, 300));
      const wide = await overflow(p);
      assert(wide.length === 0, `at 390×844, ${hash} overflows: ${wide.join(", ")}`);
    }
    // The composer leaves the conversation most of the screen.
    await p.goto(base + "/#/s/" + mdSession);
    const box = await p.getByTestId("controls").boundingBox();
    assert(box.height < 844 / 6, `the composer takes ${box.height}px of 844`);
    await phone.close();
  }

  step("the rule form: a value typed for another scope is not sent with a global rule");
  {
    await page.goto(base + "/#/rules");
    const form = page.getByTestId("rule-form");
    await form.getByLabel("pattern").fill("WebFetch(domain:e2e.invalid)");
    await form.getByLabel("behavior").selectOption("deny");
    await form.getByLabel("scope", { exact: true }).selectOption("project");
    await form.getByLabel("scope value").fill("/somewhere/else");
    await form.getByLabel("scope", { exact: true }).selectOption("global"); // the value's field goes away
    await form.getByRole("button", { name: "Add" }).click();
    await page.getByTestId("rules").filter({ hasText: "WebFetch(domain:e2e.invalid)" }).waitFor({ timeout: 30000 });
    if (await page.getByTestId("rule-error").count() !== 0) throw new Error("the rule form showed: " + await page.getByTestId("rule-error").textContent());
    const added = ((await api("PermissionService", "ListRules")).rules ?? []).find((r) => r.pattern === "WebFetch(domain:e2e.invalid)");
    assert(added && (added.scope ?? "RULE_SCOPE_GLOBAL") === "RULE_SCOPE_GLOBAL" && !added.scopeValue, "the rule stored: " + JSON.stringify(added));
  }

  step("a viewer's page hides what it cannot do; an approver's decides, and every page names the person");
  {
    const viewerTok = (await api("AuthService", "CreateToken", { name: "watcher", role: "viewer", user: "vera" })).secret;
    const phoneTok = (await api("AuthService", "CreateToken", { name: "phone", role: "approver", user: "alice" })).secret;
    assert(viewerTok.startsWith("cctl_") && phoneTok.startsWith("cctl_"), "tokens " + viewerTok + " " + phoneTok);
    const vctx = await browser.newContext({ viewport: { width: 1200, height: 900 } }); // its own storage: its own login
    const viewer = await newPage(vctx);
    await viewer.goto(base + "/#token=" + viewerTok);
    await viewer.getByTestId("me").filter({ hasText: "vera (viewer)" }).waitFor({ timeout: 10000 });
    await viewer.goto(base + "/#/sessions");
    await viewer.getByTestId("sessions").waitFor({ state: "attached" });
    assert(await viewer.getByTestId("new-session").count() === 0, "a viewer's page shows the form that starts sessions");
    fs.rmSync(file, { force: true });
    await api("SessionService", "CreateSession", { options: { cwd: CWD, includePartialMessages: true }, prompt: "write a file" });
    await viewer.goto(base + "/#/inbox");
    const vcard = viewer.getByTestId("card").first();
    await vcard.waitFor({ timeout: 30000 });
    await vcard.getByTestId("cannot-decide").waitFor({ timeout: 10000 });
    assert(await vcard.getByRole("button", { name: "Allow once" }).count() === 0, "a viewer's card has an Allow button");
    assert(await vcard.getByRole("button", { name: "Deny" }).count() === 0, "a viewer's card has a Deny button");
    await shot(viewer, "web-viewer.png");
    const reqID = await vcard.getAttribute("data-request");
    const sid = (await api("PermissionService", "ListPending")).requests.find((r) => r.requestId === reqID).sessionId;
    await viewer.goto(base + "/#/s/" + sid);
    await viewer.getByTestId("session-view").waitFor();
    assert(await viewer.getByTestId("controls").count() === 0, "a viewer's session view has the controls");
    await viewer.goto(base + "/#/rules");
    await viewer.getByTestId("rules").waitFor({ state: "attached" });
    assert(await viewer.getByTestId("rule-form").count() === 0, "a viewer's page shows the rule form");

    const pctx = await browser.newContext({ viewport: { width: 400, height: 800 } }); // a phone
    const phone = await newPage(pctx);
    await phone.goto(base + "/#token=" + phoneTok);
    await phone.getByTestId("me").filter({ hasText: "alice (approver)" }).waitFor({ timeout: 10000 });
    const pcard = phone.locator(`[data-testid="card"][data-request="${reqID}"]`);
    await pcard.waitFor({ timeout: 10000 });
    await pcard.getByRole("button", { name: "Allow once" }).click();
    await viewer.goto(base + "/#/inbox");
    await viewer.locator(`[data-testid="settled"][data-request="${reqID}"]`).filter({ hasText: "allowed by user:alice" }).waitFor({ timeout: 10000 });
    await phone.goto(base + "/#/sessions");
    assert(await phone.getByTestId("new-session").count() === 0, "an approver's page shows the form that starts sessions");
    const audit = (await api("AuthService", "ListAudit", { user: "alice" })).entries ?? [];
    assert(audit.some((e) => e.action === "Decide" && e.token === "phone" && e.clientKind === "page"), "the audit: " + JSON.stringify(audit));
    await vctx.close();
    await pctx.close();
  }

  step("the daemon restarted under the page: the page recovers");
  await page.goto(base + "/#/sessions");
  await page.getByTestId("conn").filter({ hasText: "live" }).waitFor({ timeout: 30000 });
  await shot(page, "web-sessions.png");
  console.log("RESTART");
  const ack = await lines.next();
  assert(ack.value === "RESTARTED", "no restart: " + ack.value);
  await page.getByTestId("conn").filter({ hasText: "live" }).waitFor({ timeout: 30000 });
  await page.getByTestId("session-row").first().waitFor({ timeout: 30000 });

  assert(errors.length === 0, "errors on the page: " + errors.join("; "));
  console.log("PASS");
} finally {
  await browser.close();
  stdin.close();
}
