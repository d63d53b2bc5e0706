// Claude's Markdown as HTML that is safe to put in the page: CommonMark
// with GitHub's tables and task lists (marked), code blocks and diffs
// highlighted (highlight.js, a few languages), and nothing of the text
// able to run or load anything: raw HTML is shown as text, links go only
// to http(s) pages (a new tab, rel=noopener), images are links, and every
// other character is escaped.

import { Marked, type Tokens } from "marked";
import hljs from "highlight.js/lib/core";
import bash from "highlight.js/lib/languages/bash";
import diff from "highlight.js/lib/languages/diff";
import go from "highlight.js/lib/languages/go";
import javascript from "highlight.js/lib/languages/javascript";
import json from "highlight.js/lib/languages/json";
import python from "highlight.js/lib/languages/python";
import sql from "highlight.js/lib/languages/sql";
import typescript from "highlight.js/lib/languages/typescript";
import xml from "highlight.js/lib/languages/xml";
import yaml from "highlight.js/lib/languages/yaml";
import css from "highlight.js/lib/languages/css";
import rust from "highlight.js/lib/languages/rust";

for (const [name, lang] of Object.entries({ bash, diff, go, javascript, json, python, sql, typescript, xml, yaml, css, rust })) {
  hljs.registerLanguage(name, lang);
}
hljs.registerAliases(["sh", "shell", "zsh", "console"], { languageName: "bash" });
hljs.registerAliases(["golang"], { languageName: "go" });
hljs.registerAliases(["js", "jsx", "mjs"], { languageName: "javascript" });
hljs.registerAliases(["ts", "tsx"], { languageName: "typescript" });
hljs.registerAliases(["html", "svg"], { languageName: "xml" });
hljs.registerAliases(["yml"], { languageName: "yaml" });
hljs.registerAliases(["py"], { languageName: "python" });
hljs.registerAliases(["patch"], { languageName: "diff" });

export function escapeHTML(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&#39;");
}

// safeURL returns href if it is an absolute http(s) address, else null.
export function safeURL(href: string): string | null {
  try {
    const u = new URL(href);
    return u.protocol === "http:" || u.protocol === "https:" ? u.href : null;
  } catch {
    return null;
  }
}

// highlight returns code as highlighted HTML when lang names a language
// the page knows, else escaped.
export function highlight(code: string, lang: string): string {
  const l = (lang || "").trim().split(/\s+/)[0].toLowerCase();
  if (l && hljs.getLanguage(l)) {
    try {
      return hljs.highlight(code, { language: l, ignoreIllegals: true }).value;
    } catch {
      // fall through: shown plain
    }
  }
  return escapeHTML(code);
}

// languageOf guesses a file's language from its name (for an Edit or a
// Write shown as a diff), "" when the page knows none.
export function languageOf(path: string): string {
  const ext = (path.match(/\.([A-Za-z0-9]+)$/)?.[1] ?? "").toLowerCase();
  const l = { md: "", mod: "go", sum: "", tsx: "typescript", jsx: "javascript", sh: "bash", yml: "yaml", htm: "xml", html: "xml", rs: "rust" }[ext] ?? ext;
  return l && hljs.getLanguage(l) ? l : "";
}

const marked = new Marked({
  gfm: true,
  breaks: false,
  async: false,
  renderer: {
    // Raw HTML, block or inline, is text.
    html({ text }: Tokens.HTML | Tokens.Tag): string {
      return escapeHTML(text);
    },
    link({ href, title, tokens }: Tokens.Link): string {
      const inner = this.parser.parseInline(tokens);
      const url = safeURL(href);
      if (!url) return inner;
      return `<a href="${escapeHTML(url)}" target="_blank" rel="noopener noreferrer"${title ? ` title="${escapeHTML(title)}"` : ""}>${inner}</a>`;
    },
    image({ href, text }: Tokens.Image): string {
      const url = safeURL(href);
      const label = escapeHTML(text || href);
      return url ? `<a href="${escapeHTML(url)}" target="_blank" rel="noopener noreferrer">${label}</a>` : label;
    },
    code({ text, lang }: Tokens.Code): string {
      const l = (lang || "").trim().split(/\s+/)[0];
      return `<pre class="code"${l ? ` data-lang="${escapeHTML(l)}"` : ""}><code class="hljs">${highlight(text, l)}</code></pre>\n`;
    },
  },
});

// renderMarkdown returns text as safe HTML.
export function renderMarkdown(text: string): string {
  return marked.parse(text, { async: false }) as string;
}
