// claudectl's service worker: it shows what the daemon pushes to this
// device (Web Push, RFC 8030; the daemon encrypts each message for this
// subscription, RFC 8291), and answers a permission request's Allow or
// Deny from the notification itself. The action carries the one-use
// capability the daemon put in that one message (for that request and
// this device), never a token: this worker holds none.
"use strict";

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (e) => e.waitUntil(self.clients.claim()));

// show displays message m (notify.PushMessage).
function show(m) {
  const actions = m.cap && Array.isArray(m.actions) ? m.actions.map((a) => ({ action: a.action, title: a.title })) : [];
  return self.registration.showNotification(m.title || "claudectl", {
    body: m.body || "",
    tag: m.tag || undefined,
    renotify: !!m.tag,
    requireInteraction: actions.length > 0,
    data: { url: m.url || "/", cap: m.cap || "", requestId: m.request_id || "", kind: m.kind || "" },
    actions,
  });
}

self.addEventListener("push", (e) => {
  let m;
  try {
    m = e.data ? e.data.json() : { title: "claudectl", body: "" };
  } catch {
    m = { title: "claudectl", body: e.data ? e.data.text() : "" };
  }
  e.waitUntil(show(m));
});

// act posts the notification's action with its capability, and says how
// it went in a notification of the same tag (it replaces the request's).
async function act(n, action) {
  const d = n.data || {};
  let text;
  try {
    const r = await fetch("/push/act", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ cap: d.cap, action }),
      credentials: "omit",
    });
    const out = await r.json().catch(() => ({}));
    text = out.message || (r.ok ? "Done." : "The daemon refused: HTTP " + r.status);
  } catch (err) {
    text = "The daemon could not be reached: " + err + ". Open the page to answer.";
  }
  await self.registration.showNotification("claudectl", { body: text, tag: n.tag || undefined, data: { url: d.url || "/" } });
}

self.addEventListener("notificationclick", (e) => {
  const n = e.notification;
  n.close();
  if ((e.action === "allow" || e.action === "deny") && n.data && n.data.cap) {
    e.waitUntil(act(n, e.action));
    return;
  }
  const url = new URL((n.data && n.data.url) || "/", self.location.origin).href;
  e.waitUntil((async () => {
    const tabs = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
    for (const t of tabs) {
      if (new URL(t.url).origin === self.location.origin) {
        await t.focus();
        return t.navigate(url).catch(() => undefined);
      }
    }
    return self.clients.openWindow(url);
  })());
});
