// Small components the views share.
import type { Session } from "./gen/claudectl/v1/claudectl_pb";
import { sessionHref, sessionTitle, shortID } from "./logic";

// Title names a session: its title, else its first prompt (quoted), and
// its short id (the whole id in its tooltip).
export function Title(props: { session?: Pick<Session, "title" | "firstPrompt">; id: string; link?: boolean; title?: string }) {
  const t = props.title !== undefined ? { text: props.title, prompt: false } : sessionTitle(props.session);
  const text = t.text ? (t.prompt ? "“" + t.text + "”" : t.text) : "";
  const inner = <>{text && <span class={"title" + (t.prompt ? " prompt" : "")}>{text}</span>} <code class="sid" title={props.id}>{shortID(props.id)}</code></>;
  return props.link ? <a class="session-title" href={sessionHref(props.id)}>{inner}</a> : <span class="session-title">{inner}</span>;
}
