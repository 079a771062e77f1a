/**
 * Driving the VS Code workbench in headless chromium through playwright-core: the command
 * palette, quick input, status bar and the Heddle panel's webview. Every wait has a deadline.
 */

import { chromium, type Browser, type FrameLocator, type Locator, type Page } from "playwright-core";

export const STEP_MS = 30000;

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: process.env.HEDDLE_CHROMIUM ?? "/usr/bin/chromium",
    headless: true,
    timeout: STEP_MS,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-dev-shm-usage",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
    ],
  });
}

export class Workbench {
  constructor(readonly page: Page) {}

  static async open(browser: Browser, url: string, folder: string, viewport = { width: 1440, height: 860 }): Promise<Workbench> {
    const page = await browser.newPage({ viewport });
    page.setDefaultTimeout(STEP_MS);
    await page.goto(`${url}/?folder=${encodeURIComponent(folder)}`, { timeout: 60000 });
    await page.locator(".monaco-workbench").waitFor({ timeout: 60000 });
    await page.locator(".statusbar").waitFor();
    return new Workbench(page);
  }

  get quickInput(): Locator {
    return this.page.locator(".quick-input-widget");
  }

  quickInputRow(text: string | RegExp): Locator {
    return this.quickInput.locator(".quick-input-list .monaco-list-row", { hasText: text });
  }

  /** Run a command from the palette by its title (as the palette shows it). */
  async runCommand(title: string): Promise<void> {
    await (await this.prepareCommand(title))();
  }

  /** Open the palette on `title`'s row; the function returned runs it (presses Enter). */
  async prepareCommand(title: string): Promise<() => Promise<void>> {
    const input = await this.quickOpen(`>${title}`, title);
    return () => input.press("Enter");
  }

  /**
   * Open the palette, type `text` and wait for a row showing `row`. F1 pressed while a webview
   * has focus reaches the workbench through the webview's key forwarding, which can drop it, and
   * the palette closes when focus moves (a webview or an editor taking it back as the palette
   * opens): each step is tried again from F1, a bounded number of times.
   */
  private async quickOpen(text: string, row: string): Promise<Locator> {
    const input = this.quickInput.locator("input");
    for (let attempt = 1; ; attempt++) {
      const timeout = attempt < 3 ? 5000 : STEP_MS;
      await this.page.keyboard.press("F1");
      try {
        await input.waitFor({ timeout });
        await input.fill(text, { timeout });
        await this.quickInputRow(row).first().waitFor({ timeout });
        return input;
      } catch (error) {
        if (attempt >= 3) throw error;
      }
    }
  }

  /** Open a workspace file with quick open and wait for its editor. */
  async openFile(name: string, expectText: string): Promise<Locator> {
    const input = await this.quickOpen(name, name);
    await input.press("Enter");
    const editor = this.page.locator(".editor-instance .monaco-editor", { hasText: expectText }).first();
    await editor.waitFor();
    return editor;
  }

  /** Wait for a quick input whose title or message contains `text`, then fill and submit it. */
  async answerInputBox(expect: string | RegExp, value: string): Promise<string> {
    const widget = this.quickInput.filter({ hasText: expect });
    await widget.waitFor();
    const message = await widget.innerText();
    const input = widget.locator("input");
    await input.fill(value);
    await input.press("Enter");
    return message;
  }

  /** The lines an editor shows (all of a short file), in order, spaces as typed. */
  async lines(editor: Locator): Promise<string[]> {
    return editor.locator(".view-lines").first().evaluate((lines) =>
      Array.from(lines.querySelectorAll<HTMLElement>(".view-line"))
        .sort((a, b) => parseFloat(a.style.top) - parseFloat(b.style.top))
        .map((line) => (line.textContent ?? "").replace(/\u00a0/g, " ")));
  }

  /** The texts decorations add after the lines of an editor (CSS `::after` content), in line order. */
  async decorationTexts(editor: Locator): Promise<string[]> {
    return editor.locator(".view-lines").first().evaluate((lines) =>
      Array.from(lines.querySelectorAll<HTMLElement>(".view-line"))
        .sort((a, b) => parseFloat(a.style.top) - parseFloat(b.style.top))
        .flatMap((line) => Array.from(line.querySelectorAll("span")).map((span) => getComputedStyle(span, "::after").content))
        .filter((content) => content && content !== "none" && content !== "normal")
        .map((content) => JSON.parse(content) as string));
  }

  /** The diff editor open with a title containing `title`, and its two sides. */
  diffEditor(): { editor: Locator; original: Locator; modified: Locator } {
    const editor = this.page.locator(".monaco-diff-editor").first();
    return { editor, original: editor.locator(".editor.original"), modified: editor.locator(".editor.modified") };
  }

  tab(text: string | RegExp): Locator {
    return this.page.locator(".tabs-container .tab", { hasText: text });
  }

  /** The tab of a file with unsaved changes. */
  dirtyTab(text: string | RegExp): Locator {
    return this.page.locator(".tabs-container .tab.dirty", { hasText: text });
  }

  statusItem(label: string): Locator {
    return this.page.locator(`.statusbar-item [aria-label="${label}"], .statusbar-item[aria-label="${label}"]`).first();
  }

  /** The Heddle panel's document inside its webview's iframes. */
  panel(): FrameLocator {
    return this.page.frameLocator("iframe.webview.ready").frameLocator("#active-frame");
  }

  async close(): Promise<void> {
    await this.page.close().catch(() => undefined);
  }
}
