import { describe, expect, test } from "vitest";
import { highlight, languageOf, renderMarkdown, safeURL } from "./markdown";

describe("markdown", () => {
  test("CommonMark with tables and task lists", () => {
    const html = renderMarkdown("## Plan\n\n- one\n- **two**\n\nTasks:\n\n- [x] done\n- [ ] not yet\n\n| a | b |\n|---|--:|\n| 1 | 2 |\n\n```go\nfunc f() int { return 1 }\n```\n");
    expect(html).toContain("<h2>Plan</h2>");
    expect(html).toContain("<li><strong>two</strong></li>");
    expect(html).toMatch(/<input checked="" disabled="" type="checkbox"[^>]*> done/);
    expect(html).toContain("<table>");
    expect(html).toContain('<td align="right">2</td>');
    expect(html).toContain('<pre class="code" data-lang="go"><code class="hljs"><span class="hljs-function"><span class="hljs-keyword">func</span>');
  });

  test("raw HTML is text, never markup", () => {
    for (const src of ['<img src=x onerror="alert(1)">', "text <script>alert(1)</script> more", "<div onclick=x>block</div>\n\nafter",
      "<a href='javascript:alert(1)'>x</a>", "<!-- c --><iframe src=//evil>"]) {
      const html = renderMarkdown(src);
      expect(html).not.toMatch(/<(img|script|div|iframe|a)[\s>]/i);
      expect(html).toContain("&lt;");
    }
    expect(renderMarkdown("see <img src=x onerror=alert(1)> here")).toContain("see &lt;img src=x onerror=alert(1)&gt; here");
  });

  test("links only to http(s), in a new tab without the opener", () => {
    expect(renderMarkdown("[docs](https://example.com/a?b=1&c=2)")).toContain(
      '<a href="https://example.com/a?b=1&amp;c=2" target="_blank" rel="noopener noreferrer">docs</a>');
    for (const bad of ["javascript:alert(1)", "data:text/html,x", "vbscript:x", "/relative", "JaVaScRiPt:alert(1)", "file:///etc/passwd"]) {
      const html = renderMarkdown(`[x](${bad}) ![img](${bad})`);
      expect(html).not.toContain("<a ");
      expect(html).not.toContain("<img");
    }
    expect(renderMarkdown("![chart](https://example.com/c.png)")).toContain('<a href="https://example.com/c.png" target="_blank" rel="noopener noreferrer">chart</a>');
    expect(renderMarkdown("<https://example.com>")).toContain('href="https://example.com/"');
    expect(safeURL("http://x")).toBe("http://x/");
    expect(safeURL("mailto:a@b")).toBeNull();
  });

  test("code: known languages highlighted, others escaped", () => {
    expect(highlight("<b>", "nosuchlang")).toBe("&lt;b&gt;");
    expect(highlight("- a\n+ b", "diff")).toContain('<span class="hljs-deletion">');
    expect(renderMarkdown("```\n<img src=x>\n```")).toContain("&lt;img src=x&gt;");
    expect(languageOf("/src/main.go")).toBe("go");
    expect(languageOf("README.md")).toBe("");
    expect(languageOf("x.tsx")).toBe("typescript");
  });
});
