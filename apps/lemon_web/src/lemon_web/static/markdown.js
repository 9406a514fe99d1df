// Model output is untrusted: Markdown is parsed by marked, code is highlighted by highlight.js,
// and the HTML that results always goes through DOMPurify before it touches the page (the
// page's Content-Security-Policy is the second fence: no inline script, no foreign images).

import { DOMPurify, Marked, hljs } from "./vendor.js";

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

function highlight(text, lang) {
  const language = (lang || "").trim().split(/\s+/)[0].toLowerCase();
  if (language && hljs.getLanguage(language)) {
    return { html: hljs.highlight(text, { language, ignoreIllegals: true }).value, language };
  }
  return { html: escapeHtml(text), language: "" };
}

const marked = new Marked({
  gfm: true,
  breaks: false,
  renderer: {
    code({ text, lang }) {
      const { html, language } = highlight(text, lang);
      const cls = language ? ` class="hljs language-${escapeHtml(language)}"` : ' class="hljs"';
      return `<pre><code${cls}>${html}</code></pre>`;
    },
  },
});

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    const href = node.getAttribute("href") || "";
    if (href && !/^(https?:|mailto:|#|\/)/i.test(href)) node.removeAttribute("href");
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer nofollow");
  }
  if (node.tagName === "IMG") {
    const src = node.getAttribute("src") || "";
    if (!/^data:image\/(png|gif|jpeg|webp);/i.test(src)) node.removeAttribute("src");
  }
});

const PURIFY = {
  USE_PROFILES: { html: true },
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "iframe", "object", "embed"],
  FORBID_ATTR: ["style", "srcset", "formaction"],
};

// Text with nothing Markdown would make markup of (no markup characters, no list or heading
// start, nothing a GFM autolink takes) is one escaped paragraph: the parser and the sanitizer
// are skipped, which keeps a long transcript of plain answers quick to show.
const PLAIN = /^[\p{L}\p{N} ,.;:'"?()%$=+/-]*$/u;
const NOT_PLAIN = /^\s*(\d+[.)]|[-+=])(\s|$)|https?:|www\.|\/\/|\s{2,}$/i;

/** Sanitized HTML for untrusted Markdown `text`. */
export function renderMarkdown(text) {
  const source = String(text);
  if (PLAIN.test(source) && !NOT_PLAIN.test(source)) {
    return source.trim() ? `<p>${escapeHtml(source.trim())}</p>` : "";
  }
  return DOMPurify.sanitize(marked.parse(source), PURIFY);
}

/** Sanitized, highlighted HTML for a code block (tool output, diffs). */
export function renderCode(text, lang = "") {
  return DOMPurify.sanitize(highlight(String(text), lang).html, PURIFY);
}
