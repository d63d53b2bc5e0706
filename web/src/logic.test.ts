import { create } from "@bufbuild/protobuf";
import { describe, expect, test } from "vitest";
import {
  BudgetHoldSchema, EventSchema, PermissionRequestSchema, RoutingSchema, SessionSchema, SessionStatus, SettledRequestSchema,
} from "./gen/claudectl/v1/claudectl_pb";
import {
  Log, activityCSV, buildConversation, can, diffLines, fieldOf, filterSessions, foldLines, heldSessions, itemAt, mergeInbox, mergeSessions,
  parseDollars, parseRoute, patchLines, questionOptions, requestTarget, routingText, sessionTitle, shortID, statusName, tokenFromHash, toolDiff, typingSignal,
} from "./logic";

const enc = new TextEncoder();
const msg = (seq: number, obj: unknown, toCli = false) =>
  create(EventSchema, { seq: BigInt(Math.floor(seq)), kind: { case: "message", value: { type: (obj as any).type, raw: enc.encode(JSON.stringify(obj)), toCli } } });
const delta = (seq: number, text: string, parent = "") =>
  create(EventSchema, { seq: BigInt(seq), kind: { case: "textDelta", value: { text, parentToolUseId: parent } } });

describe("login", () => {
  test("takes the token from the fragment and leaves the rest", () => {
    expect(tokenFromHash("#token=abc")).toEqual({ token: "abc", rest: "" });
    expect(tokenFromHash("#token=a%2Bb&s=1")).toEqual({ token: "a+b", rest: "#s=1" });
    expect(tokenFromHash("#s=1")).toEqual({ token: null, rest: "#s=1" });
  });
});

describe("Log", () => {
  test("a replay after a reconnect neither doubles nor skips", () => {
    const l = new Log();
    expect(l.apply(delta(1, "a"))).toBe("added");
    expect(l.apply(delta(2, "b"))).toBe("added");
    // reconnect: Subscribe from last (2) may still hand over 2 again
    expect(l.apply(delta(2, "b"))).toBe("duplicate");
    expect(l.apply(delta(4, "d"))).toBe("gap");
    expect(l.apply(delta(3, "c"))).toBe("added");
    expect(l.events.map((e) => e.seq)).toEqual([1n, 2n, 3n]);
    expect(l.last).toBe(3n);
  });
  test("a gap event stands for the events retention removed before it", () => {
    const l = new Log();
    const gap = create(EventSchema, { seq: 7n, kind: { case: "gap", value: { lost: 7n, reason: "removed by retention" } } });
    expect(l.apply(gap)).toBe("added");
    expect(l.apply(delta(8, "after"))).toBe("added");
    expect(l.last).toBe(8n);
    expect(buildConversation(l.events)[0]).toMatchObject({ kind: "notice", text: "7 earlier events are gone: removed by retention", level: "info" });
  });
});

describe("sessions and inbox", () => {
  const s = (id: string, status: SessionStatus, sec: number, cwd = "/src") =>
    create(SessionSchema, { id, status, cwd, updatedAt: { seconds: BigInt(sec), nanos: 0 } });
  test("a snapshot replaces, a change updates, newest first", () => {
    let l = mergeSessions([], { snapshot: true, sessions: [s("a", SessionStatus.IDLE, 1), s("b", SessionStatus.RUNNING, 2)] });
    expect(l.map((x) => x.id)).toEqual(["b", "a"]);
    l = mergeSessions(l, { snapshot: false, sessions: [s("a", SessionStatus.WAITING, 3)] });
    expect(l.map((x) => x.id)).toEqual(["a", "b"]);
    expect(l[0].status).toBe(SessionStatus.WAITING);
    expect(filterSessions(l, "waiting for you", "").map((x) => x.id)).toEqual(["a"]);
    expect(filterSessions(l, "", "nope")).toEqual([]);
  });
  test("the inbox: new first, settled removed and remembered", () => {
    const r = (id: string) => create(PermissionRequestSchema, { requestId: id, toolName: "Bash" });
    let box = mergeInbox({ pending: [], settled: new Map() }, { snapshot: true, requests: [r("1")] });
    box = mergeInbox(box, { snapshot: false, requests: [r("2")] });
    expect(box.pending.map((p) => p.requestId)).toEqual(["2", "1"]);
    box = mergeInbox(box, { snapshot: false, requests: [r("2")] });
    expect(box.pending.length).toBe(2);
    // Published again with who allowed (a two-person rule): replaced in place.
    const again = create(PermissionRequestSchema, { requestId: "2", routing: create(RoutingSchema, { route: "x", approvalsNeeded: 2, approvedBy: ["user:alice"] }) });
    box = mergeInbox(box, { snapshot: false, requests: [again] });
    expect(box.pending.map((p) => p.requestId)).toEqual(["2", "1"]);
    expect(box.pending[0].routing?.approvedBy).toEqual(["user:alice"]);
    box = mergeInbox(box, { snapshot: false, requests: [], settled: create(SettledRequestSchema, { requestId: "1", by: "client:bob", outcome: "allowed" }) });
    expect(box.pending.map((p) => p.requestId)).toEqual(["2"]);
    expect(box.settled.get("1")?.by).toBe("client:bob");
  });
});

describe("conversation", () => {
  test("streamed text once, tool results attached, sub-agents grouped", () => {
    const evs = [
      msg(1, { type: "user", message: { role: "user", content: "hi" } }, true),
      delta(2, "Hel"),
      msg(2.5, { type: "stream_event", event: { type: "content_block_delta" } }),
      delta(3, "lo"),
      msg(4, { type: "assistant", message: { content: [{ type: "thinking", thinking: "hmm" }, { type: "text", text: "Hello" }] } }),
      create(EventSchema, { seq: 5n, kind: { case: "toolUse", value: { toolUseId: "t1", name: "Task", input: enc.encode("{}") } } }),
      create(EventSchema, { seq: 6n, kind: { case: "toolUse", value: { toolUseId: "t2", name: "Bash", input: enc.encode(`{"command":"ls"}`), parentToolUseId: "t1" } } }),
      msg(7, { type: "user", message: { content: [{ type: "tool_result", tool_use_id: "t2", content: "a.txt" }] } }),
      msg(8, { type: "assistant", message: { content: [{ type: "text", text: "not streamed" }] } }),
    ];
    const items = buildConversation(evs);
    expect(items.map((i) => i.kind)).toEqual(["user", "text", "thinking", "tool", "text"]);
    expect((items[1] as any).text).toBe("Hello");
    const task = items[3] as any;
    expect(task.children.length).toBe(1);
    expect(task.children[0].name).toBe("Bash");
    expect(task.children[0].result).toBe("a.txt");
    expect((items[4] as any).text).toBe("not streamed");
  });
  test("the permission mode in effect, as Claude Code reports it", () => {
    const mode = (seq: bigint, m: string, requested: string) =>
      create(EventSchema, { seq, kind: { case: "permissionMode", value: { mode: m, requested } } });
    const items = buildConversation([mode(1n, "plan", "plan"), mode(2n, "default", "auto"), mode(3n, "acceptEdits", "")]);
    expect(items.map((i) => (i as any).text)).toEqual([
      "permission mode now plan",
      "permission mode now default (auto was asked for)",
      "permission mode now acceptEdits (changed by Claude Code)",
    ]);
  });
});

describe("decisions", () => {
  test("an answered question says the answer, not allowed", () => {
    const req = (seq: bigint, id: string, tool: string) =>
      create(EventSchema, { seq, kind: { case: "permissionRequest", value: { requestId: id, toolName: tool } } });
    const resolved = (seq: bigint, id: string, answers: Record<string, string>) =>
      create(EventSchema, { seq, kind: { case: "permissionResolved", value: { requestId: id, decision: { behavior: 1, decidedBy: "client:web", answers } } } });
    const items = buildConversation([
      req(1n, "q", "AskUserQuestion"), resolved(2n, "q", { "Which part?": "Thinking" }),
      req(3n, "b", "Bash"), resolved(4n, "b", {}),
      req(5n, "q2", "AskUserQuestion"), resolved(6n, "q2", { "B?": "two", "A?": "one" }),
    ]) as any[];
    expect(items.map((i) => i.resolution)).toEqual([
      { behavior: "answered", by: "client:web", message: "Thinking" },
      { behavior: "allowed", by: "client:web", message: "" },
      { behavior: "answered", by: "client:web", message: "A? one; B? two" },
    ]);
  });
});

describe("errors", () => {
  test("an error event's hint goes with its notice", () => {
    const items = buildConversation([
      create(EventSchema, { seq: 1n, kind: { case: "error", value: { message: "the API call failed (authentication_failed): Not logged in", hint: "set ANTHROPIC_API_KEY" } } }),
      create(EventSchema, { seq: 2n, kind: { case: "error", value: { message: "the turn failed at the API: Not logged in" } } }),
    ]);
    expect(items).toEqual([
      { kind: "notice", seq: 1n, text: "the API call failed (authentication_failed): Not logged in", level: "error", hint: "set ANTHROPIC_API_KEY" },
      { kind: "notice", seq: 2n, text: "the turn failed at the API: Not logged in", level: "error", hint: undefined },
    ]);
  });
});

describe("diffs and field errors", () => {
  test("an Edit as a line diff", () => {
    expect(diffLines("a\nb\nc", "a\nB\nc")).toEqual([
      { op: " ", text: "a" }, { op: "-", text: "b" }, { op: "+", text: "B" }, { op: " ", text: "c" },
    ]);
    expect(toolDiff("Write", { content: "x\ny" })).toEqual([{ op: "+", text: "x" }, { op: "+", text: "y" }]);
    // A file's final newline adds no empty "+" line.
    expect(toolDiff("Write", { content: "x\ny\n" })).toEqual([{ op: "+", text: "x" }, { op: "+", text: "y" }]);
    expect(toolDiff("Write", { content: "x\n\n" })).toEqual([{ op: "+", text: "x" }, { op: "+", text: "" }]);
    expect(toolDiff("Edit", { old_string: "a\n", new_string: "b\n" })).toEqual([{ op: "-", text: "a" }, { op: "+", text: "b" }]);
    expect(toolDiff("Bash", { command: "ls" })).toBeNull();
  });
  test("the field a daemon error names", () => {
    const f = ["cwd", "model", "permission_mode", "prompt"];
    expect(fieldOf(`daemon: invalid cwd "rel": must be an absolute path`, f)).toBe("cwd");
    expect(fieldOf(`invalid permission_mode "x": must be one of`, f)).toBe("permission_mode");
    expect(fieldOf("something else", f)).toBeNull();
  });
});

describe("can", () => {
  test("follows Whoami's permissions, and allows all when the daemon does not say", () => {
    expect(can(["api", "sessions.read"], "decide")).toBe(false);
    expect(can(["api", "sessions.read", "decide"], "decide")).toBe(true);
    expect(can([], "sessions.read")).toBe(false);
    expect(can(null, "rules.write")).toBe(true);
  });
});

describe("worktrees and budgets", () => {
  test("a unified diff's lines, each with its kind", () => {
    const diff = [
      "diff --git a/notes.txt b/notes.txt", "new file mode 100644", "index 0000000..1111111", "--- /dev/null", "+++ b/notes.txt",
      "@@ -0,0 +1 @@", "+from A", "diff --git a/a.txt b/a.txt", "--- a/a.txt", "+++ b/a.txt", "@@ -1,2 +1,2 @@", " one", "-two", "+TWO", "",
    ].join("\n");
    expect(patchLines(diff).map((l) => l.kind)).toEqual([
      "file", "meta", "meta", "meta", "meta", "hunk", "add", "file", "meta", "meta", "hunk", "ctx", "del", "add",
    ]);
    expect(patchLines("")).toEqual([]);
  });
  test("held sessions are the budget ones, with the daemon's hold when known", () => {
    const s = (id: string, status: SessionStatus) => create(SessionSchema, { id, status });
    const h = create(BudgetHoldSchema, { sessionId: "b", detail: "waiting for budget: $5.00 of $5.00 today for /srv/app" });
    const held = heldSessions([s("a", SessionStatus.IDLE), s("b", SessionStatus.BUDGET), s("c", SessionStatus.BUDGET)], [h]);
    expect(held.map((x) => [x.session.id, x.hold?.detail])).toEqual([["b", h.detail], ["c", undefined]]);
    expect(statusName(SessionStatus.BUDGET)).toBe("waiting for budget");
  });
  test("a raise is dollars above zero", () => {
    expect(parseDollars("10")).toBe(10);
    expect(parseDollars(" $2.50 ")).toBe(2.5);
    for (const bad of ["", "0", "-1", "ten", "1e3", "$"]) expect(parseDollars(bad)).toBeNull();
  });
});

describe("titles, routes, folding, questions, activity", () => {
  test("a session's title, else its first prompt, and a short id", () => {
    expect(sessionTitle({ title: "Fix it", firstPrompt: "please" })).toEqual({ text: "Fix it", prompt: false });
    expect(sessionTitle({ title: "", firstPrompt: "please" })).toEqual({ text: "please", prompt: true });
    expect(sessionTitle(undefined)).toEqual({ text: "", prompt: false });
    expect(shortID("ABCDEFGHIJKLMNOP")).toBe("ABCDEFGH");
  });

  test("routes", () => {
    expect(parseRoute("#/s/AB%2FC?seq=42")).toEqual({ view: "session", id: "AB/C", seq: 42n });
    expect(parseRoute("#/s/ABC")).toEqual({ view: "session", id: "ABC", seq: null });
    expect(parseRoute("#/s/ABC?seq=x")).toEqual({ view: "session", id: "ABC", seq: null });
    expect(parseRoute("#/search?q=a%20b%26c")).toEqual({ view: "search", q: "a b&c" });
    expect(parseRoute("#/activity")).toEqual({ view: "activity" });
    expect(parseRoute("")).toEqual({ view: "inbox" });
    expect(parseRoute("#/nonsense")).toEqual({ view: "inbox" });
  });

  test("the item holding an event: a tool call holds its result", () => {
    const items = buildConversation([
      msg(1, { type: "user", message: { content: "go" } }, true),
      msg(2, { type: "assistant", message: { content: [{ type: "text", text: "ok" }] } }),
      create(EventSchema, { seq: 3n, kind: { case: "toolUse", value: { toolUseId: "t1", name: "Bash", input: enc.encode('{"command":"ls"}') } } }),
      msg(4, { type: "assistant", message: { content: [{ type: "text", text: "while it runs" }] } }),
      msg(5, { type: "user", message: { content: [{ type: "tool_result", tool_use_id: "t1", content: "a\nb" }] } }),
    ]);
    expect(itemAt(items, 5n)).toBe(2);
    expect(itemAt(items, 4n)).toBe(3);
    expect(itemAt(items, 1n)).toBe(0);
    expect(itemAt(items, 0n)).toBe(-1);
  });

  test("long output folds", () => {
    const long = Array.from({ length: 60 }, (_, i) => "line " + i).join("\n") + "\n";
    expect(foldLines(long)).toEqual({ head: Array.from({ length: 20 }, (_, i) => "line " + i).join("\n"), hidden: 40 });
    expect(foldLines("a\nb").hidden).toBe(0);
    expect(foldLines(Array(24).fill("x").join("\n")).hidden).toBe(0);
  });

  test("question options keep their descriptions", () => {
    const input = { questions: [{ question: "Which?", options: [{ label: "red", description: "warm" }, { label: "blue" }] }] };
    expect(questionOptions(input, "Which?", ["red", "blue", "green"])).toEqual([
      { label: "red", description: "warm" }, { label: "blue", description: "" }, { label: "green", description: "" }]);
    expect(questionOptions(null, "Which?", ["red"])).toEqual([{ label: "red", description: "" }]);
  });

  test("what a settled request was", () => {
    const r = create(PermissionRequestSchema, { requestId: "1", toolName: "Bash", input: enc.encode('{"command":"ls -l\\nmore"}') });
    let box = mergeInbox({ pending: [], settled: new Map() }, { snapshot: true, requests: [r] });
    box = mergeInbox(box, { snapshot: false, requests: [], settled: create(SettledRequestSchema, { requestId: "1", by: "client:bob", outcome: "allowed" }) });
    expect(box.settled.get("1")?.request?.toolName).toBe("Bash");
    expect(box.settled.get("1")?.by).toBe("client:bob");
    expect(requestTarget(r)).toBe("ls -l");
  });

  test("activity as CSV", () => {
    expect(activityCSV(["2026-11-27", "2026-11-28"], [{ metric: "cost", series: [{ name: '/src/a,"b"', values: [1, 0.5] }] }])).toBe(
      'day,metric,name,value\n2026-11-27,cost,"/src/a,""b""",1\n2026-11-28,cost,"/src/a,""b""",0.5\n');
  });
});

describe("routing on a card", () => {
  const at = (sec: number) => ({ seconds: BigInt(sec), nanos: 0 });
  const time = (ms: number) => "T" + ms / 1000;
  test("who is asked, the two-person rule's count, escalation and expiry", () => {
    const r = create(PermissionRequestSchema, {
      requestId: "r1", expiresAt: at(200),
      routing: create(RoutingSchema, { route: "pushes", asked: ["group:ops"], approvalsNeeded: 2, approvedBy: ["user:alice"],
        escalateTo: ["carol"], escalatesAt: at(100), onExpiry: "ask in #ops" }),
    });
    expect(routingText(r, time)).toBe("route pushes · asks group:ops · 1 of 2 allowed (user:alice) · then carol from T100 · denied at T200: ask in #ops");
  });
  test("before anyone allowed, and once escalated", () => {
    const r = create(PermissionRequestSchema, {
      routing: create(RoutingSchema, { route: "r", asked: ["alice", "carol"], approvalsNeeded: 2, escalated: true, escalateTo: ["carol"], escalatesAt: at(1) }),
    });
    expect(routingText(r, time)).toBe("route r · asks alice, carol (escalated) · 0 of 2 allowed");
  });
});

describe("typing signal", () => {
  test("sends on the first keystroke, then at most every interval", () => {
    let t = 1000, sent = 0;
    const key = typingSignal(() => sent++, 5000, () => t);
    key();
    expect(sent).toBe(1);
    t += 100; key(); t += 4000; key();
    expect(sent).toBe(1);
    t += 1000; key();
    expect(sent).toBe(2);
  });
});
