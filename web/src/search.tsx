// The search view (#/search?q=…): the words of every session's prompts,
// replies and tool input and output (the Search RPC); a hit opens its
// session at the event.
import { useEffect, useRef, useState } from "preact/hooks";
import { ConnectError } from "@connectrpc/connect";
import type { SearchHit } from "./gen/claudectl/v1/claudectl_pb";
import { sessions } from "./api";
import { sessionHref, ts } from "./logic";
import { Title } from "./ui";

const kinds: Record<string, string> = { prompt: "prompt", reply: "reply", tool_input: "tool call", tool_output: "tool output" };

// searchDelay is how long typing pauses before the page searches.
const searchDelay = 250;

export function SearchView(props: { q: string }) {
  const [text, setText] = useState(props.q);
  const [q, setQ] = useState(props.q); // what was searched: the address says it too
  const [hits, setHits] = useState<SearchHit[] | null>(null);
  const [err, setErr] = useState("");
  const input = useRef<HTMLInputElement>(null);
  useEffect(() => { setText(props.q); setQ(props.q); }, [props.q]);
  useEffect(() => {
    if (!props.q) input.current?.focus();
  }, []);
  // As one types: the address is kept (replaced, not a new history entry
  // per letter), so that Back from a hit comes back to these results.
  useEffect(() => {
    if (text === q) return;
    const t = setTimeout(() => {
      setQ(text);
      history.replaceState(null, "", "#/search?q=" + encodeURIComponent(text));
    }, searchDelay);
    return () => clearTimeout(t);
  }, [text]);
  useEffect(() => {
    setErr("");
    if (!q.trim()) {
      setHits(null);
      return;
    }
    const ac = new AbortController();
    sessions.search({ query: q, limit: 50 }, { signal: ac.signal }).then(
      (r) => setHits(r.hits),
      (e) => { if (!ac.signal.aborted) { setHits(null); setErr(ConnectError.from(e).rawMessage); } },
    );
    return () => ac.abort();
  }, [q]);
  const submit = (e: Event) => {
    e.preventDefault();
    setQ(text);
    history.replaceState(null, "", "#/search?q=" + encodeURIComponent(text));
  };
  return (
    <section>
      <h2>Search</h2>
      <form class="search" onSubmit={submit} role="search">
        <input ref={input} type="search" aria-label="words to find" data-testid="search-input" placeholder="words in any prompt, reply or tool output"
          value={text} maxLength={200} onInput={(e) => setText((e.target as HTMLInputElement).value)} />
        <button type="submit">Search</button>
      </form>
      <p class="muted small">Every session, closed ones too. Whole words, any case; punctuation is ignored.</p>
      {err && <p class="error" data-testid="search-error">{err}</p>}
      {hits && hits.length === 0 && <p class="muted" data-testid="search-none">No event holds all these words.</p>}
      {hits && hits.length > 0 && (
        <ul class="hits" data-testid="search-hits">
          {hits.map((h) => (
            <li key={h.sessionId + h.seq} data-testid="search-hit" data-session={h.sessionId} data-seq={String(h.seq)}>
              <a href={sessionHref(h.sessionId, h.seq)}>
                <div class="hit-head">
                  <Title id={h.sessionId} title={h.sessionTitle} />
                  <span class="muted small">{kinds[h.kind] ?? h.kind} · {new Date(ts(h.time)).toLocaleString()}</span>
                </div>
                <div class="snippet">{h.snippet.map((p, i) => (p.match ? <mark key={i}>{p.text}</mark> : <span key={i}>{p.text}</span>))}</div>
              </a>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
