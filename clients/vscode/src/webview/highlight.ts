/**
 * A small syntax highlighter for the code blocks in the model's answers: comments, strings,
 * numbers and keywords of the usual languages, as HTML spans coloured by the theme. Not a
 * parser: one pass of one regular expression, so it is quick on every repaint of a stream.
 */

const KEYWORDS = new Set((
  "and as assert async await break case catch class const continue def default del do elif else " +
  "enum except export extends false False finally fn for from func function go if impl import in " +
  "interface is lambda let loop match mod mut new nil None not null or package pass pub raise " +
  "return self static struct super switch this throw true True try type typeof undefined use var " +
  "void while with yield local then end elseif"
).split(" "));

/** Languages whose `#` starts a comment (elsewhere it is, say, a C preprocessor line or CSS id). */
const HASH_COMMENTS = new Set(["", "py", "python", "sh", "bash", "shell", "zsh", "console", "toml", "yaml", "yml", "ruby", "rb", "perl", "r", "make", "makefile", "dockerfile", "ini", "conf"]);
const DASH_COMMENTS = new Set(["lua", "sql", "haskell", "hs"]);

const HTML_ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]);
}

/** The code as HTML with `hl-*` spans; every character of `code` is kept, escaped. */
export function highlight(code: string, language: string): string {
  const lang = language.trim().toLowerCase();
  const comment = [String.raw`\/\/[^\n]*`, String.raw`\/\*[\s\S]*?(?:\*\/|$)`];
  if (HASH_COMMENTS.has(lang)) comment.push("#[^\\n]*");
  if (DASH_COMMENTS.has(lang)) comment.push("--[^\\n]*");
  const pattern = new RegExp(
    `(${comment.join("|")})` +
    String.raw`|("(?:[^"\\\n]|\\.)*"?|'(?:[^'\\\n]|\\.)*'?|` + "`(?:[^`\\\\]|\\\\.)*`?)" +
    String.raw`|\b(\d[\d_]*(?:\.\d+)?(?:e[+-]?\d+)?|0x[\da-f]+)\b` +
    String.raw`|\b([A-Za-z_]\w*)\b`,
    "gi",
  );
  let html = "";
  let last = 0;
  for (const match of code.matchAll(pattern)) {
    const [text, isComment, isString, isNumber, word] = match;
    const kind = isComment ? "comment" : isString ? "string" : isNumber ? "number" : word && KEYWORDS.has(word) ? "keyword" : undefined;
    if (!kind) continue;
    html += escapeHtml(code.slice(last, match.index)) + `<span class="hl-${kind}">${escapeHtml(text)}</span>`;
    last = match.index + text.length;
  }
  return html + escapeHtml(code.slice(last));
}
