// Sessions that stay out of each other's way, on the page: web/
// e2e_test.go's TestPageWorktreeAndBudget runs this script against a
// claudectl serve --demo whose settings cap each session's spend at a
// hundredth of a cent (budgets.session_usd), in a git repository (REPO).
// A session started from the form in a worktree of its own: its Changes
// view shows what changed in its worktree and merges it into the
// repository (once its first turn is over); after that turn it is held at
// its cap: the inbox and its view show a card, a prompt sent meanwhile
// waits, and raising the cap from the card runs it.
//
// env: URL (the page's login address, with #token=), TOKEN, REPO, CHROMIUM.
import { chromium } from "playwright-core";
import fs from "node:fs";
import path from "node:path";

const { URL: loginURL, TOKEN, REPO, CHROMIUM } = process.env;
const base = new URL(loginURL).origin;
function step(name) { console.log("STEP " + name); }
function assert(cond, msg) { if (!cond) throw new Error("assertion failed: " + msg); }
async function api(service, method, body = {}) {
  const r = await fetch(`${base}/claudectl.v1.${service}/${method}`, {
    method: "POST", headers: { "Content-Type": "application/json", Authorization: "Bearer " + TOKEN }, body: JSON.stringify(body),
  });
  if (!r.ok) throw new Error(`${method}: ${r.status} ${await r.text()}`);
  return r.json();
}
async function until(what, f, ms = 30000) {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 100))) {
    const v = await f();
    if (v) return v;
  }
  throw new Error("timed out waiting for " + what);
}

const browser = await chromium.launch({
  executablePath: CHROMIUM,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const ctx = await browser.newContext();
  const page = await ctx.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(loginURL);
  await page.getByTestId("conn").filter({ hasText: "live" }).waitFor({ timeout: 20000 });

  step("a session started from the form in a worktree of its own");
  await page.goto(base + "/#/sessions");
  await page.fill("input[name=cwd]", REPO);
  await page.check("input[name=worktree]");
  await page.fill("textarea[name=prompt]", "hello");
  await page.getByRole("button", { name: "Start" }).click();
  await page.getByTestId("session-view").waitFor({ timeout: 30000 });
  const id = decodeURIComponent(new URL(page.url()).hash.slice("#/s/".length));
  const s = (await api("SessionService", "GetSession", { sessionId: id })).session;
  assert(s.worktree && s.worktree.branch === "claudectl/" + id.slice(0, 8).toLowerCase() && s.worktree.baseBranch === "main",
    "the session's worktree: " + JSON.stringify(s.worktree));

  step("its first turn reached its spend cap: the inbox and its view show a card");
  await page.getByTestId("budget-card").waitFor({ timeout: 30000 });
  const detail = (await page.getByTestId("budget-detail").textContent()) ?? "";
  assert(detail.startsWith("waiting for budget: $") && detail.includes("for this session"), "the card: " + detail);
  const inbox = await ctx.newPage(); // the same context: logged in
  await inbox.goto(base + "/#/inbox");
  await inbox.locator(`[data-testid="budget-card"][data-session="${id}"]`).waitFor({ timeout: 20000 });
  assert((await inbox.getByTestId("inbox-count").textContent()) === "1", "the inbox count");

  step("its Changes view shows what changed in its worktree, and merges it");
  fs.writeFileSync(path.join(s.worktree.path, "page.txt"), "from the page\n");
  assert(!fs.existsSync(path.join(REPO, "page.txt")), "the repository's own tree got the worktree's file");
  await page.getByTestId("changes").locator("summary").click();
  await page.locator('[data-testid="changed-file"][data-path="page.txt"]').waitFor({ timeout: 20000 });
  const patch = (await page.getByTestId("patch").textContent()) ?? "";
  assert(patch.includes("+from the page"), "the diff: " + patch);
  await page.getByRole("button", { name: "Merge into main" }).click();
  await until("the merge", async () => (await page.getByTestId("changes-note").count()) > 0 || (await page.getByTestId("changes-error").count()) > 0);
  if (await page.getByTestId("changes-error").count()) throw new Error("the merge failed: " + await page.getByTestId("changes-error").textContent());
  await page.getByTestId("changes-note").filter({ hasText: "Merged into main" }).waitFor({ timeout: 20000 });
  assert(fs.readFileSync(path.join(REPO, "page.txt"), "utf8") === "from the page\n", "the merge did not bring page.txt in");

  step("a prompt sent meanwhile waits; raising the cap from the card runs it");
  await page.fill("textarea[aria-label=message]", "hello again");
  await page.getByRole("button", { name: "Send" }).click();
  await page.getByText("1 prompt waits", { exact: false }).waitFor({ timeout: 20000 });
  assert((await api("SessionService", "GetSession", { sessionId: id })).session.totals.inputTokens !== undefined, "totals");
  const before = (await api("SessionService", "GetSession", { sessionId: id })).session;
  await inbox.fill(`[data-testid="budget-card"][data-session="${id}"] input`, "100");
  await inbox.locator(`[data-testid="budget-card"][data-session="${id}"]`).getByRole("button", { name: "Raise the cap" }).click();
  await inbox.getByTestId("inbox-empty").waitFor({ timeout: 20000 });
  await until("the kept prompt's turn", async () => {
    const now = (await api("SessionService", "GetSession", { sessionId: id })).session;
    return Number(now.totals?.costUsd ?? 0) > Number(before.totals?.costUsd ?? 0) && !now.queuedPrompts;
  });
  assert(errors.length === 0, "page errors: " + errors.join("; "));
  console.log("PASS");
} finally {
  await browser.close();
}
