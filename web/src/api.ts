// The daemon's API from the browser: Connect over fetch, the same services
// every client uses, with the daemon's token as a bearer token.
import { createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { HealthService, PermissionService, SessionService } from "./gen/claudectl/v1/claudectl_pb";

const tokenKey = "claudectl.token";

// The token lives in sessionStorage: it survives a reload of the tab but
// not the tab itself, and no other site can read it.
export function getToken(): string | null {
  return sessionStorage.getItem(tokenKey);
}
export function setToken(t: string | null) {
  if (t === null) sessionStorage.removeItem(tokenKey);
  else sessionStorage.setItem(tokenKey, t);
}

const auth: Interceptor = (next) => async (req) => {
  const t = getToken();
  if (t) req.header.set("Authorization", "Bearer " + t);
  return next(req);
};

const transport = createConnectTransport({ baseUrl: location.origin, interceptors: [auth] });
export const sessions = createClient(SessionService, transport);
export const permissions = createClient(PermissionService, transport);
export const health = createClient(HealthService, transport);

// clientName names this page in decisions and interrupts ("client:web").
export const clientName = "web";
