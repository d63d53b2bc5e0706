// Screenshots of every view of the page, on a desk (1200×900) and on a
// phone (390×844), for docs/*.png and for reviewing a change of the
// page's look. Run it against a fresh claudectl serve --demo:
//
//   URL=http://127.0.0.1:7778/#token=… TOKEN=… CWD=/some/dir CHROMIUM=/usr/bin/chromium \
//     SHOTS=/tmp/shots node e2e/shots.mjs
//
// It starts four sessions in CWD (a Markdown reply, a Bash command, a
// question, a Write), shoots the inbox with their cards, answers them,
// and shoots the inbox, the sessions, a session, search, activity and
// the rules. Views the page does not have are skipped. It also reports,
// per view and size, whether anything is wider than the window.
import { chromium } from "playwright-core";
import path from "node:path";

const { URL: loginURL, TOKEN, CWD, CHROMIUM, SHOTS } = process.env;
const base = new URL(loginURL).origin;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function api(service, method, body = {}) {
  const r = await fetch(`${base}/claudectl.v1.${service}/${method}`, {
    method: "POST", headers: { "Content-Type": "application/json", Authorization: "Bearer " + TOKEN }, body: JSON.stringify(body),
  });
  if (!r.ok) throw new Error(`${method}: ${r.status} ${await r.text()}`);
  return r.json();
}
async function until(what, f, ms = 60000) {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(200)) {
    const v = await f();
    if (v) return v;
  }
  throw new Error("timed out waiting for " + what);
}
// overflow lists what sticks out of the window (the page scrolls
// sideways), leaving out what a box that scrolls itself holds (a code
// block, a wide table, a diff).
const overflow = (p) => p.evaluate(() => {
  const w = document.documentElement.clientWidth;
  const out = [];
  if (document.documentElement.scrollWidth > w) out.push(`the page (${document.documentElement.scrollWidth} wide)`);
  const scrolls = (el) => {
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
      if (["auto", "scroll", "hidden"].includes(getComputedStyle(a).overflowX)) return true;
    }
    return false;
  };
  for (const el of document.querySelectorAll("body *")) {
    const r = el.getBoundingClientRect();
    if (r.width > 0 && (r.right > w + 1 || r.left < -1) && getComputedStyle(el).position !== "fixed" && !scrolls(el)) {
      out.push(`${el.tagName.toLowerCase()}.${el.className} (${Math.round(r.left)}..${Math.round(r.right)} of ${w})`);
    }
  }
  return out.slice(0, 5);
});

const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"] });
try {
  const desk = await browser.newContext({ viewport: { width: 1200, height: 900 } });
  const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
  const pages = { desk: await desk.newPage(), phone: await phone.newPage() };
  for (const p of Object.values(pages)) {
    await p.goto(loginURL);
    await p.getByTestId("conn").waitFor();
  }
  async function shoot(name, hash, ready) {
    for (const [size, p] of Object.entries(pages)) {
      if (hash !== null) await p.goto(base + "/" + hash);
      if (ready) await ready(p);
      await sleep(600);
      const file = path.join(SHOTS, `${name}-${size}.png`);
      await p.screenshot({ path: file, fullPage: false });
      const wide = await overflow(p);
      console.log(`${file}${wide.length ? "  OVERFLOW: " + wide.join(", ") : ""}`);
    }
  }
  const start = (prompt) => api("SessionService", "CreateSession", { options: { cwd: CWD, includePartialMessages: true }, prompt });
  const md = (await start("markdown")).session.id;
  const tool = (await start("show me a tool")).session.id;
  await start("ask me a question");
  await start("write a file");
  const pending = await until("three cards", async () => {
    const r = (await api("PermissionService", "ListPending")).requests ?? [];
    return r.length >= 3 && r;
  });
  await shoot("inbox", "#/inbox", (p) => p.getByTestId("card").nth(2).waitFor());
  await shoot("sessions", "#/sessions", (p) => p.getByTestId("session-row").nth(3).waitFor());
  for (const p of Object.values(pages)) { // watching the inbox as the cards are answered
    await p.goto(base + "/#/inbox");
    await p.getByTestId("card").nth(2).waitFor();
  }
  for (const r of pending) {
    const answers = r.toolName === "AskUserQuestion" ? { [r.questions[0].question]: "Files" } : {};
    await api("PermissionService", "Decide", { requestId: r.requestId, behavior: r.toolName === "Write" ? "BEHAVIOR_DENY" : "BEHAVIOR_ALLOW",
      message: r.toolName === "Write" ? "not now" : "", answers, client: "alice" });
  }
  await shoot("inbox-settled", null, (p) => p.getByTestId("settled").nth(2).waitFor());
  await until("the markdown reply", async () => (await api("SessionService", "GetSession", { sessionId: md })).session.status === "SESSION_STATUS_IDLE");
  await shoot("session", "#/s/" + md, (p) => p.getByTestId("assistant-text").first().waitFor());
  await until("the tool's turn", async () => (await api("SessionService", "GetSession", { sessionId: tool })).session.status === "SESSION_STATUS_IDLE");
  await shoot("session-tool", "#/s/" + tool, (p) => p.getByTestId("tool").first().waitFor());
  await api("PermissionService", "AddRule", { rule: { pattern: "Bash(ls:*)", behavior: "BEHAVIOR_ALLOW", scope: "RULE_SCOPE_SESSION", scopeValue: tool } });
  await shoot("rules", "#/rules", (p) => p.getByTestId("decision").first().waitFor());
  if ((await pages.desk.locator('a[href="#/search"]').count()) > 0) {
    await shoot("search", "#/search", async (p) => {
      await p.getByTestId("search-input").fill("migration indexer");
      await p.getByTestId("search-hit").first().waitFor({ timeout: 30000 });
    });
  }
  if ((await pages.desk.locator('a[href="#/activity"]').count()) > 0) {
    await shoot("activity", "#/activity", (p) => p.getByTestId("activity-total").waitFor({ timeout: 30000 }));
  }
} finally {
  await browser.close();
}
