// "Notify me on this device": the page subscribes this browser to Web
// Push with the daemon's VAPID key (its service worker, /sw.js, shows what
// the daemon pushes and answers Allow or Deny from the notification), and
// switches, per device, the kinds it hears of.
import { useEffect, useState } from "preact/hooks";
import { ConnectError } from "@connectrpc/connect";
import { notifications } from "./api";

const kindNames: Record<string, string> = {
  permission: "Permission requests",
  question: "Questions",
  budget: "Budget stops",
  session_end: "Sessions finished or failed",
};

// b64url is a key in base64url without padding, as the daemon takes it.
function b64url(b: ArrayBuffer | null): string {
  if (!b) return "";
  let s = "";
  for (const c of new Uint8Array(b)) s += String.fromCharCode(c);
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

// fromB64url is the applicationServerKey's bytes.
function fromB64url(s: string): Uint8Array {
  const t = atob(s.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((s.length + 3) % 4));
  return Uint8Array.from(t, (c) => c.charCodeAt(0));
}

// deviceName names this browser for its owner's list of devices.
function deviceName(): string {
  const ua = navigator.userAgent;
  const browser = /Edg\//.test(ua) ? "Edge" : /Firefox\//.test(ua) ? "Firefox" : /Chrome\//.test(ua) ? "Chrome" : /Safari\//.test(ua) ? "Safari" : "Browser";
  const os = /Android/.test(ua) ? "Android" : /iPhone|iPad/.test(ua) ? "iOS" : /Mac OS X/.test(ua) ? "macOS" : /Windows/.test(ua) ? "Windows" : /Linux/.test(ua) ? "Linux" : "";
  return os ? browser + " on " + os : browser;
}

export function PushSettings() {
  const supported = typeof navigator !== "undefined" && "serviceWorker" in navigator && typeof PushManager !== "undefined";
  const [key, setKey] = useState<string | null>(null); // null: not known yet, "": the daemon keeps no devices
  const [kinds, setKinds] = useState<string[]>([]);
  const [sub, setSub] = useState<{ id: bigint; kinds: string[] } | null>(null);
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");

  useEffect(() => {
    if (!supported) return;
    (async () => {
      try {
        const cfg = await notifications.getPushConfig({});
        setKinds(cfg.kinds);
        setKey(cfg.vapidPublicKey);
        if (!cfg.vapidPublicKey) return;
        const reg = await navigator.serviceWorker.register("/sw.js");
        const ps = await reg.pushManager.getSubscription();
        if (!ps) return;
        const mine = (await notifications.listPushSubscriptions({})).subscriptions.find((s) => s.endpoint === ps.endpoint);
        if (mine) setSub({ id: mine.id, kinds: mine.kinds });
      } catch (e) {
        setErr(ConnectError.from(e).rawMessage);
      }
    })();
  }, []);

  if (!supported || !key) return null;

  const run = async (f: () => Promise<void>) => {
    setBusy(true);
    setErr("");
    try {
      await f();
    } catch (e) {
      setErr(e instanceof Error && !(e instanceof ConnectError) ? e.message : ConnectError.from(e).rawMessage);
    }
    setBusy(false);
  };
  const subscribe = () => run(async () => {
    if ((await Notification.requestPermission()) !== "granted") throw new Error("notifications are blocked for this page in the browser's settings");
    const reg = await navigator.serviceWorker.register("/sw.js");
    await navigator.serviceWorker.ready;
    let ps = await reg.pushManager.getSubscription();
    if (!ps) ps = await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: fromB64url(key).buffer as ArrayBuffer });
    const res = await notifications.addPushSubscription({
      endpoint: ps.endpoint, p256dh: b64url(ps.getKey("p256dh")), auth: b64url(ps.getKey("auth")), kinds, device: deviceName(),
    });
    setSub({ id: res.subscription!.id, kinds: res.subscription!.kinds });
  });
  const stop = () => run(async () => {
    const reg = await navigator.serviceWorker.getRegistration("/");
    const ps = await reg?.pushManager.getSubscription();
    if (ps) {
      await notifications.removePushSubscription({ endpoint: ps.endpoint });
      await ps.unsubscribe();
    } else if (sub) {
      await notifications.removePushSubscription({ id: sub.id });
    }
    setSub(null);
  });
  const toggle = (k: string) => run(async () => {
    if (!sub) return;
    const next = sub.kinds.includes(k) ? sub.kinds.filter((x) => x !== k) : kinds.filter((x) => x === k || sub.kinds.includes(x));
    if (next.length === 0) throw new Error("keep one kind at least, or stop notifications on this device");
    const res = await notifications.updatePushSubscription({ id: sub.id, kinds: next });
    setSub({ id: sub.id, kinds: res.subscription!.kinds });
  });

  return (
    <div class="push" data-testid="push">
      {!sub && <button class="small" data-testid="push-subscribe" disabled={busy} onClick={subscribe}>Notify me on this device</button>}
      {sub && (
        <div data-testid="push-on">
          <span class="muted small">This device is notified of: </span>
          {kinds.map((k) => (
            <label key={k} class="small push-kind">
              <input type="checkbox" data-testid={"push-kind-" + k} disabled={busy} checked={sub.kinds.includes(k)} onChange={() => toggle(k)} />
              {kindNames[k] ?? k}
            </label>
          ))}
          <button class="small" data-testid="push-stop" disabled={busy} onClick={stop}>Stop notifying this device</button>
        </div>
      )}
      {err && <p class="error small" data-testid="push-error">{err}</p>}
    </div>
  );
}
