/**
 * @-mentions of workspace files in a prompt (`look at @src/app.py`): which paths a prompt names.
 * Free of any editor API; the extension checks the paths exist and sends them as context.
 */

/** Trailing punctuation that ends a sentence, not a path: `see @app.py.` names `app.py`. */
const TRAILING = /[.,;:!?)\]}'"]+$/;

/** The paths a prompt mentions with `@`, in order, each once; `@` must start a word. */
export function mentionedPaths(prompt: string): string[] {
  const paths: string[] = [];
  for (const match of prompt.matchAll(/(?:^|\s)@(\S+)/g)) {
    const path = match[1].replace(TRAILING, "");
    if (path && !paths.includes(path)) paths.push(path);
  }
  return paths;
}

/** Whether a `@` just typed at `caret` starts a mention (at the start, or after a space). */
export function startsMention(text: string, caret: number): boolean {
  return caret > 0 && text[caret - 1] === "@" && (caret === 1 || /\s/.test(text[caret - 2]));
}
