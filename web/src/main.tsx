// The claudectl web page: the inbox, the sessions, a session's
// conversation and the rules, live over the daemon's API (see README.md).
import { createContext, render } from "preact";
import { useContext, useEffect, useMemo, useRef, useState } from "preact/hooks";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  Behavior, RuleScope, SessionStatus, type TranscriptEntry, type BudgetHold, type Decision, type GetChangesResponse, type PermissionRequest, type Rule, type Session,
} from "./gen/claudectl/v1/claudectl_pb";
import { auth, budgets, clientName, csrfCookie, getToken, permissions, sessions, setToken, signInConfigured, signOut, terminals } from "./api";
import {
  Log, buildConversation, can, decisionWords, fieldOf, filterSessions, foldLines, heldSessions, itemAt, mergeInbox, mergeSessions, parseDollars,
  parseRoute, patchLines, questionOptions, requestTarget, routingText, sessionHref, sessionTitle, shortID, statusName, statusNames,
  tokenFromHash, toolDiff, ts, typingSignal, type Inbox, type Item, type Settled,
} from "./logic";
import { highlight, languageOf, renderMarkdown } from "./markdown";
import { PushSettings } from "./push";
import { SearchView } from "./search";
import { Title } from "./ui";
import "./style.css";

// --- connection state shared by the views ---

type Conn = "ok" | "connecting" | "gone" | "auth";

// retry runs a stream again after it ends, backing off, until the page
// logs out; it reports the connection state.
async function retry(run: (signal: AbortSignal) => Promise<void>, signal: AbortSignal, onState: (c: Conn) => void) {
  let delay = 250;
  while (!signal.aborted) {
    try {
      await run(signal);
      delay = 250;
    } catch (e) {
      if (signal.aborted) return;
      const ce = ConnectError.from(e);
      if (ce.code === Code.Unauthenticated) {
        onState("auth");
        return;
      }
      onState("gone");
    }
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 4000);
  }
}

// --- who the token is ---

// Me is Whoami's answer, null when the daemon does not say (an older
// daemon); views hide what the token cannot do with useCan.
type Me = { user: string; token: string; role: string; permissions: string[] } | null;
const MeContext = createContext<Me | undefined>(undefined);

// useCan returns whether the token may do what needs permission p: false
// until the daemon said who it is.
function useCan(): (p: string) => boolean {
  const me = useContext(MeContext);
  return (p) => me !== undefined && can(me === null ? null : me.permissions, p);
}

// --- the app ---

// cookieToken stands for a sign-in's cookie in the token state.
const cookieToken = "(signed in)";

function App() {
  const [token, setTok] = useState<string | null>(() => {
    const { token, rest } = tokenFromHash(location.hash);
    if (token !== null) {
      setToken(token);
      history.replaceState(null, "", location.pathname + location.search + rest);
    }
    // Signed in with the identity provider: the cookie is the token.
    return getToken() ?? (csrfCookie() ? cookieToken : null);
  });
  const [conn, setConn] = useState<Conn>("connecting");
  const [list, setList] = useState<Session[]>([]);
  const [inbox, setInbox] = useState<Inbox>({ pending: [], settled: new Map() });
  const [route, setRoute] = useState(location.hash || "#/inbox");
  const [me, setMe] = useState<Me | undefined>(undefined);
  const [holds, setHolds] = useState<BudgetHold[]>([]);

  useEffect(() => {
    const f = () => setRoute(location.hash || "#/inbox");
    addEventListener("hashchange", f);
    return () => removeEventListener("hashchange", f);
  }, []);

  useEffect(() => {
    if (!token) return;
    const ac = new AbortController();
    setConn("connecting");
    const state = (c: Conn) => {
      setConn(c);
      if (c === "auth") {
        setToken(null);
        setTok(null);
      }
    };
    setMe(undefined);
    auth.whoami({}, { signal: ac.signal }).then(
      (w) => setMe({ user: w.user, token: w.token, role: w.role, permissions: w.permissions }),
      (e) => {
        const ce = ConnectError.from(e);
        if (ce.code === Code.Unimplemented) setMe(null); // an older daemon: every token may do everything
        else if (ce.code === Code.Unauthenticated) state("auth");
      });
    retry(async (signal) => {
      for await (const ch of sessions.watchSessions({}, { signal })) {
        setConn("ok");
        setList((l) => mergeSessions(l, ch));
      }
    }, ac.signal, state);
    retry(async (signal) => {
      for await (const ch of permissions.watchPending({}, { signal })) {
        setInbox((b) => {
          const next = mergeInbox(b, ch);
          if (!ch.snapshot && ch.requests.length && document.hidden) notify(ch.requests[0]);
          return next;
        });
      }
    }, ac.signal, state);
    return () => ac.abort();
  }, [token]);

  // The holds of the sessions a spend cap holds, read again whenever
  // which sessions are held, or what they keep, changes.
  const heldKey = list.filter((s) => s.status === SessionStatus.BUDGET).map((s) => s.id + ":" + s.queuedPrompts + ":" + String(s.totals?.costUsd)).join(",");
  useEffect(() => {
    if (!token || !heldKey) {
      setHolds([]);
      return;
    }
    budgets.getBudget({}).then((b) => setHolds(b.holds), () => {});
  }, [token, heldKey]);
  const held = heldSessions(list, holds);

  useEffect(() => {
    const n = inbox.pending.length + held.length;
    document.title = n ? `(${n}) claudectl` : "claudectl";
  }, [inbox.pending.length, held.length]);

  if (!token || conn === "auth") return <Login wrong={conn === "auth" && token !== cookieToken} onToken={(t) => { setToken(t); setTok(t); setConn("connecting"); }} />;

  const r = parseRoute(route);
  const on = (v: string) => (r.view === v ? "on" : "");
  const connText = conn === "ok" ? "live" : conn === "gone" ? "daemon unreachable, retrying…" : "connecting…";
  return (
    <MeContext.Provider value={me}>
    <div class="app">
      <header>
        <strong class="brand">claudectl</strong>
        <nav>
          <a href="#/inbox" class={on("inbox")}>Inbox <span class="count" data-testid="inbox-count">{inbox.pending.length + held.length}</span></a>
          <a href="#/sessions" class={on("sessions")}>Sessions</a>
          <a href="#/search" class={on("search")}>Search</a>
          <a href="#/activity" class={on("activity")}>Activity</a>
          <a href="#/rules" class={on("rules")}>Rules</a>
        </nav>
        {me && <span class="muted small me" data-testid="me" title={"token " + me.token + ": " + me.permissions.join(", ")}>{me.user} ({me.role})</span>}
        <button class="small" data-testid="logout" onClick={async () => {
          if (token === cookieToken) await signOut();
          setToken(null);
          setTok(null);
        }}>{token === cookieToken ? "Sign out" : "Log out"}</button>
        <span class={"conn " + conn} data-testid="conn" title={connText}><span class="conn-text">{connText}</span></span>
      </header>
      {conn === "gone" && <div class="banner error" data-testid="gone">The daemon does not answer. The page reconnects by itself and catches up.</div>}
      <main>
        {r.view === "session" ? <SessionView id={r.id} seq={r.seq} session={list.find((s) => s.id === r.id)} inbox={inbox} hold={holds.find((h) => h.sessionId === r.id)} />
          : r.view === "sessions" ? <SessionsView list={list} />
          : r.view === "rules" ? <RulesView list={list} />
          : r.view === "search" ? <SearchView q={r.q} />
          : r.view === "activity" ? <Lazy load={() => import("./activity").then((m) => m.ActivityView)} />
          : <InboxView inbox={inbox} list={list} held={held} />}
      </main>
    </div>
    </MeContext.Provider>
  );
}

// Lazy renders a component loaded on first use (its own chunk: the
// activity plots and their chart library are no part of the first load).
function Lazy(props: { load: () => Promise<() => preact.JSX.Element> }) {
  const [C, setC] = useState<(() => preact.JSX.Element) | null>(null);
  const [err, setErr] = useState("");
  useEffect(() => {
    props.load().then((c) => setC(() => c), (e) => setErr(String(e)));
  }, []);
  if (err) return <p class="error">The page could not load this view: {err}</p>;
  return C ? <C /> : <p class="muted">Loading…</p>;
}

function notify(r: PermissionRequest) {
  if (typeof Notification === "undefined" || Notification.permission !== "granted") return;
  new Notification("claudectl: " + r.toolName + " waits for you", { body: r.description || summary(r), tag: r.requestId });
}

function Login(props: { wrong: boolean; onToken: (t: string) => void }) {
  const [v, setV] = useState("");
  const [sso, setSSO] = useState(false);
  useEffect(() => { signInConfigured().then(setSSO); }, []);
  return (
    <form class="login" data-testid="login" onSubmit={(e) => { e.preventDefault(); if (v.trim()) props.onToken(v.trim()); }}>
      <h1>claudectl</h1>
      {props.wrong && <p class="error" data-testid="login-wrong">The daemon refused that token.</p>}
      <p>Open the address <code>claudectl serve</code> printed, or paste the daemon's token (the file <code>token</code> in its data directory).</p>
      <input type="password" aria-label="token" placeholder="token" value={v} onInput={(e) => setV((e.target as HTMLInputElement).value)} autofocus />
      <button type="submit">Log in</button>
      {sso && <p><a class="button" href="/auth/login" data-testid="sign-in">Sign in with your identity provider</a></p>}
    </form>
  );
}

// --- inbox and cards ---

function InboxView(props: { inbox: Inbox; list: Session[]; held: { session: Session; hold?: BudgetHold }[] }) {
  const cards = props.inbox.pending;
  const focus = useCardKeys(cards);
  return (
    <section>
      <h2>Waiting for you</h2>
      <NotifyButton />
      <PushSettings />
      {cards.length === 0 && props.held.length === 0 && <p class="muted" data-testid="inbox-empty">Nothing waits for you.</p>}
      {props.held.map((h) => <BudgetCard key={h.session.id} session={h.session} hold={h.hold} />)}
      {cards.map((r, i) => (
        <Card key={r.requestId} request={r} focused={i === focus} session={props.list.find((s) => s.id === r.sessionId)} />
      ))}
      <Recent settled={props.inbox.settled} list={props.list} />
    </section>
  );
}

// Recent lists the requests settled while the page watched, newest first:
// a card that vanished says here who answered it.
function Recent(props: { settled: Inbox["settled"]; list: Session[] }) {
  const recent = [...props.settled.values()].reverse().slice(0, 10);
  if (recent.length === 0) return null;
  return (
    <div class="recent" data-testid="recent">
      <h3>Just settled</h3>
      <ul>
        {recent.map((st: Settled) => (
          <li key={st.requestId} data-testid="settled" data-request={st.requestId}>
            {st.request && <><strong>{st.request.toolName}</strong> <code class="target">{requestTarget(st.request)}</code>{" — "}</>}
            {st.outcome} by {st.by}
            <div class="muted small"><Title id={st.sessionId} session={props.list.find((s) => s.id === st.sessionId)} link /> · {new Date(ts(st.at)).toLocaleTimeString()}</div>
          </li>
        ))}
      </ul>
    </div>
  );
}

function NotifyButton() {
  const [p, setP] = useState(typeof Notification === "undefined" ? "denied" : Notification.permission);
  if (p !== "default") return null;
  return <button class="small" onClick={async () => setP(await Notification.requestPermission())}>Notify me when something waits</button>;
}

// useCardKeys: j/k move the focus among the cards, a/d allow or deny the
// focused one (clicking its button, so the same path as a tap).
function useCardKeys(cards: PermissionRequest[]) {
  const [focus, setFocus] = useState(0);
  // Read when the key comes, not when the listener was added: effects run
  // after the paint, so a key pressed as soon as a new card shows would
  // otherwise count the cards without it (j did nothing).
  const count = useRef(cards.length);
  count.current = cards.length;
  useEffect(() => {
    const f = (e: KeyboardEvent) => {
      const t = e.target as HTMLElement;
      if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT")) return;
      if (e.key === "j") setFocus((x) => Math.min(x + 1, count.current - 1));
      else if (e.key === "k") setFocus((x) => Math.max(x - 1, 0));
      else if (e.key === "a" || e.key === "d") {
        const el = document.querySelector(`.card.focused [data-key="${e.key}"]`) as HTMLElement | null;
        el?.click();
      } else return;
      e.preventDefault();
    };
    addEventListener("keydown", f);
    return () => removeEventListener("keydown", f);
  }, []);
  return Math.min(focus, Math.max(cards.length - 1, 0));
}

function summary(r: PermissionRequest): string {
  const input = parseJSON(r.input);
  if (r.toolName === "Bash") return input?.command ?? "";
  return input?.file_path ?? input?.path ?? input?.pattern ?? input?.url ?? "";
}

function parseJSON(b: Uint8Array): any {
  try {
    return JSON.parse(new TextDecoder().decode(b));
  } catch {
    return null;
  }
}

function Card(props: { request: PermissionRequest; focused?: boolean; session?: Session; settledBy?: string }) {
  const r = props.request;
  const [msg, setMsg] = useState("");
  const [err, setErr] = useState("");
  const [busy, setBusy] = useState(false);
  const [answers, setAnswers] = useState<Record<string, string[]>>({});
  const [other, setOther] = useState<Record<string, string>>({});
  const [counted, setCounted] = useState("");
  const input = parseJSON(r.input);
  const diff = toolDiff(r.toolName, input);
  const decide = async (behavior: Behavior, always = false) => {
    setBusy(true);
    setErr("");
    const ans: Record<string, string> = {};
    for (const q of r.questions) {
      const picked = [...(answers[q.question] ?? [])];
      if (other[q.question]?.trim()) picked.push(other[q.question].trim());
      if (picked.length) ans[q.question] = picked.join(", ");
    }
    try {
      // A message is a denial's (it tells Claude why): the daemon refuses one with an allow.
      const res = await permissions.decide({ requestId: r.requestId, behavior, always, message: behavior === Behavior.DENY ? msg : "", answers: ans, client: clientName });
      if (res.awaitingApprovals) {
        // A two-person rule: the allow counts, the request waits for another person.
        setCounted(`Your allow counts: ${res.decision?.approvedBy.length ?? 1} of ${res.approvalsNeeded}; it waits for another person.`);
        setBusy(false);
      }
    } catch (e) {
      setErr(ConnectError.from(e).rawMessage);
      setBusy(false);
    }
  };
  if (props.settledBy) {
    return <div class="card settled" data-testid="card-settled">{r.toolName}: answered by {props.settledBy}</div>;
  }
  const allowed = useCan();
  const pick = (q: string, opt: string, multi: boolean) =>
    setAnswers((a) => {
      const cur = a[q] ?? [];
      return { ...a, [q]: multi ? (cur.includes(opt) ? cur.filter((x) => x !== opt) : [...cur, opt]) : [opt] };
    });
  return (
    <div class={"card" + (props.focused ? " focused" : "")} data-testid="card" data-request={r.requestId}>
      <div class="card-head">
        <strong>{r.toolName}</strong>
        {props.session && <span class="muted"><Title id={r.sessionId} session={props.session} link /> · {props.session.cwd}</span>}
      </div>
      {r.description && <p>{r.description}</p>}
      {r.routing && <p class="muted small routing" data-testid="routing">{routingText(r)}</p>}
      {r.toolName === "Bash" && <pre class="cmd">{input?.command}</pre>}
      {diff && <Diff lines={diff} lang={languageOf(input?.file_path ?? "")} />}
      {r.toolName !== "Bash" && !diff && r.questions.length === 0 && <pre class="input">{JSON.stringify(input, null, 2)}</pre>}
      {r.questions.map((q) => (
        <fieldset class="question" key={q.question}>
          <legend>{q.header ? q.header + ": " : ""}{q.question}</legend>
          {questionOptions(input, q.question, q.options).map(({ label: o, description }) => (
            <label key={o}>
              <input type={q.multiSelect ? "checkbox" : "radio"} name={r.requestId + q.question}
                checked={(answers[q.question] ?? []).includes(o)} onChange={() => pick(q.question, o, q.multiSelect)} />
              <span>{o}{description && <span class="muted option-desc" data-testid="option-description"> — {description}</span>}</span>
            </label>
          ))}
          <input type="text" placeholder="Other (free text)" value={other[q.question] ?? ""}
            onInput={(e) => setOther({ ...other, [q.question]: (e.target as HTMLInputElement).value })} />
        </fieldset>
      ))}
      {!allowed("decide") && <p class="muted small" data-testid="cannot-decide">This token cannot answer requests (it needs the approver or admin role).</p>}
      {allowed("decide") && <div class="actions">
        <button data-key="a" disabled={busy} onClick={() => decide(Behavior.ALLOW)}>{r.questions.length ? "Answer" : "Allow once"}</button>
        {(r.alwaysRules.length > 0 || r.alwaysSession.length > 0) && (
          <button disabled={busy} data-testid="always" onClick={() => decide(Behavior.ALLOW, true)}
            title="stores the rule shown">Always allow</button>
        )}
        <input class="deny-msg" type="text" placeholder="why not (optional)" value={msg} onInput={(e) => setMsg((e.target as HTMLInputElement).value)} />
        <button data-key="d" class="deny" disabled={busy} onClick={() => decide(Behavior.DENY)}>Deny</button>
      </div>}
      {(r.alwaysRules.length > 0 || r.alwaysSession.length > 0) && (
        <p class="muted small" data-testid="always-rules">
          Always stores: {r.alwaysRules.map((x) => x.pattern + " (" + scopeName(x.scope) + ")").concat(r.alwaysSession).join("; ")}
        </p>
      )}
      {counted && <p class="small" data-testid="counted">{counted}</p>}
      {err && <p class="error">{err}</p>}
    </div>
  );
}

function scopeName(s: RuleScope): string {
  return s === RuleScope.SESSION ? "this session" : s === RuleScope.PROJECT ? "this project" : "everywhere";
}

// Diff shows a tool's change, each line highlighted as the file's
// language (lang, "" for none).
function Diff(props: { lines: { op: string; text: string }[]; lang: string }) {
  return (
    <pre class="diff" data-testid="diff">
      {props.lines.map((l, i) => (
        <div key={i} class={l.op === "+" ? "add" : l.op === "-" ? "del" : ""}>
          <span class="op">{l.op}</span> <span dangerouslySetInnerHTML={{ __html: highlight(l.text, props.lang) }} />
        </div>
      ))}
    </pre>
  );
}

// BudgetCard is a session held at a spend cap: its turn ended at the cap,
// no other starts, and what it was sent waits. An approver raises the cap
// (for today, for a daily one) or lets it run one more turn.
function BudgetCard(props: { session: Session; hold?: BudgetHold }) {
  const s = props.session;
  const h = props.hold;
  const [v, setV] = useState("");
  const [err, setErr] = useState("");
  const [busy, setBusy] = useState(false);
  const act = async (req: { limitUsd?: number; oneTurn?: boolean }) => {
    setBusy(true);
    setErr("");
    try {
      await budgets.raiseBudget({ sessionId: s.id, client: clientName, ...req });
    } catch (e) {
      setErr(ConnectError.from(e).rawMessage);
    }
    setBusy(false);
  };
  const raise = () => {
    const n = parseDollars(v);
    if (n === null) setErr("give the new cap in dollars, such as 10 or 2.50");
    else act({ limitUsd: n });
  };
  const capName = h?.cap?.cap ?? "spend";
  return (
    <div class="card budget" data-testid="budget-card" data-session={s.id}>
      <div class="card-head">
        <strong>Waiting for budget</strong>
        <a href={"#/s/" + encodeURIComponent(s.id)} class="muted">{s.cwd}</a>
      </div>
      <p data-testid="budget-detail">{h?.detail ?? "a spend cap holds this session"}</p>
      {s.queuedPrompts > 0 && <p class="muted small">{s.queuedPrompts === 1 ? "1 prompt waits" : `${s.queuedPrompts} prompts wait`} to run once it is released.</p>}
      <div class="actions">
        <input aria-label="new cap in dollars" placeholder={`raise the ${capName} cap to $…`} value={v}
          onInput={(e) => setV((e.target as HTMLInputElement).value)} onKeyDown={(e) => { if (e.key === "Enter") raise(); }} />
        <button disabled={busy} onClick={raise}>Raise the cap</button>
        <button disabled={busy} onClick={() => act({ oneTurn: true })}>Allow one more turn</button>
      </div>
      {err && <p class="error" data-testid="budget-error">{err}</p>}
    </div>
  );
}

// Markdown is Claude's text rendered (markdown.ts: no HTML of the text
// runs or loads anything), parsed again only when the text changed.
function Markdown(props: { text: string }) {
  const html = useMemo(() => renderMarkdown(props.text), [props.text]);
  return <div class="md" dangerouslySetInnerHTML={{ __html: html }} />;
}

// Folded shows a long output's first lines and a button for the rest.
function Folded(props: { text: string; class: string }) {
  const [open, setOpen] = useState(false);
  const f = foldLines(props.text);
  if (open || f.hidden === 0) return <pre class={props.class}>{props.text}</pre>;
  return (
    <div class="folded" data-testid="folded">
      <pre class={props.class}>{f.head}</pre>
      <button class="small" onClick={() => setOpen(true)}>Show {f.hidden} more lines</button>
    </div>
  );
}

// Changes shows what a session run in a worktree of its own changed
// against the commit it started from, and merges or discards it.
function Changes(props: { id: string; session: Session }) {
  const wt = props.session.worktree!;
  const [open, setOpen] = useState(false);
  const [ch, setCh] = useState<GetChangesResponse | null>(null);
  const [err, setErr] = useState("");
  const [note, setNote] = useState("");
  const [busy, setBusy] = useState(false);
  const load = async () => {
    setErr("");
    try {
      setCh(await sessions.getChanges({ sessionId: props.id }));
    } catch (e) {
      setErr(ConnectError.from(e).rawMessage);
    }
  };
  // Read when opened, and again when the session changed (a turn wrote).
  useEffect(() => { if (open && !wt.discarded) load(); }, [open, String(props.session.updatedAt?.seconds), props.session.updatedAt?.nanos]);
  const act = async (f: () => Promise<string>) => {
    setBusy(true);
    setErr("");
    setNote("");
    try {
      setNote(await f());
    } catch (e) {
      setErr(ConnectError.from(e).rawMessage);
    }
    setBusy(false);
  };
  const base = wt.baseBranch || "commit " + wt.baseCommit.slice(0, 12);
  return (
    <details class="changes" data-testid="changes" open={open} onToggle={(e) => setOpen((e.target as HTMLDetailsElement).open)}>
      <summary>Changes · branch <code>{wt.branch}</code> from {base}{wt.discarded ? " · discarded" : ""}</summary>
      {wt.discarded ? <p class="muted">Its worktree and branch were discarded.</p> : (
        <>
          <p class="muted small">In <code>{wt.path}</code></p>
          {ch && ch.files.length === 0 && <p class="muted" data-testid="no-changes">No changes.</p>}
          {ch && ch.files.length > 0 && (
            <ul class="files" data-testid="changed-files">
              {ch.files.map((f) => (
                <li key={f.path} data-testid="changed-file" data-path={f.path}>
                  <span class="status">{f.status}</span> <code>{f.oldPath ? f.oldPath + " → " + f.path : f.path}</code>{" "}
                  <span class="muted">{f.binary ? "binary" : `+${f.additions} −${f.deletions}`}</span>
                </li>
              ))}
            </ul>
          )}
          {ch && ch.diff && (
            <pre class="diff patch" data-testid="patch">
              {patchLines(ch.diff).map((l, i) => <div key={i} class={l.kind}>{l.text}</div>)}
            </pre>
          )}
          {ch?.truncated && <p class="muted small">The diff was cut at 4 MiB.</p>}
          <div class="actions">
            <button class="small" disabled={busy} onClick={load}>Refresh</button>
            <button disabled={busy || !wt.baseBranch} onClick={() => act(async () => {
              const m = await sessions.mergeChanges({ sessionId: props.id, client: clientName });
              load();
              return `Merged into ${m.baseBranch} (commit ${m.commit.slice(0, 12)}): ${m.files.length} file${m.files.length === 1 ? "" : "s"}.`;
            })}>Merge into {wt.baseBranch || "its branch"}</button>
            <button class="deny" disabled={busy} onClick={() => act(async () => {
              await sessions.discardWorktree({ sessionId: props.id, client: clientName });
              return "Discarded its worktree and branch.";
            })}>Discard</button>
          </div>
        </>
      )}
      {note && <p data-testid="changes-note">{note}</p>}
      {err && <p class="error" data-testid="changes-error">{err}</p>}
    </details>
  );
}

// --- sessions ---

const modes = ["default", "acceptEdits", "plan", "bypassPermissions"];

function SessionsView(props: { list: Session[] }) {
  const allowed = useCan();
  const [status, setStatus] = useState("");
  const [cwd, setCwd] = useState("");
  const shown = filterSessions(props.list, status, cwd);
  return (
    <section>
      <h2>Sessions</h2>
      {allowed("sessions.operate") && <NewSession open={props.list.length === 0} />}
      <div class="filters">
        <select aria-label="status" value={status} onChange={(e) => setStatus((e.target as HTMLSelectElement).value)}>
          <option value="">every status</option>
          {Object.values(statusNames).map((s) => <option key={s} value={s}>{s}</option>)}
        </select>
        <input aria-label="cwd filter" placeholder="directory contains…" value={cwd} onInput={(e) => setCwd((e.target as HTMLInputElement).value)} />
      </div>
      <ul class="sessions" data-testid="sessions">
        {shown.map((s) => (
          <li key={s.id} data-testid="session-row" data-session={s.id}>
            <a href={sessionHref(s.id)}>
              <span class="row-title"><Title id={s.id} session={s} /></span>
              <span class={"status " + statusName(s.status).split(" ")[0]}>{statusName(s.status)}</span>
              {s.terminal && <span class="muted small" data-testid="terminal-badge" title="started by hand in a terminal, through claudectl's hook: read-only here"> terminal</span>}
              <span class="cwd">{s.cwd}</span>
              <span class="muted">{s.model || "default model"}</span>
              <span>${(s.totals?.costUsd ?? 0).toFixed(4)}</span>
              <span class="muted">{new Date(ts(s.updatedAt)).toLocaleTimeString()}</span>
              {s.parentId && <span class="muted">fork of {shortID(s.parentId)}</span>}
              {s.worktree && <span class="muted">branch {s.worktree.branch}</span>}
            </a>
          </li>
        ))}
      </ul>
      {shown.length === 0 && <p class="muted">No session{status || cwd ? " matches" : " yet"}.</p>}
    </section>
  );
}

// NewSession is the form to start a session: folded once sessions exist,
// so that on a phone the list is what the page shows first.
function NewSession(props: { open: boolean }) {
  const [f, setF] = useState({ cwd: "", model: "", permission_mode: "default", prompt: "", worktree: false, branch: "" });
  const [errs, setErrs] = useState<Record<string, string>>({});
  const [busy, setBusy] = useState(false);
  const set = (k: string) => (e: Event) => setF({ ...f, [k]: (e.target as HTMLInputElement).value });
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setErrs({});
    try {
      const res = await sessions.createSession({
        options: { cwd: f.cwd, model: f.model, permissionMode: f.permission_mode, includePartialMessages: true,
          worktree: f.worktree ? f.branch.trim() || "auto" : "" },
        prompt: f.prompt,
      });
      location.hash = "#/s/" + encodeURIComponent(res.session!.id);
    } catch (err) {
      const m = ConnectError.from(err).rawMessage;
      const field = fieldOf(m, ["cwd", "model", "permission_mode", "mode", "worktree", "prompt"]) ?? "form";
      setErrs({ [field === "mode" ? "permission_mode" : field]: m });
    }
    setBusy(false);
  };
  const err = (k: string) => errs[k] && <span class="error field-error" data-testid={"error-" + k}>{errs[k]}</span>;
  return (
    <details class="new" open={props.open}>
      <summary>Start a session</summary>
      <form onSubmit={submit} data-testid="new-session">
        <label>Directory <input name="cwd" value={f.cwd} onInput={set("cwd")} placeholder="/absolute/path" required />{err("cwd")}</label>
        <label>Model <input name="model" value={f.model} onInput={set("model")} placeholder="default" />{err("model")}</label>
        <label>Permission mode
          <select name="permission_mode" value={f.permission_mode} onChange={set("permission_mode")}>
            {modes.map((m) => <option key={m}>{m}</option>)}
          </select>{err("permission_mode")}
        </label>
        <label class="check">
          <span><input type="checkbox" name="worktree" checked={f.worktree} onChange={(e) => setF({ ...f, worktree: (e.target as HTMLInputElement).checked })} />
            {" "}In a git worktree of its own (a branch of its own; the repository's files stay as they are)</span>
          {f.worktree && <input name="branch" aria-label="branch" value={f.branch} onInput={set("branch")} placeholder="branch (default claudectl/<short id>)" />}
          {err("worktree")}
        </label>
        <label>First prompt <textarea name="prompt" value={f.prompt} onInput={set("prompt")} rows={2} />{err("prompt")}</label>
        <button type="submit" disabled={busy}>Start</button>
        {err("form")}
      </form>
    </details>
  );
}

// SessionView follows one session: its log from the store, then live,
// resubscribing from the last seq after any drop (nothing missed or
// doubled: Log.apply).
function SessionView(props: { id: string; seq: bigint | null; session?: Session; inbox: Inbox; hold?: BudgetHold }) {
  const [version, setVersion] = useState(0);
  const log = useMemo(() => new Log(), [props.id]);
  const [err, setErr] = useState("");
  useEffect(() => {
    const ac = new AbortController();
    let pending = false;
    const bump = () => {
      if (pending) return;
      pending = true;
      requestAnimationFrame(() => { pending = false; setVersion((v) => v + 1); });
    };
    retry(async (signal) => {
      for await (const res of sessions.subscribe({ sessionId: props.id, afterSeq: log.last }, { signal })) {
        setErr("");
        if (res.event && log.apply(res.event) === "gap") throw new Error("gap"); // resubscribe from log.last
        bump();
      }
      await new Promise((r) => setTimeout(r, 1000)); // the session ended: look again later
    }, ac.signal, (c) => c === "gone" && setErr("reconnecting…"));
    return () => ac.abort();
  }, [props.id]);
  // The items and the last seq they were built from (the log may have
  // grown since: it is filled outside rendering).
  const [items, builtTo] = useMemo(() => [buildConversation(log.events), log.last] as const, [version, log]);
  const s = props.session;
  const cards = props.inbox.pending.filter((r) => r.sessionId === props.id);
  const focus = useCardKeys(cards);
  const bottom = useRef<HTMLDivElement>(null);
  const conv = useRef<HTMLDivElement>(null);
  // Opened at an event (a search hit): scrolled to it once the log holds
  // it, and marked; else kept at the bottom as the conversation grows.
  const [shown, setShown] = useState<string | null>(null);
  useEffect(() => {
    if (props.seq === null) {
      bottom.current?.scrollIntoView({ block: "end" });
      return;
    }
    const key = props.id + "@" + props.seq;
    if (shown === key || builtTo < props.seq) return;
    const i = itemAt(items, props.seq);
    const el = i >= 0 ? conv.current?.querySelector(`[data-item="${i}"]`) : null;
    if (!el) return;
    el.classList.add("target");
    el.scrollIntoView({ block: "center" });
    if (el instanceof HTMLDetailsElement) el.open = true;
    // The match may be past the fold of a long output: unfolded.
    (el.querySelector('[data-testid="folded"] button') as HTMLButtonElement | null)?.click();
    setShown(key);
  }, [items.length, props.seq, version]);
  return (
    <section class="session" data-testid="session-view" data-last-seq={String(log.last)}
      data-last-event-ms={String(ts(log.events[log.events.length - 1]?.time))}>
      <h2 class="session-head">{sessionTitle(s).text ? <Title id={props.id} session={s} /> : s ? s.cwd : props.id}</h2>
      {s && (
        <p class="muted">
          {sessionTitle(s).text && <>{s.cwd} · <code class="sid">{shortID(props.id)}</code> · </>}
          <span class={"status " + statusName(s.status).split(" ")[0]} data-testid="session-status">{statusName(s.status)}</span>
          {" · "}{s.model || "default model"} · {s.permissionMode || "default"} · ${(s.totals?.costUsd ?? 0).toFixed(4)} ·{" "}
          {String(s.totals?.inputTokens ?? 0n)} in / {String(s.totals?.outputTokens ?? 0n)} out tokens
          {s.parentId && <> · fork of <a href={"#/s/" + s.parentId}>{s.parentId.slice(0, 8)}</a></>}
        </p>
      )}
      {s?.worktree && <Changes id={props.id} session={s} />}
      {s?.terminal && <TerminalTranscript id={props.id} version={s.updatedAt} />}
      {err && <p class="muted">{err}</p>}
      <div class="conversation" data-testid="conversation" ref={conv}>
        {items.map((it, i) => <ItemView key={String(it.seq) + it.kind} item={it} inbox={props.inbox} index={i} />)}
      </div>
      {cards.map((r, i) => <Card key={r.requestId} request={r} focused={i === focus} />)}
      {s?.status === SessionStatus.BUDGET && <BudgetCard session={s} hold={props.hold} />}
      <div ref={bottom} />
      {!s?.terminal && <Controls id={props.id} session={s} />}
    </section>
  );
}

// TerminalTranscript shows a session started by hand in a terminal: its
// transcript, Claude Code's own file, read by the daemon again whenever the
// session changes; read-only (it is driven from its terminal).
function TerminalTranscript(props: { id: string; version?: { seconds: bigint; nanos: number } }) {
  const [entries, setEntries] = useState<TranscriptEntry[]>([]);
  const [err, setErr] = useState("");
  useEffect(() => {
    terminals.getTerminalTranscript({ sessionId: props.id }).then((r) => { setEntries(r.entries); setErr(""); },
      (e) => setErr(ConnectError.from(e).rawMessage));
  }, [props.id, ts(props.version)]);
  return (
    <div class="conversation terminal" data-testid="terminal-transcript">
      <p class="muted small">Started by hand in a terminal (claudectl hook): its permission requests come here; it is driven from its terminal.</p>
      {err && <p class="error small">{err}</p>}
      {entries.map((e, i) => (
        <div key={i} class={"item " + e.kind} data-testid="transcript-entry">
          {e.kind === "tool_use" || e.kind === "tool_result" ? <pre class="input">{e.text}</pre> : <Markdown text={e.text} />}
        </div>
      ))}
    </div>
  );
}

function ItemView(props: { item: Item; inbox: Inbox; index?: number }) {
  const it = props.item;
  const at = props.index === undefined ? {} : { "data-item": String(props.index), "data-seq": String(it.seq) };
  switch (it.kind) {
    case "user":
      return <div class="msg user" {...at}><pre>{it.text}</pre></div>;
    case "text":
      return <div class="msg assistant" data-testid="assistant-text" {...at}><Markdown text={it.text} /></div>;
    case "thinking":
      return <details class="thinking" {...at}><summary>thinking</summary><pre>{it.text}</pre></details>;
    case "tool": {
      const diff = toolDiff(it.name, it.input);
      return (
        <details class={"tool" + (it.isError ? " failed" : "")} data-testid="tool" open={it.name === "Task"} {...at}>
          <summary>{it.name} {it.name === "Bash" ? <code>{it.input?.command}</code> : <span class="muted">{it.input?.file_path ?? it.input?.description ?? ""}</span>}</summary>
          {diff ? <Diff lines={diff} lang={languageOf(it.input?.file_path ?? "")} /> : <pre class="input">{JSON.stringify(it.input, null, 2)}</pre>}
          {it.result !== undefined && <Folded class="result" text={it.result} />}
          {it.children.map((c) => <ItemView key={String(c.seq) + c.kind} item={c} inbox={props.inbox} />)}
        </details>
      );
    }
    case "permission": {
      const settled = props.inbox.settled.get(it.request.requestId);
      const res = it.resolution;
      if (!res && !settled) return null; // a pending one is shown as a card below
      return <div class="msg notice" data-testid="permission-item" {...at}>{it.request.toolName}: {res?.behavior ?? settled?.outcome} by {res?.by ?? settled?.by}{res?.message ? " — " + res.message : ""}</div>;
    }
    case "usage":
      return <div class="usage muted" {...at}>turn: ${it.costUsd.toFixed(4)}, {String(it.inputTokens)} in / {String(it.outputTokens)} out · session ${it.totalUsd.toFixed(4)}</div>;
    case "notice":
      return <div class={"msg notice " + it.level} {...at}>{it.text}{it.hint && <div class="hint" data-testid="hint">hint: {it.hint}</div>}</div>;
  }
}

function Controls(props: { id: string; session?: Session }) {
  const allowed = useCan();
  const [text, setText] = useState("");
  const [err, setErr] = useState("");
  const s = props.session;
  // Typing into a suspended session resumes it while the person writes
  // (the daemon's Typing): the first keystroke, then every 5 s at most.
  const typing = useMemo(() => typingSignal(() => { sessions.typing({ sessionId: props.id }).catch(() => {}); }), [props.id]);
  const run = async (f: () => Promise<unknown>) => {
    setErr("");
    try {
      await f();
    } catch (e) {
      setErr(ConnectError.from(e).rawMessage);
    }
  };
  const send = (e: Event) => {
    e.preventDefault();
    const t = text;
    if (!t.trim()) return;
    setText("");
    run(() => sessions.send({ sessionId: props.id, text: t }));
  };
  // The composer is one line and Send; the rarer controls are folded
  // under More, so that on a phone the conversation keeps the screen.
  if (!allowed("sessions.operate")) return null; // a viewer or approver watches, it does not drive
  return (
    <div class="controls" data-testid="controls">
      <form onSubmit={send} class="send">
        <textarea aria-label="message" rows={1} value={text} placeholder="Send the next message…" onInput={(e) => { const v = (e.target as HTMLTextAreaElement).value; setText(v); if (v) typing(); }}
          onKeyDown={(e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) send(e); }} />
        <button type="submit">Send</button>
        <button type="button" onClick={() => run(() => sessions.interrupt({ sessionId: props.id, client: clientName }))}>Interrupt</button>
      </form>
      <details class="more">
      <summary>More</summary>
      <div class="buttons">
        <select aria-label="permission mode" value={s?.permissionMode || "default"}
          onChange={(e) => run(() => sessions.setPermissionMode({ sessionId: props.id, mode: (e.target as HTMLSelectElement).value }))}>
          {modes.map((m) => <option key={m}>{m}</option>)}
        </select>
        <form class="inline" onSubmit={(e) => { e.preventDefault(); const m = ((e.target as HTMLFormElement).elements.namedItem("model") as HTMLInputElement).value; run(() => sessions.setModel({ sessionId: props.id, model: m })); }}>
          <input name="model" aria-label="model" placeholder={s?.model || "model"} />
          <button type="submit">Set model</button>
        </form>
        <button onClick={() => run(() => sessions.resumeSession({ sessionId: props.id }))}>Resume</button>
        <button onClick={() => run(async () => { const r = await sessions.forkSession({ sessionId: props.id }); location.hash = "#/s/" + r.session!.id; })}>Fork</button>
        <button class="deny" onClick={() => run(() => sessions.closeSession({ sessionId: props.id, client: clientName }))}>Close</button>
      </div>
      </details>
      {err && <p class="error" data-testid="control-error">{err}</p>}
    </div>
  );
}

// --- rules and audit ---

function RulesView(props: { list: Session[] }) {
  const allowed = useCan();
  const [rules, setRules] = useState<Rule[]>([]);
  const [decisions, setDecisions] = useState<Decision[]>([]);
  const [err, setErr] = useState("");
  const [f, setF] = useState({ pattern: "", behavior: "allow", scope: "global", value: "" });
  const load = async () => {
    try {
      setRules((await permissions.listRules({})).rules);
      setDecisions((await permissions.listDecisions({})).decisions);
    } catch (e) {
      setErr(ConnectError.from(e).rawMessage);
    }
  };
  useEffect(() => { load(); }, []);
  const add = async (e: Event) => {
    e.preventDefault();
    setErr("");
    try {
      await permissions.addRule({ rule: {
        pattern: f.pattern, behavior: f.behavior === "allow" ? Behavior.ALLOW : f.behavior === "deny" ? Behavior.DENY : Behavior.ASK,
        scope: f.scope === "project" ? RuleScope.PROJECT : f.scope === "session" ? RuleScope.SESSION : RuleScope.GLOBAL,
        scopeValue: f.scope === "global" ? "" : f.value.trim(), // a global rule has none (the field is hidden)
      } });
      setF({ ...f, pattern: "" });
      load();
    } catch (e) {
      setErr(ConnectError.from(e).rawMessage);
    }
  };
  const set = (k: string) => (e: Event) => setF({ ...f, [k]: (e.target as HTMLInputElement).value });
  return (
    <section>
      <h2>Rules</h2>
      {allowed("rules.write") && <form class="rule-form" onSubmit={add} data-testid="rule-form">
        <input aria-label="pattern" placeholder="Bash(git status:*)" value={f.pattern} onInput={set("pattern")} required />
        <select aria-label="behavior" value={f.behavior} onChange={set("behavior")}><option>allow</option><option>deny</option><option>ask</option></select>
        <select aria-label="scope" value={f.scope} onChange={set("scope")}><option>global</option><option>project</option><option>session</option></select>
        {f.scope !== "global" && <input aria-label="scope value" placeholder={f.scope === "project" ? "/project/dir" : "session id"} value={f.value} onInput={set("value")} />}
        <button type="submit">Add</button>
      </form>}
      {err && <p class="error" data-testid="rule-error">{err}</p>}
      <ul class="rules" data-testid="rules">
        {rules.map((r) => (
          <li key={r.id}>
            <span class="rule-text">
              <code>{r.pattern}</code> {Behavior[r.behavior].toLowerCase()} · {scopeName(r.scope)}{" "}
              {r.scope === RuleScope.SESSION ? <Title id={r.scopeValue} session={props.list.find((s) => s.id === r.scopeValue)} link /> : r.scopeValue}
            </span>
            {allowed("rules.write") && <button class="small deny" onClick={async () => { await permissions.removeRule({ ruleId: r.id }); load(); }}>remove</button>}
          </li>
        ))}
      </ul>
      <h2>Decisions</h2>
      <ul class="decisions">
        {decisions.map((d) => {
          const w = decisionWords(d); // a question's answers, not "allow"
          return (
            <li key={d.requestId} data-testid="decision" data-request={d.requestId}>
              <div><strong>{d.toolName}</strong> {d.target && <code class="target">{d.target}</code>}</div>
              <div>
                <span class={"outcome " + Behavior[d.behavior].toLowerCase()}>{w.behavior === "answered" ? w.behavior : Behavior[d.behavior].toLowerCase()}</span> by {d.decidedBy}
                {w.message && <span class="muted"> — {w.message}</span>}
              </div>
              <div class="muted small">
                <Title id={d.sessionId} session={props.list.find((s) => s.id === d.sessionId)} link /> · {new Date(ts(d.decidedAt)).toLocaleString()}
              </div>
            </li>
          );
        })}
      </ul>
    </section>
  );
}

render(<App />, document.getElementById("app")!);
