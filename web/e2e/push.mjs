// Web Push in Chromium: web/push_e2e_test.go's TestPushInChromium runs
// this script against claudectl serve --demo whose devices' pushes go to a
// push-service stand-in on loopback (notify/notifytest), which checks the
// daemon's VAPID signature and decrypts each push as the browser would.
// Chromium's own push service (FCM) is out of reach of a test, so the
// page's PushManager hands out the stand-in's device (endpoint and keys),
// and the decrypted message is delivered to the page's service worker as
// DevTools delivers one (ServiceWorker.deliverPushMessage). A browser
// cannot click a notification for a test: the worker's own handler of a
// click on Allow is run on the notification it showed.
//
// It checks: the service worker registered, "Notify me on this device"
// sends the subscription (Go checks it), a kind switched off is saved, the
// request's push is shown with Allow and Deny, and Allow settles the
// request through the capability (the card goes, "allowed by
// user:bootstrap"), its notification replaced by the daemon's answer. A
// session started by hand in a terminal (reported through the hook's API)
// is listed as such and shows its transcript, with no prompt box.
//
// env: URL (the login address, #token=), CWD, CHROMIUM, ENDPOINT, P256DH,
// AUTH (the stand-in's device, base64url). Talks to the Go test: prints
// SUBSCRIBED and WAITPUSH, reads a line back (OK, or the push's JSON).
import { chromium } from "playwright-core";
import readline from "node:readline";

const { URL: loginURL, CWD, CHROMIUM, ENDPOINT, P256DH, AUTH } = process.env;
const base = new URL(loginURL).origin;
function step(name) { console.log("STEP " + name); }
function assert(cond, msg) { if (!cond) throw new Error("assertion failed: " + msg); }
const rl = readline.createInterface({ input: process.stdin });
const lines = rl[Symbol.asyncIterator]();
async function ask(what) {
  console.log(what);
  const { value, done } = await lines.next();
  if (done) throw new Error("the Go test closed stdin");
  return value;
}

const browser = await chromium.launch({
  executablePath: CHROMIUM,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const ctx = await browser.newContext();
  await ctx.grantPermissions(["notifications"], { origin: base });
  // The stand-in's device in place of Chromium's push service.
  await ctx.addInitScript(({ endpoint, p256dh, auth }) => {
    const bytes = (s) => Uint8Array.from(atob(s.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((s.length + 3) % 4)), (c) => c.charCodeAt(0)).buffer;
    let sub = null;
    const make = () => ({
      endpoint, expirationTime: null,
      getKey: (n) => (n === "p256dh" ? bytes(p256dh) : n === "auth" ? bytes(auth) : null),
      unsubscribe: async () => { sub = null; return true; },
      toJSON: () => ({ endpoint, keys: { p256dh, auth } }),
    });
    PushManager.prototype.subscribe = async function (opts) {
      if (!opts || !opts.applicationServerKey) throw new Error("subscribe without the daemon's VAPID key");
      sub = make();
      return sub;
    };
    PushManager.prototype.getSubscription = async function () { return sub; };
  }, { endpoint: ENDPOINT, p256dh: P256DH, auth: AUTH });
  const page = await ctx.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(loginURL);
  await page.getByTestId("conn").filter({ hasText: "live" }).waitFor({ timeout: 20000 });
  await page.goto(base + "/#/inbox");

  step("Notify me on this device: the service worker registered, the subscription sent");
  await page.getByTestId("push-subscribe").click();
  await page.getByTestId("push-on").waitFor({ timeout: 20000 });
  const scope = await page.evaluate(async () => (await navigator.serviceWorker.ready).scope);
  assert(scope === base + "/", "the service worker's scope: " + scope);
  step("a kind switched off is saved");
  await page.getByTestId("push-kind-session_end").click(); // checked again by the daemon's answer
  await page.waitForFunction(() => !document.querySelector('[data-testid="push-kind-session_end"]')?.checked);
  await page.getByTestId("push-kind-session_end").and(page.locator(":enabled")).waitFor({ timeout: 10000 });
  assert((await ask("SUBSCRIBED")) === "OK", "the daemon did not keep the subscription as sent");

  step("a permission request is pushed: shown with Allow and Deny");
  await page.goto(base + "/#/sessions");
  if (!(await page.locator("details.new").evaluate((d) => d.open))) await page.getByText("Start a session").click();
  await page.fill("input[name=cwd]", CWD);
  await page.fill("textarea[name=prompt]", "write a file");
  await page.getByRole("button", { name: "Start" }).click();
  await page.getByTestId("session-view").waitFor({ timeout: 30000 }); // the form has moved to the session: not later
  await page.goto(base + "/#/inbox");
  const card = page.getByTestId("card").first();
  await card.waitFor({ timeout: 30000 });
  const reqID = await card.getAttribute("data-request");
  const payload = await ask("WAITPUSH " + reqID);
  const msg = JSON.parse(payload);
  assert(msg.request_id === reqID && msg.cap && msg.actions.length === 2, "the push: " + payload);

  const cdp = await ctx.newCDPSession(page);
  const regs = new Map();
  cdp.on("ServiceWorker.workerRegistrationUpdated", (e) => { for (const r of e.registrations) regs.set(r.scopeURL, r.registrationId); });
  await cdp.send("ServiceWorker.enable");
  for (let i = 0; i < 100 && !regs.has(base + "/"); i++) await new Promise((r) => setTimeout(r, 100));
  assert(regs.has(base + "/"), "DevTools lists no registration for " + base + "/: " + [...regs.keys()].join(", "));
  // DevTools drops a push now and then on a busy machine (the worker
  // being started for it): delivered again until it shows, at most four
  // times. The same tag replaces a notification, so a second one is
  // harmless.
  let shown = null;
  for (let attempt = 0; !shown && attempt < 4; attempt++) {
    await cdp.send("ServiceWorker.deliverPushMessage", { origin: base, registrationId: regs.get(base + "/"), data: payload });
    for (const end = Date.now() + 8000; !shown && Date.now() < end; await new Promise((r) => setTimeout(r, 100))) {
      shown = await page.evaluate(async (id) => {
        const ns = await (await navigator.serviceWorker.ready).getNotifications({ tag: id });
        return ns.length ? { title: ns[0].title, body: ns[0].body, actions: ns[0].actions.map((a) => a.action) } : null;
      }, reqID);
    }
  }
  assert(shown, "no notification shown for " + reqID);
  assert(shown.title.includes("waits for you") && shown.actions.join(",") === "allow,deny", "the notification: " + JSON.stringify(shown));

  step("Allow on the notification settles the request through its capability");
  const sw = ctx.serviceWorkers().find((w) => w.url() === base + "/sw.js") ?? await ctx.waitForEvent("serviceworker");
  await sw.evaluate(async (id) => {
    const [n] = await self.registration.getNotifications({ tag: id });
    await act(n, "allow"); // the worker's handler of a click on Allow
  }, reqID);
  await page.locator(`.card[data-request="${reqID}"]`).waitFor({ state: "detached", timeout: 30000 });
  const settled = page.locator(`[data-testid="settled"][data-request="${reqID}"]`);
  await settled.waitFor({ timeout: 30000 });
  const said = (await settled.textContent()) ?? "";
  assert(said.includes("allowed by user:bootstrap"), "the settled request says: " + said);
  const answer = await page.evaluate(async (id) => (await (await navigator.serviceWorker.ready).getNotifications({ tag: id })).map((n) => n.body), reqID);
  assert(answer.length === 1 && answer[0].includes("allowed"), "the notification after Allow: " + JSON.stringify(answer));

  step("the same capability again is refused");
  const again = await page.evaluate(async (cap) => {
    const r = await fetch("/push/act", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ cap, action: "deny" }) });
    return r.status;
  }, msg.cap);
  assert(again === 409, "a used capability answered " + again);

  step("a session started by hand in a terminal: listed as such, its transcript shown read-only");
  const tid = await ask("TERMINAL");
  await page.goto(base + "/#/sessions");
  await page.locator(`[data-testid="session-row"][data-session="${tid}"] [data-testid="terminal-badge"]`).waitFor({ timeout: 20000 });
  await page.goto(base + "/#/s/" + tid);
  await page.getByTestId("transcript-entry").filter({ hasText: "list the files" }).waitFor({ timeout: 20000 });
  await page.getByTestId("transcript-entry").filter({ hasText: "ls -la" }).waitFor({ timeout: 20000 });
  assert(await page.locator("textarea[aria-label=message]").count() === 0, "a terminal session's view offers a prompt box");
  assert(errors.length === 0, "page errors: " + errors.join("; "));
  console.log("PASS");
} finally {
  rl.close(); // stdin no longer keeps node alive
  await browser.close();
}
