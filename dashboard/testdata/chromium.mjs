// chromium.mjs launches Debian's headless chromium through playwright-core
// (found through NODE_PATH) for browser.mjs and scenarios.mjs: a fresh
// profile each run (launchPersistentContext is how playwright takes
// --user-data-dir), closed and removed whatever the caller's fn does.
import { createRequire } from "node:module";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

// withChromium runs fn with the browser context and returns what it does.
export async function withChromium(executablePath, fn) {
  const require = createRequire(process.env.NODE_PATH + "/");
  const { chromium } = require("playwright-core");
  const profile = mkdtempSync(join(tmpdir(), "art-chromium-"));
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    timeout: 60000,
    viewport: { width: 1280, height: 800 },
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"],
  });
  try {
    return await fn(browser);
  } finally {
    await browser.close();
    rmSync(profile, { recursive: true, force: true });
  }
}
