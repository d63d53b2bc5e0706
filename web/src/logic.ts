// The page's logic, apart from the DOM so that Vitest tests it: the login
// token, catching up a session's log without a gap or a duplicate, the
// session list and the inbox as snapshots and changes, and the
// conversation built from a session's events.

import type { BudgetHold, Decision, Event, PermissionRequest, Session, SettledRequest } from "./gen/claudectl/v1/claudectl_pb";
import { SessionStatus } from "./gen/claudectl/v1/claudectl_pb";

// --- login ---

// tokenFromHash takes "#token=…" from the address (claudectl serve prints
// that URL) and returns the token and the hash to leave in the address
// bar: the token never stays there (history.replaceState), and a fragment
// is never sent to the server, so never in its logs.
export function tokenFromHash(hash: string): { token: string | null; rest: string } {
  const h = hash.startsWith("#") ? hash.slice(1) : hash;
  const params = new URLSearchParams(h);
  const token = params.get("token");
  if (token === null) return { token: null, rest: hash };
  params.delete("token");
  const rest = params.toString();
  return { token, rest: rest ? "#" + rest : "" };
}

// --- a session's log ---

// A Log holds one session's events in seq order: apply takes an event
// only if it is the next one, so a replay after a reconnect (Subscribe
// from the last seq) never doubles an event, and a hole is reported.
export class Log {
  events: Event[] = [];
  get last(): bigint {
    return this.events.length ? this.events[this.events.length - 1].seq : 0n;
  }
  // apply returns "added", "duplicate" (already had it) or "gap" (an
  // event is missing before it: resubscribe from last). A gap event
  // further on is taken: it stands for the events missing before it (those
  // retention removed, which no resubscription would bring).
  apply(ev: Event): "added" | "duplicate" | "gap" {
    if (ev.seq <= this.last) return "duplicate";
    if (ev.seq !== this.last + 1n && ev.kind.case !== "gap") return "gap";
    this.events.push(ev);
    return "added";
  }
}

// --- session list and inbox ---

export function mergeSessions(list: Session[], change: { snapshot: boolean; sessions: Session[] }): Session[] {
  if (change.snapshot) return sortSessions([...change.sessions]);
  const byId = new Map(list.map((s) => [s.id, s]));
  for (const s of change.sessions) byId.set(s.id, s);
  return sortSessions([...byId.values()]);
}

function sortSessions(l: Session[]): Session[] {
  return l.sort((a, b) => ts(b.updatedAt) - ts(a.updatedAt) || a.id.localeCompare(b.id));
}

export function ts(t: { seconds: bigint; nanos: number } | undefined): number {
  return t ? Number(t.seconds) * 1000 + Math.floor(t.nanos / 1e6) : 0;
}

export const statusNames: Record<number, string> = {
  [SessionStatus.STARTING]: "starting",
  [SessionStatus.RUNNING]: "running",
  [SessionStatus.IDLE]: "idle",
  [SessionStatus.WAITING]: "waiting for you",
  [SessionStatus.INTERRUPTED]: "interrupted",
  [SessionStatus.CLOSED]: "closed",
  [SessionStatus.FAILED]: "failed",
  [SessionStatus.SUSPENDED]: "suspended",
  [SessionStatus.QUEUED]: "queued",
  [SessionStatus.BUDGET]: "waiting for budget",
};

export function statusName(s: SessionStatus): string {
  return statusNames[s] ?? "unknown";
}

export function filterSessions(list: Session[], status: string, cwd: string): Session[] {
  return list.filter((s) => (!status || statusName(s.status) === status) && (!cwd || s.cwd.includes(cwd)));
}

// An Inbox is what waits for a person, newest first, and the requests
// settled while the page watched (who answered), so that a card can say
// so where it was.
export interface Inbox {
  pending: PermissionRequest[];
  settled: Map<string, Settled>;
}

// A Settled request is how it was settled and, when the page saw it
// waiting, what it was.
export type Settled = SettledRequest & { request?: PermissionRequest };

export function mergeInbox(
  inbox: Inbox,
  change: { snapshot: boolean; requests: PermissionRequest[]; settled?: SettledRequest },
): Inbox {
  let pending = change.snapshot ? [] : [...inbox.pending];
  const settled = new Map(inbox.settled);
  for (const r of change.requests) {
    // A request published again (a two-person rule's first allow, an
    // escalation) replaces the one shown, in its place.
    const i = pending.findIndex((p) => p.requestId === r.requestId);
    if (i < 0) pending.unshift(r);
    else pending[i] = r;
  }
  if (change.settled) {
    const request = pending.find((p) => p.requestId === change.settled!.requestId) ?? inbox.settled.get(change.settled.requestId)?.request;
    settled.set(change.settled.requestId, { ...change.settled, request });
    pending = pending.filter((p) => p.requestId !== change.settled!.requestId);
  }
  return { pending, settled };
}

// --- the conversation ---

export type Item =
  | { kind: "user"; seq: bigint; text: string }
  | { kind: "text"; seq: bigint; text: string; parent: string }
  | { kind: "thinking"; seq: bigint; text: string; parent: string }
  | { kind: "tool"; seq: bigint; id: string; name: string; input: any; result?: string; resultSeq?: bigint; isError?: boolean; parent: string; children: Item[] }
  | { kind: "permission"; seq: bigint; request: PermissionRequest; resolution?: { behavior: string; by: string; message: string } }
  | { kind: "usage"; seq: bigint; costUsd: number; inputTokens: bigint; outputTokens: bigint; totalUsd: number }
  | { kind: "notice"; seq: bigint; text: string; level: "info" | "error"; hint?: string };

const decoder = new TextDecoder();

function parse(raw: Uint8Array): any {
  try {
    return JSON.parse(decoder.decode(raw));
  } catch {
    return null;
  }
}

// buildConversation turns a session's events into what the page shows:
// prompts, text as it streamed, thinking, tool calls with their results
// (sub-agents' under their Task call), permission cards and usage.
export function buildConversation(events: Event[]): Item[] {
  const items: Item[] = [];
  const tools = new Map<string, Extract<Item, { kind: "tool" }>>();
  const perms = new Map<string, Extract<Item, { kind: "permission" }>>();
  const streamed = new Set<string>(); // threads with text deltas since their last assistant message
  let openText: Extract<Item, { kind: "text" }> | null = null;
  const place = (it: Item, parent: string) => {
    const t = parent ? tools.get(parent) : undefined;
    (t ? t.children : items).push(it);
  };
  for (const ev of events) {
    const k = ev.kind;
    switch (k.case) {
      case "textDelta": {
        const parent = k.value.parentToolUseId;
        streamed.add(parent);
        if (openText && openText.parent === parent) openText.text += k.value.text;
        else {
          openText = { kind: "text", seq: ev.seq, text: k.value.text, parent };
          place(openText, parent);
        }
        continue;
      }
      case "toolUse": {
        const it: Extract<Item, { kind: "tool" }> = {
          kind: "tool", seq: ev.seq, id: k.value.toolUseId, name: k.value.name,
          input: parse(k.value.input), parent: k.value.parentToolUseId, children: [],
        };
        tools.set(it.id, it);
        place(it, it.parent);
        break;
      }
      case "message": {
        const m = parse(k.value.raw);
        const shown = m && (m.type === "assistant" || (k.value.toCli && m.type === "user"));
        if (!shown) { // stream events, results, control lines, tool results: no item of their own
          if (m && !k.value.toCli && m.type === "user") attachResults(m, tools, ev.seq);
          continue;
        }
        if (k.value.toCli && m.type === "user") {
          const c = m.message?.content;
          const text = typeof c === "string" ? c : Array.isArray(c) ? c.filter((b: any) => b.type === "text").map((b: any) => b.text).join("\n") : "";
          if (text) items.push({ kind: "user", seq: ev.seq, text });
        } else if (!k.value.toCli && m.type === "assistant") {
          const parent = m.parent_tool_use_id ?? "";
          for (const b of m.message?.content ?? []) {
            if (b.type === "thinking" && b.thinking) place({ kind: "thinking", seq: ev.seq, text: b.thinking, parent }, parent);
            if (b.type === "text" && !streamed.has(parent)) place({ kind: "text", seq: ev.seq, text: b.text, parent }, parent);
          }
          streamed.delete(parent);
        }
        break;
      }
      case "permissionRequest": {
        const it: Extract<Item, { kind: "permission" }> = { kind: "permission", seq: ev.seq, request: k.value };
        perms.set(k.value.requestId, it);
        items.push(it);
        break;
      }
      case "permissionResolved": {
        const it = perms.get(k.value.requestId);
        const d = k.value.decision;
        if (it && d) it.resolution = decisionWords(d);
        break;
      }
      case "usageReport": {
        const t = k.value.turn, all = k.value.sessionTotals;
        items.push({ kind: "usage", seq: ev.seq, costUsd: t?.costUsd ?? 0, inputTokens: t?.inputTokens ?? 0n, outputTokens: t?.outputTokens ?? 0n, totalUsd: all?.costUsd ?? 0 });
        break;
      }
      case "error": // hint: what to do, from the daemon (a turn refused for lack of credentials)
        items.push({ kind: "notice", seq: ev.seq, text: k.value.message, level: "error", hint: k.value.hint || undefined });
        break;
      case "interrupted":
        items.push({ kind: "notice", seq: ev.seq, text: `interrupted by ${k.value.by}`, level: "info" });
        break;
      case "permissionMode":
        items.push({ kind: "notice", seq: ev.seq, text: modeChangeText(k.value.mode, k.value.requested), level: "info" });
        break;
      case "gap":
        items.push(k.value.from // a store's failure; none: retention removed them
          ? { kind: "notice", seq: ev.seq, text: `${k.value.lost} events could not be stored: ${k.value.reason}`, level: "error" }
          : { kind: "notice", seq: ev.seq, text: `${k.value.lost} earlier events are gone: ${k.value.reason}`, level: "info" });
        break;
      default:
        continue; // status changes and warnings do not end a streamed text
    }
    openText = null;
  }
  return items;
}

// decisionWords says how a request was settled: "allowed", "denied", or
// for a question "answered" with the answers as its message (one answer
// as it is; several each after its question).
export function decisionWords(d: Decision): { behavior: string; by: string; message: string } {
  const answers = Object.entries(d.answers ?? {});
  if (d.behavior === 1 && answers.length > 0) {
    const message = answers.length === 1 ? answers[0][1] : answers.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([q, a]) => `${q} ${a}`).join("; ");
    return { behavior: "answered", by: d.decidedBy, message };
  }
  return { behavior: d.behavior === 1 ? "allowed" : d.behavior === 2 ? "denied" : "settled", by: d.decidedBy, message: d.message };
}

// modeChangeText says a change of the permission mode in effect, which
// Claude Code may make another than the one asked for (requested), or make
// by itself (requested empty).
export function modeChangeText(mode: string, requested: string): string {
  if (!requested) return `permission mode now ${mode} (changed by Claude Code)`;
  if (requested !== mode) return `permission mode now ${mode} (${requested} was asked for)`;
  return `permission mode now ${mode}`;
}

// attachResults gives the tool calls of a CLI user message's tool_result
// blocks their output.
function attachResults(m: any, tools: Map<string, Extract<Item, { kind: "tool" }>>, seq: bigint) {
  for (const b of Array.isArray(m.message?.content) ? m.message.content : []) {
    if (b.type !== "tool_result") continue;
    const t = tools.get(b.tool_use_id);
    if (!t) continue;
    t.result = typeof b.content === "string" ? b.content
      : Array.isArray(b.content) ? b.content.map((c: any) => c.text ?? "").join("\n") : "";
    t.isError = !!b.is_error;
    t.resultSeq = seq;
  }
}

// --- Edit/Write/MultiEdit as a diff ---

export interface DiffLine { op: " " | "-" | "+"; text: string }

// diffLines is a line diff (longest common subsequence), enough for the
// edits a tool makes; very long inputs fall back to all-removed, all-added.
export function diffLines(a: string, b: string): DiffLine[] {
  const x = linesOf(a), y = linesOf(b);
  if (x.length * y.length > 250_000) return [...x.map((t) => ({ op: "-" as const, text: t })), ...y.map((t) => ({ op: "+" as const, text: t }))];
  const n = x.length, m = y.length;
  const L: number[][] = Array.from({ length: n + 1 }, () => new Array(m + 1).fill(0));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) L[i][j] = x[i] === y[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
  const out: DiffLine[] = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (x[i] === y[j]) { out.push({ op: " ", text: x[i] }); i++; j++; }
    else if (L[i + 1][j] >= L[i][j + 1]) out.push({ op: "-", text: x[i++] });
    else out.push({ op: "+", text: y[j++] });
  }
  while (i < n) out.push({ op: "-", text: x[i++] });
  while (j < m) out.push({ op: "+", text: y[j++] });
  return out;
}

// linesOf splits text into lines; a final newline ends the last line
// rather than starting an empty one.
export function linesOf(text: string): string[] {
  const l = text.split("\n");
  if (l.length > 1 && l[l.length - 1] === "") l.pop();
  return l;
}

// toolDiff returns the diff an Edit, MultiEdit or Write input makes, or null.
export function toolDiff(name: string, input: any): DiffLine[] | null {
  if (!input) return null;
  if (name === "Edit") return diffLines(input.old_string ?? "", input.new_string ?? "");
  // A file's last newline ends its last line: it starts no line of its own.
  if (name === "Write") return linesOf(String(input.content ?? "")).map((text) => ({ op: "+" as const, text }));
  if (name === "MultiEdit" && Array.isArray(input.edits)) return input.edits.flatMap((e: any) => diffLines(e.old_string ?? "", e.new_string ?? ""));
  return null;
}

// --- the field an error of the daemon names ---

// fieldOf finds which form field a daemon validation error is about
// ("invalid cwd …", "cwd: …"), so that the form shows it there.
export function fieldOf(message: string, fields: string[]): string | null {
  const m = message.toLowerCase();
  for (const f of fields) {
    const re = new RegExp(`(^|[^a-z_])${f}([^a-z_]|$)`);
    if (re.test(m)) return f;
  }
  return null;
}

// can says whether a token may do what needs permission p (see
// docs/security.md): perms are Whoami's, null when the daemon does not say
// (an older daemon, whose every token may do everything). The page hides
// what the token cannot do; the daemon refuses it anyway.
export function can(perms: readonly string[] | null, p: string): boolean {
  return perms === null || perms.includes(p);
}

// --- worktrees and budgets ---

// A PatchLine is one line of git's unified diff, with what it is: a
// file's header, a hunk's, a line added, removed or kept.
export interface PatchLine {
  kind: "file" | "hunk" | "add" | "del" | "ctx" | "meta";
  text: string;
}

// patchLines splits git's unified diff (GetChanges.diff) into lines to
// show, each with its kind.
export function patchLines(diff: string): PatchLine[] {
  const out: PatchLine[] = [];
  for (const text of diff.split("\n")) {
    if (text === "" && out.length && out[out.length - 1].text === "") continue;
    let kind: PatchLine["kind"] = "ctx";
    if (text.startsWith("diff --git ")) kind = "file";
    else if (text.startsWith("@@")) kind = "hunk";
    else if (text.startsWith("+++ ") || text.startsWith("--- ") || /^(index|new file|deleted file|similarity|rename|old mode|new mode|Binary files) /.test(text)) kind = "meta";
    else if (text.startsWith("+")) kind = "add";
    else if (text.startsWith("-")) kind = "del";
    out.push({ kind, text });
  }
  while (out.length && out[out.length - 1].text === "") out.pop();
  return out;
}

// heldSessions are the sessions a spend cap holds (status budget), each
// with the daemon's hold when it said it (GetBudget), for the inbox's
// cards: a held session waits for an approver as a request does.
export function heldSessions(list: Session[], holds: BudgetHold[]): { session: Session; hold?: BudgetHold }[] {
  const byId = new Map(holds.map((h) => [h.sessionId, h]));
  return list.filter((s) => s.status === SessionStatus.BUDGET).map((s) => ({ session: s, hold: byId.get(s.id) }));
}

// parseDollars reads the raise an approver typed: "10", "$2.50"; null
// when it is no amount above zero.
export function parseDollars(v: string): number | null {
  const t = v.trim().replace(/^\$/, "");
  if (!/^\d+(\.\d+)?$/.test(t)) return null;
  const n = Number(t);
  return n > 0 ? n : null;
}

// --- titles, routes, folding, questions, activity ---

// sessionTitle is what names a session on the page: the title Claude
// Code gave it, else its first prompt (quoted: prompt is true), else "".
export function sessionTitle(s: { title: string; firstPrompt: string } | undefined): { text: string; prompt: boolean } {
  if (!s) return { text: "", prompt: false };
  if (s.title) return { text: s.title, prompt: false };
  return { text: s.firstPrompt, prompt: !!s.firstPrompt };
}

// shortID is the first 8 characters of a session's id: enough to tell
// sessions apart (claudectl takes a unique prefix for an id).
export function shortID(id: string): string {
  return id.slice(0, 8);
}

// A Route is where the address's fragment points.
export type Route =
  | { view: "inbox" | "sessions" | "rules" | "activity" }
  | { view: "search"; q: string }
  | { view: "session"; id: string; seq: bigint | null };

// parseRoute reads "#/s/ID?seq=N", "#/search?q=…" and the plain views.
export function parseRoute(hash: string): Route {
  const [path, query = ""] = (hash || "#/inbox").split("?", 2);
  const params = new URLSearchParams(query);
  if (path.startsWith("#/s/")) {
    const seq = params.get("seq");
    return { view: "session", id: decodeURIComponent(path.slice(4)), seq: seq && /^\d+$/.test(seq) ? BigInt(seq) : null };
  }
  if (path === "#/search") return { view: "search", q: params.get("q") ?? "" };
  const v = path.slice(2);
  return v === "sessions" || v === "rules" || v === "activity" ? { view: v } : { view: "inbox" };
}

// sessionHref is the address of session id's view, at event seq if given.
export function sessionHref(id: string, seq?: bigint): string {
  return "#/s/" + encodeURIComponent(id) + (seq ? "?seq=" + seq : "");
}

// itemAt returns the index of the item holding event seq (a tool call
// holds its result's too), or of the last item before it; -1 for none.
export function itemAt(items: Item[], seq: bigint): number {
  const tool = items.findIndex((it) => it.kind === "tool" && it.resultSeq === seq);
  if (tool >= 0) return tool;
  let best = -1;
  items.forEach((it, i) => {
    if (it.seq <= seq) best = i;
  });
  return best;
}

// foldLines cuts a long text to its first max lines: head, and how many
// lines are left out (0: nothing folded).
export function foldLines(text: string, max = 20): { head: string; hidden: number } {
  const lines = linesOf(text);
  if (lines.length <= max + 5) return { head: text, hidden: 0 }; // folding a few lines saves nothing
  return { head: lines.slice(0, max).join("\n"), hidden: lines.length - max };
}

// questionOptions returns a question's options with their descriptions,
// from the request's input (AskUserQuestion's questions[].options[]).
export function questionOptions(input: any, question: string, labels: string[]): { label: string; description: string }[] {
  const q = Array.isArray(input?.questions) ? input.questions.find((x: any) => x?.question === question) : null;
  return labels.map((label) => {
    const o = Array.isArray(q?.options) ? q.options.find((x: any) => (typeof x === "string" ? x : x?.label) === label) : null;
    return { label, description: typeof o?.description === "string" ? o.description : "" };
  });
}

// requestTarget says on one line what a request is for: a Bash command, a
// file's path, a pattern, an address, a question.
export function requestTarget(r: PermissionRequest): string {
  if (r.questions.length) return r.questions[0].question;
  let input: any = null;
  try {
    input = JSON.parse(decoder.decode(r.input));
  } catch {
    // no input to show
  }
  const v = input?.command ?? input?.file_path ?? input?.notebook_path ?? input?.path ?? input?.pattern ?? input?.url ?? "";
  return typeof v === "string" ? v.split("\n")[0] : "";
}

// A Series is one value a day, named.
export interface Series { name: string; values: number[] }

// activityCSV is the activity data as CSV: one row a day and series.
export function activityCSV(days: string[], groups: { metric: string; series: Series[] }[]): string {
  const cell = (s: string) => (/[",\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s);
  const rows = ["day,metric,name,value"];
  for (const g of groups) {
    for (const s of g.series) {
      days.forEach((d, i) => rows.push([d, g.metric, cell(s.name), String(s.values[i] ?? 0)].join(",")));
    }
  }
  return rows.join("\n") + "\n";
}

// routingText says who a routed request asks, and how many allows a
// two-person rule has of those it needs: "route pushes · asks group:ops ·
// 1 of 2 allowed (user:alice)".
export function routingText(r: PermissionRequest, time = (ms: number) => new Date(ms).toLocaleTimeString()): string {
  const rt = r.routing!;
  const parts = ["route " + rt.route];
  if (rt.asked.length) parts.push("asks " + rt.asked.join(", ") + (rt.escalated ? " (escalated)" : ""));
  if (rt.approvalsNeeded > 1) {
    parts.push(`${rt.approvedBy.length} of ${rt.approvalsNeeded} allowed` + (rt.approvedBy.length ? " (" + rt.approvedBy.join(", ") + ")" : ""));
  }
  if (!rt.escalated && rt.escalateTo.length && rt.escalatesAt) {
    parts.push("then " + rt.escalateTo.join(", ") + " from " + time(ts(rt.escalatesAt)));
  }
  if (rt.onExpiry && r.expiresAt) parts.push("denied at " + time(ts(r.expiresAt)) + ": " + rt.onExpiry);
  return parts.join(" · ");
}

// typingSignal returns what to call on every keystroke in a composer: it
// calls send on the first, then at most once every intervalMs while typing
// goes on. The daemon resumes a suspended session when someone starts
// typing into it (Typing), so that the prompt finds its CLI started.
export function typingSignal(send: () => void, intervalMs = 5000, now: () => number = Date.now): () => void {
  let last = -Infinity;
  return () => {
    const t = now();
    if (t - last < intervalMs) return;
    last = t;
    send();
  };
}
