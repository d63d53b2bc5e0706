// The daemon's API from the browser: Connect over fetch, the same services
// every client uses, with the daemon's token as a bearer token.
import { createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { AuthService, BudgetService, HealthService, NotifyService, PermissionService, SessionService, TerminalService } from "./gen/claudectl/v1/claudectl_pb";

const tokenKey = "claudectl.token";

// The token lives in localStorage, the daemon's origin's own: a second tab
// (a card opened from a notification, say) is logged in too, and no other
// site can read it. A token the daemon refuses is removed at once.
export function getToken(): string | null {
  return localStorage.getItem(tokenKey);
}
export function setToken(t: string | null) {
  if (t === null) localStorage.removeItem(tokenKey);
  else localStorage.setItem(tokenKey, t);
}

// A page signed in with the identity provider holds no token: its
// requests carry the daemon's HttpOnly session cookie, and the CSRF value
// the daemon set beside it in a cookie only pages of its origin can read,
// which a request another site makes the browser send cannot carry.
export function csrfCookie(): string | null {
  const m = document.cookie.match(/(?:^|;\s*)claudectl_csrf=([^;]+)/);
  return m ? m[1] : null;
}

// signInConfigured asks the daemon whether it offers sign-in with an
// identity provider.
export async function signInConfigured(): Promise<boolean> {
  try {
    const r = await fetch("/auth/config");
    return r.ok && (await r.json()).oidc === true;
  } catch {
    return false;
  }
}

// signOut ends a sign-in: the daemon revokes its token and forgets the
// cookies.
export async function signOut() {
  await fetch("/auth/logout", { method: "POST", headers: { "Claudectl-Csrf": csrfCookie() ?? "" } });
}

const bearer: Interceptor = (next) => async (req) => {
  const t = getToken();
  if (t) req.header.set("Authorization", "Bearer " + t);
  else {
    const c = csrfCookie();
    if (c) req.header.set("Claudectl-Csrf", c);
  }
  req.header.set("Claudectl-Client", "page"); // the audit trail's client kind (a hint)
  return next(req);
};

const transport = createConnectTransport({ baseUrl: location.origin, interceptors: [bearer] });
export const sessions = createClient(SessionService, transport);
export const permissions = createClient(PermissionService, transport);
export const health = createClient(HealthService, transport);
export const auth = createClient(AuthService, transport);
export const budgets = createClient(BudgetService, transport);
export const notifications = createClient(NotifyService, transport);
export const terminals = createClient(TerminalService, transport);

// clientName names this page in decisions and interrupts ("client:web").
export const clientName = "web";
